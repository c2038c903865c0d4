"""The Args of `BatchStack` (a plain mapping) -> `BatchPlatform`, checked by the stack config's own models and
rules before the component registers anything; and the Args of the workloads and the image cache checked against it.

Errors name the Args field (`BatchStackArgs.teams[1].share`), never a stack config path.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from tpuplane.infra.args import (
    given,
    model_from_args,
    reject_unknown,
    renamed,
    snake_paths,
    text_list_problems,
    text_problems,
)
from tpuplane.infra.batch.image_cache import DEFAULT_CACHE_NAME, render_image_cache
from tpuplane.infra.batch.kueue import kueue_problems
from tpuplane.infra.batch.kueue_config import KueueConfig
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.config import CpuPoolConfig, TpuPoolConfig, pool_problems
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.naming import DNS_LABEL, GKE_NAME, K8S_NAME

ARGS = "BatchStackArgs"
_POOL_FIELDS = {"name", "tpu_type", "slices", "capacity", "machine_type", "max_run_duration"}
_KUEUE_FIELDS = {"teams": "teams", "cohort": "cohort", "kueue_version": "version", "jobset_version": "jobset_version"}
_CPU_FIELDS = {"cpu_machine_type": "machine_type", "cpu_max_nodes": "max_nodes"}
_OTHER_FIELDS = {"pools", "cpu_pool_name", "cluster_name", "service_namespaces"}
# The stack config's rules speak in config paths; these are the Args fields they mean.
_PATHS = {"tpuplane:kueue.version": f"{ARGS}.kueue_version", "tpuplane:kueue": ARGS,
          "tpuplane:cluster.cpuPool.machineType": f"{ARGS}.cpu_machine_type",
          "tpuplane:cluster.cpuPool.maxNodes": f"{ARGS}.cpu_max_nodes"}


def kueue_pool(raw: Any, path: str, cluster_name: str) -> tuple[TpuPoolConfig, int]:
    """One `KueuePoolArgs` (a pool group as Kueue sees it): the group's config and its dedicated slices."""
    raw = given(raw, path)
    reject_unknown(raw, path, {*_POOL_FIELDS, "dedicated_slices"})
    pool = model_from_args(TpuPoolConfig, {k: v for k, v in raw.items() if k != "dedicated_slices"}, path)
    problems = pool_problems(pool, path, cluster_name=cluster_name, project="", names_reservation=False)
    dedicated = raw.get("dedicated_slices", 0)
    if isinstance(dedicated, bool) or not isinstance(dedicated, int) or not 0 <= dedicated <= pool.slices:
        problems.append(Problem(f"{path}.dedicatedSlices", dedicated, f"0 to slices ({pool.slices})"))
    if problems:
        raise ConfigError(snake_paths(problems))
    return pool, dedicated


def platform_from_args(args: Mapping[str, Any]) -> BatchPlatform:
    """The Kueue view of a cluster from `BatchStackArgs`; one ConfigError lists every problem."""
    args = given(args, ARGS)
    reject_unknown(args, ARGS, {*_OTHER_FIELDS, *_KUEUE_FIELDS, *_CPU_FIELDS})
    pools = args.get("pools")
    if not isinstance(pools, list):
        raise ConfigError.at(f"{ARGS}.pools", pools, "a list of KueuePoolArgs", "TpuSlicePool(...).kueue_pool")
    problems = text_problems(args, ARGS, "cluster_name", pattern=GKE_NAME, allowed="a GKE cluster name",
                             required=False)
    cluster_name = args.get("cluster_name") or "" if not problems else ""
    groups: list[tuple[TpuPoolConfig, int]] = []
    for i, raw in enumerate(pools):
        try:
            groups.append(kueue_pool(raw, f"{ARGS}.pools[{i}]", cluster_name))
        except ConfigError as exc:
            problems += exc.problems
    if not problems and not cluster_name and any(pool.spec.needs_workload_policy for pool, _ in groups):
        problems.append(Problem(f"{ARGS}.cluster_name", None, "the cluster's name",
                                "tpu7/tpu7x workloads select the workload policies named after it"))
    names = [pool.name for pool, _ in groups]
    problems += [Problem(f"{ARGS}.pools[{i}].name", name, "a name no other pool uses")
                 for i, name in enumerate(names) if name in names[:i]]
    kueue = cpu_pool = None
    for model, fields in ((KueueConfig, _KUEUE_FIELDS), (CpuPoolConfig, _CPU_FIELDS)):
        try:  # each model names its own fields: `version` is `kueue_version` here
            built = model_from_args(model, {field: args[key] for key, field in fields.items() if key in args}, ARGS)
        except ConfigError as exc:
            problems += renamed(exc.problems, {f"{ARGS}.{field}": f"{ARGS}.{key}" for key, field in fields.items()})
            continue
        kueue, cpu_pool = (built, cpu_pool) if model is KueueConfig else (kueue, built)
    problems += text_problems(args, ARGS, "cpu_pool_name", pattern=DNS_LABEL, allowed="a GKE node pool name",
                              required=False)
    problems += text_list_problems(args, ARGS, "service_namespaces", pattern=K8S_NAME, allowed="a namespace name")
    if kueue is not None and isinstance(args.get("service_namespaces", []), list):
        teams = {team.team_namespace for team in kueue.teams} or {"default"}
        problems += [Problem(f"{ARGS}.service_namespaces[{i}]", namespace,
                             "a namespace no team (or, without teams, no workload) uses",
                             "Kueue leaves a service's namespace alone: jobs there would skip every queue")
                     for i, namespace in enumerate(args.get("service_namespaces", []))
                     if isinstance(namespace, str) and namespace in teams]
    if problems:
        raise ConfigError(problems)
    platform = BatchPlatform(
        tpu_pools=tuple(pool for pool, _ in groups), kueue=kueue, cpu_pool=cpu_pool,
        cluster_name=cluster_name,
        dedicated_slices={pool.name: n for pool, n in groups if n},
        service_namespaces=tuple(args.get("service_namespaces", [])))
    problems = kueue_problems(platform)
    if problems:
        raise ConfigError(renamed(problems, _PATHS))
    return platform


def rendered_workload(args: Mapping[str, Any], path: str, field: str, model: type,
                      render: Callable[[Any, BatchPlatform | None], Any]) -> Any:
    """The Args of `TpuWorkload` (`field` "workload") or `TpuExperiment` ("experiment"): the document checked and
    rendered against the pools and queues of `batch`; problems named under `<path>.<field>` or `<path>.batch`,
    the document's fields spelled as its file spells them."""
    args = given(args, path)
    reject_unknown(args, path, (field, "batch"))
    try:
        platform = platform_from_args(args["batch"]) if args.get("batch") is not None else None
    except ConfigError as exc:
        raise ConfigError(renamed(exc.problems, {ARGS: f"{path}.batch"})) from None
    spec = model_from_args(model, args.get(field), f"{path}.{field}", snake=False)
    try:
        return render(spec, platform)
    except ConfigError as exc:
        raise ConfigError([dataclasses.replace(p, path=f"{path}.{field}.{p.path}") for p in exc.problems]) from None


IMAGE_CACHE_ARGS = "ImageCacheArgs"


def image_cache_manifest(args: Mapping[str, Any]) -> dict[str, Any]:
    """`ImageCacheArgs` as its DaemonSet."""
    args = given(args, IMAGE_CACHE_ARGS)
    reject_unknown(args, IMAGE_CACHE_ARGS, ("images", "cache_name", "namespace"))
    images = args.get("images")
    problems = [] if isinstance(images, list) and all(isinstance(image, str) for image in images) else [
        Problem(f"{IMAGE_CACHE_ARGS}.images", images, "a list of image references")]
    problems += text_problems(args, IMAGE_CACHE_ARGS, "cache_name", pattern=K8S_NAME, required=False,
                              allowed="a DNS label of at most 63 characters")
    problems += text_problems(args, IMAGE_CACHE_ARGS, "namespace", pattern=K8S_NAME, required=False,
                              allowed="a namespace name")
    if problems:
        raise ConfigError(problems)
    try:
        return render_image_cache(images, name=args.get("cache_name", DEFAULT_CACHE_NAME),
                                  namespace=args.get("namespace", "default"))
    except ConfigError as exc:
        raise ConfigError([dataclasses.replace(p, path=f"{IMAGE_CACHE_ARGS}."
                                               f"{'cache_name' if p.path == 'name' else p.path}")
                           for p in exc.problems]) from None
