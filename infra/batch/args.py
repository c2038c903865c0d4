"""The Args of `BatchStack` (a plain mapping) -> `BatchPlatform`, checked by the stack config's own models and
rules before the component registers anything.

Errors name the Args field (`BatchStackArgs.teams[1].share`), never a stack config path.
"""

from __future__ import annotations

from typing import Any, Mapping

from tpuplane.infra.args import check_args, model_from_args, reject_unknown, renamed
from tpuplane.infra.batch.kueue import kueue_problems
from tpuplane.infra.batch.kueue_config import KueueConfig
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.config import CpuPoolConfig, TpuPoolConfig, tpu_type_problem
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.cluster import CPU_POOL_NAME
from tpuplane.infra.naming import DNS_LABEL

ARGS = "BatchStackArgs"
_POOL_FIELDS = {"name", "tpu_type", "slices", "capacity", "machine_type", "max_run_duration"}
_KUEUE_FIELDS = {"teams": "teams", "cohort": "cohort", "kueue_version": "version", "jobset_version": "jobset_version"}
_CPU_FIELDS = {"cpu_machine_type": "machine_type", "cpu_max_nodes": "max_nodes"}
_OTHER_FIELDS = {"pools", "cpu_pool_name", "cluster_name", "service_namespaces"}
# The stack config's rules speak in config paths; these are the Args fields they mean.
_PATHS = {"tpuplane:kueue.version": f"{ARGS}.kueue_version", "tpuplane:kueue": ARGS,
          "tpuplane:cluster.cpuPool.machineType": f"{ARGS}.cpu_machine_type",
          "tpuplane:cluster.cpuPool.maxNodes": f"{ARGS}.cpu_max_nodes"}


def _pool(raw: Any, path: str) -> tuple[TpuPoolConfig, int]:
    check_args(raw, "KueuePoolArgs")
    reject_unknown(raw, path, {*_POOL_FIELDS, "dedicated_slices"})
    pool = model_from_args(TpuPoolConfig, {k: v for k, v in raw.items() if k != "dedicated_slices"}, path)
    bad_type = tpu_type_problem(f"{path}.tpuType", pool.tpu_type, pool.machine_type)
    if bad_type:
        raise ConfigError(renamed([bad_type], {path: path}))
    dedicated = raw.get("dedicated_slices", 0)
    if isinstance(dedicated, bool) or not isinstance(dedicated, int) or not 0 <= dedicated <= pool.slices:
        raise ConfigError.at(f"{path}.dedicated_slices", dedicated, f"0 to slices ({pool.slices})")
    return pool, dedicated


def platform_from_args(args: Mapping[str, Any]) -> BatchPlatform:
    """The Kueue view of a cluster from `BatchStackArgs`; one ConfigError lists every problem."""
    check_args(args, ARGS)
    reject_unknown(args, ARGS, {*_OTHER_FIELDS, *_KUEUE_FIELDS, *_CPU_FIELDS})
    pools = args.get("pools")
    if not isinstance(pools, list):
        raise ConfigError.at(f"{ARGS}.pools", pools, "a list of KueuePoolArgs", "TpuSlicePool(...).kueue_pool")
    problems: list[Problem] = []
    groups: list[tuple[TpuPoolConfig, int]] = []
    for i, raw in enumerate(pools):
        try:
            groups.append(_pool(raw, f"{ARGS}.pools[{i}]"))
        except ConfigError as exc:
            problems += exc.problems
    names = [pool.name for pool, _ in groups]
    problems += [Problem(f"{ARGS}.pools[{i}].name", name, "a name no other pool uses")
                 for i, name in enumerate(names) if name in names[:i]]
    try:
        kueue = model_from_args(KueueConfig, {field: args[key] for key, field in _KUEUE_FIELDS.items()
                                              if key in args}, ARGS)
        cpu_pool = model_from_args(CpuPoolConfig, {field: args[key] for key, field in _CPU_FIELDS.items()
                                                   if key in args}, ARGS)
    except ConfigError as exc:  # the models name their own fields: `version` is `kueue_version` here
        raise ConfigError(problems + renamed(exc.problems, {f"{ARGS}.{field}": f"{ARGS}.{key}" for key, field
                                                            in [*_KUEUE_FIELDS.items(), *_CPU_FIELDS.items()]}))
    cpu_pool_name = args.get("cpu_pool_name", CPU_POOL_NAME)
    if not isinstance(cpu_pool_name, str) or not DNS_LABEL.fullmatch(cpu_pool_name):
        problems.append(Problem(f"{ARGS}.cpu_pool_name", cpu_pool_name, "a GKE node pool name"))
    namespaces = args.get("service_namespaces", [])
    if not isinstance(namespaces, list) or not all(isinstance(n, str) and DNS_LABEL.fullmatch(n)
                                                   for n in namespaces):
        problems.append(Problem(f"{ARGS}.service_namespaces", namespaces, "a list of namespace names"))
    if problems:
        raise ConfigError(problems)
    platform = BatchPlatform(
        tpu_pools=tuple(pool for pool, _ in groups), kueue=kueue, cpu_pool=cpu_pool,
        cluster_name=str(args.get("cluster_name", "")),
        dedicated_slices={pool.name: n for pool, n in groups if n}, service_namespaces=tuple(namespaces))
    problems = kueue_problems(platform)
    if problems:
        raise ConfigError(renamed(problems, _PATHS))
    return platform
