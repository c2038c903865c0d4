"""The stack root: one `Pulumi.<stack>.yaml` read section by section by the components' own readers, then the rules
between sections, once.

`gcp:project` and `gcp:region` are read first; `tpuplane:cluster` is read as `TpuClusterArgs` with them; each
`tpuplane:tpuPools` entry as `TpuSlicePoolArgs` on that cluster; each `tpuplane:reservations` entry as
`TpuReservationArgs` in its zone; `tpuplane:pathways` as `SharedPathwaysServiceArgs` on the pool group it names;
`tpuplane:kueue` as `BatchStackArgs` over the pools (less the service's slices); `tpuplane:storage` as
`TeamStorageArgs` over the Kueue teams and `tpuplane:dashboard` as `FleetDashboardArgs`; then the rules that span
sections (node limit, unique names, reservation fit, node auto-provisioning's limits) run once. Every section reports its own problems in the
user's spelling; one `ConfigError` lists them all. What comes out is each component's Args, already read: the
program hands them to the components, which do not read them again.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

from pydantic import Field

from tpuplane.infra.args import Source, read
from tpuplane.infra.batch.args import platform_problems
from tpuplane.infra.batch.kueue_config import WorkloadTeam
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.autoscaling import PoolReach, autoprovisioning_problems
from tpuplane.infra.fleet.cluster import (
    CPU_POOL_NAME,
    ClusterSpec,
    cluster_problems,
    cpu_pool_reach,
    needs_multi_networking,
)
from tpuplane.infra.fleet.nodepools import chips_by_generation, plan_tpu_pools
from tpuplane.infra.fleet.pools import SlicePoolSpec, slice_pool_problems
from tpuplane.infra.fleet.reservations import ReservationSpec, own_reservation_name, reservation_problems
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.monitoring.dashboard import DashboardSpec, read_dashboard
from tpuplane.infra.naming import GKE_MAX_NODES, PROJECT_ID, REGION, node_service_account_id
from tpuplane.infra.pathways.args import SidecarBuild, read_sidecar_build
from tpuplane.infra.pathways.config import PathwaysConfig, pathways_section_problems, service_problems
from tpuplane.infra.pathways.proxy import JanitorSpec, read_janitor
from tpuplane.infra.storage.args import TeamStorageSpec, read_team_storage
from tpuplane.infra.storage.volumes import lustre_legacy_port

CLUSTER, POOLS, RESERVATIONS = "tpuplane:cluster", "tpuplane:tpuPools", "tpuplane:reservations"
KUEUE, PATHWAYS = "tpuplane:kueue", "tpuplane:pathways"
STORAGE, DASHBOARD = "tpuplane:storage", "tpuplane:dashboard"
SECTIONS = (CLUSTER, POOLS, RESERVATIONS, KUEUE, PATHWAYS, STORAGE, DASHBOARD)
T = TypeVar("T")


class StackRoot(ConfigModel):
    """The keys of other namespaces a stack reads: its project and region."""

    project: str = Field(alias="gcp:project", pattern=f"^{PROJECT_ID.pattern}$",
                         description="The GCP project of every resource.")
    region: str = Field(alias="gcp:region", pattern=f"^{REGION.pattern}$",
                        description="The region: the cluster's control plane (when regional) and the scratch bucket.")


@dataclass(frozen=True)
class StackConfig:
    """Everything one stack declares, as the Args of the components its program composes, already read."""

    project: str
    region: str
    cluster: ClusterSpec
    tpu_pools: tuple[SlicePoolSpec, ...]
    reservations: tuple[ReservationSpec, ...]
    batch: BatchPlatform
    storage: TeamStorageSpec
    dashboard: DashboardSpec | None = None
    pathways: PathwaysConfig | None = None
    janitors: tuple[JanitorSpec, ...] = ()
    sidecar: SidecarBuild | None = None
    """The sidecar image to build, when `tpuplane:pathways.sidecar` asks for one (and the project's folder is
    known: paths in the config start there)."""

    def stack_reservation(self, pool: SlicePoolSpec) -> ReservationSpec | None:
        """The reservation of this stack a pool consumes, whether named by name or by this project's path."""
        name = own_reservation_name(pool)
        return next((r for r in self.reservations if r.name == name), None) if name else None

    def pool_by_name(self, name: str) -> SlicePoolSpec | None:
        return next((p for p in self.tpu_pools if p.name == name), None)


@dataclass
class _Reading:
    """The problems found so far. Each section is read (a model, or its schema problems) and then judged by its
    own rules; a section that was read is supplied to the ones that depend on it, whatever its rules found."""

    problems: list[Problem] = field(default_factory=list)

    def section(self, read_it: Callable[[], T], rules: Callable[[T], list[Problem]] = lambda _: []) -> T | None:
        try:
            value = read_it()
        except ConfigError as exc:
            self._add(exc.problems)
            return None
        self._add(rules(value))
        return value

    def _add(self, problems: list[Problem]) -> None:
        """A value one section gives another (a cluster's zone for its pools) may be refused by both, at its own
        key: it is reported as the section it comes from found it."""
        known = {problem.subject for problem in self.problems}
        self.problems += [problem for problem in problems if problem.subject not in known]


def node_service_account_email(project: str, cluster: str) -> str:
    """The email of the service account `TpuCluster` makes for its nodes."""
    return f"{node_service_account_id(cluster)}@{project}.iam.gserviceaccount.com"


def load_stack_config(raw: Mapping[str, Any], *, project_dir: Path | None = None) -> StackConfig:
    """The `config:` mapping of a Pulumi.<stack>.yaml (objects already parsed), read; one ConfigError lists every
    problem. Keys of other namespaces (`gcp:zone`, `kubernetes:...`) are left to their providers; unknown
    `tpuplane:` keys are errors. With `project_dir` (where the config's paths start), a sidecar build is read too."""
    reading = _Reading([Problem(key, raw[key], f"one of {sorted(SECTIONS)}", "check the spelling of the key")
                        for key in raw if key.startswith("tpuplane:") and key not in SECTIONS])
    root = reading.section(lambda: read(StackRoot, {k: raw[k] for k in ("gcp:project", "gcp:region") if k in raw},
                                        Source.config("", StackRoot)))
    cluster_source = Source.config(CLUSTER, ClusterSpec)
    if CLUSTER not in raw:
        reading.problems.append(Problem(CLUSTER, None, "a value: this key is required"))
    cluster = reading.section(lambda: read(ClusterSpec, raw[CLUSTER], cluster_source, supplied={
        "project": root.project, "region": root.region} if root else {}),
        lambda cluster: cluster_problems(cluster, cluster_source)) if CLUSTER in raw else None

    on_cluster = {"project": cluster.project, "location": cluster.location, "zone": cluster.zone,
                  "cluster": cluster.name, "cluster_name": cluster.name,
                  "service_account": node_service_account_email(cluster.project, cluster.name)} if cluster else \
        {"project": root.project} if root else {}
    pools = [_read_entry(reading, entry, Source.config(f"{POOLS}[{i}]", SlicePoolSpec), on_cluster, (),
                         slice_pool_problems) for i, entry in enumerate(_entries(reading, raw, POOLS))]
    in_zone = {"project": cluster.project, "zone": cluster.zone, "keep_on_delete": cluster.production} \
        if cluster else {}
    reservations = [_read_entry(reading, entry, Source.config(f"{RESERVATIONS}[{i}]", ReservationSpec, origins={
        "zone": f"{CLUSTER}.zone"} if not isinstance(entry, Mapping) or "zone" not in entry else None),
        in_zone, () if cluster else ("zone",), reservation_problems)
        for i, entry in enumerate(_entries(reading, raw, RESERVATIONS))]
    reading.problems += _duplicate_problems(POOLS, [p.name if p else None for p in pools])
    reading.problems += _duplicate_problems(RESERVATIONS, [r.name if r else None for r in reservations])

    known = len(reading.problems)
    pathways = _read_pathways(reading, raw, cluster, pools)
    service_namespaces = [pathways.service_name] if pathways and len(reading.problems) == known else []
    if pathways is not None and pathways.pool is not None:
        pools = [p.model_copy(update={"dedicated_slices": pathways.held_slices,
                                      "dedicated_owner": pathways.service_name})
                 if p is not None and p.name == pathways.tpu_pool else p for p in pools]
        pathways = pathways.model_copy(update={"pool": pools_by_name(pools)[pathways.tpu_pool].kueue_pool})
    complete = cluster is not None and None not in pools and (pathways is not None or PATHWAYS not in raw)
    kueue_source = Source.config(KUEUE, BatchPlatform)
    batch = reading.section(lambda: read(BatchPlatform, raw.get(KUEUE) or {}, kueue_source, supplied={
        "pools": [p.kueue_pool for p in pools], "cpu_pool_name": CPU_POOL_NAME,
        "cpu_machine_type": cluster.cpu_pool.machine_type, "cpu_max_nodes": cluster.cpu_pool.max_nodes,
        "cluster_name": cluster.name, "service_namespaces": service_namespaces}
        if complete else {}), lambda batch: platform_problems(batch, kueue_source, pools_read=False) if complete
        else [])
    storage = _read_storage(reading, raw, root, batch)
    dashboard = reading.section(lambda: read_dashboard(raw[DASHBOARD], Source.config(DASHBOARD, DashboardSpec),
                                                       supplied={"project": root.project, "cluster_name":
                                                                 cluster.name} if root and cluster else {})) \
        if DASHBOARD in raw else None
    if batch is None or not complete or None in reservations or root is None or storage is None or \
            dashboard is None and DASHBOARD in raw:
        raise ConfigError(reading.problems)

    stack = StackConfig(
        project=root.project, region=root.region,
        cluster=cluster.model_copy(update={"multi_networking": needs_multi_networking(pools),
                                           "csi_drivers": sorted({s.kind for s in storage.storages}),
                                           "lustre_legacy_port": lustre_legacy_port(storage.volumes),
                                           "managed_prometheus": dashboard is not None}),
        tpu_pools=tuple(pools), reservations=tuple(reservations), batch=batch, storage=storage, dashboard=dashboard)
    reading.problems += _node_limit_problems(stack) + _reservation_fit_problems(stack)
    reading._add(_autoprovisioning_problems(stack))  # at the key the cluster's own rules may have named already
    if pathways is not None:
        pathways = pathways.model_copy(update={"client_namespaces": batch.team_namespaces, "sidecar_image":
                                               pathways.sidecar.image if pathways.sidecar else None,
                                               "project_number": storage.project_number})
        janitors = _read_janitors(reading, pathways, batch)
        sidecar = _read_sidecar(reading, pathways, stack, project_dir) if not reading.problems else None
        stack = dataclasses.replace(stack, pathways=pathways, janitors=janitors, sidecar=sidecar)
    if reading.problems:
        raise ConfigError(reading.problems)
    return stack


def _read_storage(reading: _Reading, raw: Mapping[str, Any], root: StackRoot | None, batch: BatchPlatform | None
                  ) -> TeamStorageSpec | None:
    """`TeamStorageArgs` over the Kueue teams (without teams, the one team `default`); an absent section still
    gives every team its service account."""
    source = Source.config(STORAGE, TeamStorageSpec)
    supplied: dict[str, Any] = {"project": root.project} if root else {}
    if batch is not None:
        supplied["teams"] = [WorkloadTeam(name=team.name, namespace=team.namespace) for team in batch.teams]
    return reading.section(lambda: read_team_storage(raw.get(STORAGE, {}), source, supplied=supplied,
                                                     teams_read=batch is not None))


def _read_entry(reading: _Reading, entry: object, source: Source, supplied: Mapping[str, Any],
                unread: tuple[str, ...], rules: Callable[[Any, Source], list[Problem]]) -> Any:
    """One entry of a list section, read as its component's Args and judged by the component's rules; None when
    it could not be read or names no TPU type of the catalog (nothing can be derived from it)."""
    value = reading.section(lambda: read(source.model, entry, source, supplied=supplied, unread=unread),
                            lambda value: rules(value, source))
    return value if value is not None and _resolves(value) else None


def _resolves(entry: SlicePoolSpec | ReservationSpec) -> bool:
    try:
        entry.spec
    except ConfigError:
        return False
    return True


def pools_by_name(pools: list[SlicePoolSpec | None]) -> dict[str, SlicePoolSpec]:
    return {p.name: p for p in pools if p is not None}


def _entries(reading: _Reading, raw: Mapping[str, Any], key: str) -> list[Any]:
    """A list section's entries (none when it is absent)."""
    entries = raw.get(key, [])
    if not isinstance(entries, list):
        reading.problems.append(Problem(key, entries, "Input should be a valid list"))
        return []
    return entries


def _read_pathways(reading: _Reading, raw: Mapping[str, Any], cluster: ClusterSpec | None,
                   pools: list[SlicePoolSpec | None]) -> PathwaysConfig | None:
    """The service on the pool group it names (supplied as Kueue sees it), on the stack's cluster."""
    section = raw.get(PATHWAYS)
    if section is None:
        return None
    named = pools_by_name(pools).get(section.get("tpuPool")) if isinstance(section, Mapping) else None
    supplied: dict[str, Any] = {"pool": named.kueue_pool} if named is not None else {}
    if cluster is not None:
        supplied.update(project=cluster.project, region=cluster.region, cluster_name=cluster.name,
                        node_service_account=node_service_account_email(cluster.project, cluster.name),
                        cpu_pool_name=CPU_POOL_NAME, cpu_machine_type=cluster.cpu_pool.machine_type)
    pool_names = [entry.get("name") for entry in raw.get(POOLS) or [] if isinstance(entry, Mapping)]
    source = Source.config(PATHWAYS, PathwaysConfig)
    return reading.section(lambda: read(PathwaysConfig, section, source, supplied=supplied),
                           lambda pw: service_problems(pw, source) + pathways_section_problems(pw, source, pool_names))


def _read_janitors(reading: _Reading, pathways: PathwaysConfig, batch: BatchPlatform) -> tuple[JanitorSpec, ...]:
    """One proxy janitor per namespace where clients run their proxies, each named at the team it serves."""
    if pathways.janitor_image is None:
        return ()
    teams = {team.team_namespace: f"{KUEUE}.teams[{i}].{'namespace' if team.namespace else 'name'}"
             for i, team in enumerate(batch.teams)}
    janitors = [reading.section(lambda: read_janitor({}, Source.config(PATHWAYS, JanitorSpec, origins={
        "namespace": teams.get(namespace, f"{KUEUE}.teams"), "image": f"{PATHWAYS}.janitorImage"}),
        supplied={"namespace": namespace, "image": pathways.janitor_image}))
        for namespace in pathways.proxy_namespaces]
    return tuple(j for j in janitors if j is not None)


def _read_sidecar(reading: _Reading, pathways: PathwaysConfig, stack: StackConfig, project_dir: Path | None
                  ) -> SidecarBuild | None:
    """`SidecarImageArgs` of the sidecar `tpuplane:pathways.sidecar` asks to build, its paths from `project_dir`."""
    sidecar = pathways.sidecar
    if project_dir is None or sidecar is None or sidecar.image is not None:
        return None
    jax_key = f"{PATHWAYS}.sidecar.jaxVersion" if sidecar.jax_version else f"{PATHWAYS}.jaxVersion"
    return reading.section(lambda: read_sidecar_build({}, Source.config(PATHWAYS, SidecarBuild, origins={
        "jax_version": jax_key}), supplied={
        "project": stack.project, "region": stack.region, "context_dir": project_dir / sidecar.context_path,
        "requirements_file": sidecar.requirements_in_context,
        "constraints_file": project_dir / sidecar.constraints_path, "jax_version": pathways.sidecar_jax_version}))


# ---- rules between sections -------------------------------------------------------------------------------------


def _duplicate_problems(key: str, names: list[str | None]) -> list[Problem]:
    seen: set[str] = set()
    problems = []
    for i, name in enumerate(names):
        if name is None:
            continue  # an entry that could not be read: reported already
        if name in seen:
            problems.append(Problem(f"{key}[{i}].name", name, "a name not used by another entry",
                                    "names become node pool and resource names, which must be unique"))
        seen.add(name)
    return problems


def _node_limit_problems(stack: StackConfig) -> list[Problem]:
    """Every pool counts toward GKE's node limit, the CPU pool too."""
    vms, cpu = sum(p.vms for p in stack.tpu_pools), stack.cluster.cpu_pool.max_nodes
    if vms + cpu <= GKE_MAX_NODES:
        return []
    return [Problem(POOLS, f"{vms} TPU VMs and {cpu} CPU nodes", f"at most {GKE_MAX_NODES} nodes per cluster",
                    "GKE's default limit; ask Google to raise it, or split the fleet into clusters")]


def _autoprovisioning_problems(stack: StackConfig) -> list[Problem]:
    """NAP's limits count every node of the cluster: they must leave room for every pool at its maximum."""
    nap = stack.cluster.autoprovisioning
    if nap is None:
        return []
    reach = [PoolReach(p.name, p.spec.machine_type, p.vms) for p in stack.tpu_pools] + [cpu_pool_reach(stack.cluster)]
    return autoprovisioning_problems(nap, Source.config(CLUSTER, ClusterSpec).at("autoprovisioning"), pools=reach,
                                     group_chips=chips_by_generation(plan_tpu_pools(stack.tpu_pools)))


def _reservation_fit_problems(stack: StackConfig) -> list[Problem]:
    """A reservation this stack declares lies in the cluster's zone, and the pools that consume it fit it: same
    machine, same maintenance interval, enough VMs."""
    problems = [Problem(f"{RESERVATIONS}[{j}].zone", res.zone, f"the cluster's zone {stack.cluster.zone}",
                        "the TPU pools that consume it run in the cluster's zone")
                for j, res in enumerate(stack.reservations) if res.zone != stack.cluster.zone]
    demand: dict[str, int] = {}
    for i, pool in enumerate(stack.tpu_pools):
        res = stack.stack_reservation(pool)
        if res is None:
            continue  # an existing reservation outside this stack: looked up by the program, or GKE checks it
        source = Source.config(f"{POOLS}[{i}]", SlicePoolSpec)
        if res.spec.machine_type != pool.spec.machine_type:
            problems.append(Problem(source.path("reservation"), pool.reservation,
                                    f"a reservation of {pool.spec.machine_type} machines",
                                    f"reservation '{res.name}' holds {res.spec.machine_type} "
                                    f"({res.tpu_type}); reserve {pool.tpu_type} or change the pool"))
            continue
        if res.maintenance_interval != pool.maintenance_interval:
            problems.append(Problem(source.path("maintenance_interval"), pool.maintenance_interval,
                                    f"{res.maintenance_interval}, as reservation '{res.name}' has",
                                    "GKE rejects a pool whose maintenance interval differs from its reservation's"))
        demand[res.name] = demand.get(res.name, 0) + pool.vms
    for j, res in enumerate(stack.reservations):
        needed = demand.get(res.name, 0)
        if needed > res.vms:
            problems.append(Problem(f"{RESERVATIONS}[{j}].slices", res.slices,
                                    f"at least {-(-needed // res.spec.vms_per_slice)} slices",
                                    f"the pools consuming '{res.name}' need {needed} VMs of {res.spec.machine_type}"))
    return problems
