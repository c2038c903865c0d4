"""The reader of `BatchStackArgs` (and of the `tpuplane:kueue` section): Kueue's rules for versions, teams and
quotas, checked before the component registers anything; and the Args of the workloads and the image cache,
checked against the platform they run on.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping

from packaging.version import Version

from tpuplane.infra.args import Source, given, read, read_checked, reject_unknown
from tpuplane.infra.batch.kueue import cpu_quota_problems, team_quota_problems
from tpuplane.infra.batch.kueue_config import (
    MIN_JOBSET,
    MIN_KUEUE,
    SYSTEM_NAMESPACES,
    UNASSIGNED_QUEUE,
    priority_problem,
)
from tpuplane.infra.batch.platform import BATCH_ARGS, BatchPlatform
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.pools import pool_problems
from tpuplane.infra.naming import DNS_LABEL
from tpuplane.infra.storage.args import TeamStorageSpec, read_team_storage


def read_platform(raw: object, source: Source | None = None, *, supplied: Mapping[str, Any] | None = None
                  ) -> BatchPlatform:
    """`BatchStackArgs`, or the `tpuplane:kueue` section (the stack supplies its pools, CPU pool, cluster name and
    service namespaces, already read); one ConfigError lists every problem."""
    pools_read = not (supplied and "pools" in supplied)
    return read_checked(BatchPlatform, raw, source or Source.args(BATCH_ARGS, BatchPlatform),
                        lambda platform, source: platform_problems(platform, source, pools_read=pools_read),
                        supplied=supplied)


def platform_problems(platform: BatchPlatform, source: Source, *, pools_read: bool = True) -> list[Problem]:
    """Kueue's rules: versions, cohort, the team layout and its quotas, the CPU pool's quota and the namespaces
    Kueue leaves alone; and GKE's rules for the pools, unless they were read where they came from
    (`pools_read=False`)."""
    problems = _pool_problems(platform, source) if pools_read else []
    problems += _version_problems(source, "kueue_version", platform.kueue_version, MIN_KUEUE, "Kueue")
    problems += _version_problems(source, "jobset_version", platform.jobset_version, MIN_JOBSET, "JobSet")
    if not DNS_LABEL.fullmatch(platform.cohort) or len(platform.cohort) > 63:
        problems.append(Problem(source.path("cohort"), platform.cohort, "a DNS label of at most 63 characters"))
    problems += _team_problems(platform, source)
    if not problems:  # quotas are meaningful only for valid pools and a valid team layout
        problems += team_quota_problems(platform, source)
    problems += cpu_quota_problems(platform, source)
    return problems + _service_namespace_problems(platform, source)


def _pool_problems(platform: BatchPlatform, source: Source) -> list[Problem]:
    """GKE's rules for each pool group as Kueue sees it, unique names, and the cluster's name where a pool's
    workload policies are named after it."""
    problems = [p for i, pool in enumerate(platform.pools)
                for p in pool_problems(pool, source.at("pools", i), cluster_name=platform.cluster_name, project="",
                                       names_reservation=False)]
    names = [pool.name for pool in platform.pools]
    problems += [Problem(source.path("pools", i, "name"), name, "a name no other pool uses")
                 for i, name in enumerate(names) if name in names[:i]]
    if not problems and not platform.cluster_name and any(p.spec.needs_workload_policy for p in platform.pools):
        problems.append(Problem(source.path("cluster_name"), None, "the cluster's name",
                                "tpu7/tpu7x workloads select the workload policies named after it"))
    return problems


def _version_problems(source: Source, field: str, given_version: str, minimum: Version, chart: str
                      ) -> list[Problem]:
    path, hint = source.path(field), f"the {chart} Helm chart version, e.g. {minimum}"
    if given_version.startswith("v"):
        return [Problem(path, given_version, "a chart version without a leading 'v'", f"write {given_version[1:]}")]
    try:
        parsed = Version(given_version)
    except ValueError:  # InvalidVersion, or a release part too long to read as a number
        return [Problem(path, given_version, "a version such as 0.19.2", hint)]
    if parsed < minimum:
        return [Problem(path, given_version, f"at least {minimum}", hint)]
    return []


def _team_problems(platform: BatchPlatform, source: Source) -> list[Problem]:
    problems: list[Problem] = []
    names: set[str] = set()
    namespaces: dict[str, str] = {}
    total = 0.0
    for i, team in enumerate(platform.teams):
        name_path = source.path("teams", i, "name")
        if not DNS_LABEL.fullmatch(team.name) or len(team.name) > 63:
            problems.append(Problem(name_path, team.name, "a DNS label of at most 63 characters: a-z, 0-9, '-'",
                                    "the name becomes a ClusterQueue, a LocalQueue and by default a namespace"))
        elif team.name == UNASSIGNED_QUEUE:
            problems.append(Problem(name_path, team.name, f"any name but '{UNASSIGNED_QUEUE}'",
                                    "that ClusterQueue holds the chips no team owns"))
        if team.name in names:
            problems.append(Problem(name_path, team.name, "a name no other team uses"))
        names.add(team.name)
        ns_path = source.path("teams", i, "namespace" if team.namespace else "name")
        ns = team.team_namespace
        if team.namespace is not None and (not DNS_LABEL.fullmatch(ns) or len(ns) > 63):
            problems.append(Problem(ns_path, ns, "a DNS label of at most 63 characters"))
        elif ns in SYSTEM_NAMESPACES or ns.startswith("kube-"):
            problems.append(Problem(ns_path, ns, "a namespace that is not a system namespace",
                                    f"system namespaces: {', '.join(sorted(SYSTEM_NAMESPACES))}"))
        elif ns in namespaces:
            problems.append(Problem(ns_path, ns, "a namespace no other team uses",
                                    f"team '{namespaces[ns]}' already owns it; a namespace maps to one LocalQueue"))
        namespaces.setdefault(ns, team.name)
        bad_priority = priority_problem(source.path("teams", i, "priority"), team.priority)
        if bad_priority:
            problems.append(bad_priority)
        total += team.share
        if total > 1 + 1e-9:
            problems.append(Problem(source.path("teams", i, "share"), team.share,
                                    f"at most {max(0.0, 1 - (total - team.share)):.6g}",
                                    f"team shares are fractions of the pool capacity and add up to {total:.6g} > 1"))
    return problems


def _service_namespace_problems(platform: BatchPlatform, source: Source) -> list[Problem]:
    """Kueue leaves a service's namespace alone: a team (or, without teams, any workload) there would skip every
    queue."""
    teams = set(platform.team_namespaces) or {"default"}
    return [Problem(source.path("service_namespaces") if source.origin("service_namespaces")
                    else source.path("service_namespaces", i), namespace,
                    "a namespace no team (or, without teams, no workload) uses",
                    "Kueue leaves a service's namespace alone: jobs there would skip every queue")
            for i, namespace in enumerate(platform.service_namespaces) if namespace in teams]


def rendered_workload(args: object, path: str, field: str, model: type, render: Callable[..., Any]) -> Any:
    """The Args of `TpuWorkload` (`field` "workload") or `TpuExperiment` ("experiment"): the document, spelled as
    its file spells it, checked and rendered against the pools and queues of `batch` (a `BatchStackArgs`) and the
    storage of `storage` (a `TeamStorageArgs`)."""
    args = given(args, path)
    reject_unknown(args, path, (field, "batch", "storage"))
    batch, storage = args.get("batch"), args.get("storage")
    platform = read_platform(batch, Source.args(f"{path}.batch", BatchPlatform)) if batch is not None else None
    team_storage = read_team_storage(storage, Source.args(f"{path}.storage", TeamStorageSpec)) \
        if storage is not None else None
    spec = read(model, args.get(field), Source.config(f"{path}.{field}", model))
    try:
        return render(spec, platform, storage=team_storage)
    except ConfigError as exc:
        raise ConfigError([dataclasses.replace(p, path=f"{path}.{field}.{p.path}") for p in exc.problems]) from None
