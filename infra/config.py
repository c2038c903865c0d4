"""The typed stack config: one schema for every `Pulumi.<stack>.yaml`.

Read from Pulumi stack config (`gcp:project`, `gcp:region` and the `tpuplane:` namespace) and validated into
pydantic models. Every rule breaks with a `ConfigError` that names the config path the user typed
(`tpuplane:tpuPools[1].slices`), the value given, what is allowed and a hint, before any resource exists.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import datetime, timedelta
from enum import Enum
from functools import cached_property
from typing import Any, Mapping

from pydantic import Field, ValidationError, field_validator

from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec, resolve_tpu_type
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.batch.kueue import kueue_problems
from tpuplane.infra.batch.kueue_config import KueueConfig
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.naming import (
    COMPUTE_NAME_MAX,
    GKE_MAX_NODES,
    DNS_LABEL,
    GKE_NAME_MAX,
    node_pool_name,
    node_service_account_id,
    PROJECT_ID,
    REGION,
    SERVICE_ACCOUNT_ID_MAX,
    workload_policy_name,
)
from tpuplane.infra.pathways.config import PathwaysConfig, pathways_problems, service_slices


MAX_RUN_DURATION_SECONDS = 7 * 24 * 3600  # flex-start and queued nodes live at most 7 days


class Capacity(str, Enum):
    """How a pool obtains TPU VMs. Exactly one per pool: GKE rejects most combinations."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"
    FLEX_START = "flex-start"
    QUEUED = "queued"
    RESERVATION = "reservation"


class MaintenanceExclusion(ConfigModel):
    """Freeze minor and node upgrades of a training cluster (Cluster Toolkit's practice)."""

    name: str = "training-freeze"
    start_time: str
    end_time: str | None = None  # None: until the end of the minor version's support (NO_MINOR_* scopes only)
    scope: str = Field("NO_MINOR_OR_NODE_UPGRADES", pattern="^(NO_UPGRADES|NO_MINOR_UPGRADES|NO_MINOR_OR_NODE_UPGRADES)$")

    @field_validator("start_time", "end_time")
    @classmethod
    def _rfc3339(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                moment = datetime.fromisoformat(v)
            except ValueError:
                raise ValueError("an RFC 3339 time such as 2026-12-01T00:00:00Z") from None
            if moment.tzinfo is None:
                raise ValueError("an RFC 3339 time with a zone, such as 2026-12-01T00:00:00Z")
        return v


class AuthorizedNetwork(ConfigModel):
    cidr: str
    name: str = ""

    @field_validator("cidr")
    @classmethod
    def _canonical_cidr(cls, v: str) -> str:
        """What GKE takes: an IPv4 network in its canonical form (no host bits, no `/00`, no `01.`)."""
        try:
            network = ipaddress.IPv4Network(v, strict=True)
        except ValueError:
            network = None
        if network is None or str(network) != v:
            raise ValueError("an IPv4 CIDR block such as 203.0.113.0/24 (address bits beyond the prefix zero)")
        return v


class CpuPoolConfig(ConfigModel):
    """The system/CPU pool: Kueue, JobSet, the Pathways head and client proxies run here."""

    machine_type: str = "n2-standard-16"
    min_nodes: int = Field(1, ge=0, le=GKE_MAX_NODES)
    max_nodes: int = Field(10, ge=1, le=GKE_MAX_NODES)


class ClusterConfig(ConfigModel):
    name: str
    zone: str
    regional: bool = True  # regional control plane, TPU nodes in `zone` (xpk's layout)
    release_channel: str = Field("REGULAR", pattern="^(RAPID|REGULAR|STABLE|EXTENDED)$")
    min_master_version: str | None = None
    maintenance_exclusion: MaintenanceExclusion | None = None
    deletion_protection: bool = True
    production: bool = False
    network: str = "default"
    subnetwork: str | None = None
    private_endpoint: bool = False
    master_authorized_networks: list[AuthorizedNetwork] = []
    cpu_pool: CpuPoolConfig = CpuPoolConfig()

    @field_validator("name")
    @classmethod
    def _dns_name(cls, v: str) -> str:
        if not DNS_LABEL.fullmatch(v) or len(v) > GKE_NAME_MAX:
            raise ValueError(f"a DNS label of at most {GKE_NAME_MAX} characters: lowercase letters, digits, '-'")
        return v


class TpuPoolConfig(ConfigModel):
    """A group of identical TPU slices: one GKE node pool per slice."""

    name: str
    tpu_type: str
    slices: int = Field(1, ge=1, le=GKE_MAX_NODES, strict=True)  # a slice is at least one node
    capacity: Capacity = Capacity.ON_DEMAND
    reservation: str | None = None
    machine_type: str | None = None  # e.g. ct6e-standard-8t: the single-host 2x4 machine
    max_run_duration: str | None = Field(None, pattern=r"^[1-9][0-9]{0,9}s$")
    maintenance_interval: str = Field("AS_NEEDED", pattern="^(AS_NEEDED|PERIODIC)$")
    disk_size_gb: int | None = Field(None, ge=10, le=65536)
    disk_type: str | None = Field(None, pattern="^(pd-standard|pd-balanced|pd-ssd|hyperdisk-balanced|"
                                                "hyperdisk-extreme|hyperdisk-throughput)$")
    # GKE's automated accelerator networking (extra NICs, managed DRANET); None: on for v6e, off otherwise.
    accelerator_network: bool | None = None

    @cached_property
    def spec(self) -> TpuSpec:
        """The catalog entry; valid once the stack config validated."""
        return resolve_tpu_type(self.tpu_type, machine_type=self.machine_type)

    @property
    def node_pool_names(self) -> list[str]:
        return [node_pool_name(self.name, i) for i in range(self.slices)]

    @property
    def vms(self) -> int:
        """TPU VMs (GKE nodes) of all the group's slices: the one count quotas, limits and reservations use."""
        return self.slices * self.spec.vms_per_slice


class ReservationConfig(ConfigModel):
    """A Compute Engine specific reservation this stack creates, sized for whole slices."""

    name: str
    tpu_type: str
    slices: int = Field(1, ge=1, le=GKE_MAX_NODES, strict=True)
    machine_type: str | None = None
    zone: str | None = None  # default: the cluster's zone
    maintenance_interval: str = Field("AS_NEEDED", pattern="^(AS_NEEDED|PERIODIC)$")  # must match its pools

    @cached_property
    def spec(self) -> TpuSpec:
        return resolve_tpu_type(self.tpu_type, machine_type=self.machine_type)

    @property
    def vms(self) -> int:
        """Machines the reservation holds: whole slices of its TPU type."""
        return self.slices * self.spec.vms_per_slice


RESERVATION_PATH = re.compile(
    r"^(projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/reservations/)?(?P<name>[a-z]([-a-z0-9]{0,61}[a-z0-9])?)"
    r"(?P<block>/reservationBlocks/[a-z0-9][-a-z0-9]*(/reservationSubBlocks/[a-z0-9][-a-z0-9]*)?)?$"
)


class StackConfig(ConfigModel):
    """Everything one stack declares. Field aliases are the Pulumi config keys."""

    project: str = Field(alias="gcp:project", pattern=f"^{PROJECT_ID.pattern}$")
    region: str = Field(alias="gcp:region", pattern=f"^{REGION.pattern}$")
    cluster: ClusterConfig = Field(alias="tpuplane:cluster")
    tpu_pools: list[TpuPoolConfig] = Field([], alias="tpuplane:tpuPools")
    reservations: list[ReservationConfig] = Field([], alias="tpuplane:reservations")
    kueue: KueueConfig = Field(KueueConfig(), alias="tpuplane:kueue")
    pathways: PathwaysConfig | None = Field(None, alias="tpuplane:pathways")

    def reservation_by_name(self, name: str) -> ReservationConfig | None:
        return next((r for r in self.reservations if r.name == name), None)

    def stack_reservation(self, pool: TpuPoolConfig) -> ReservationConfig | None:
        """The reservation of this stack a pool consumes, whether named by name or by this project's path."""
        if pool.capacity is not Capacity.RESERVATION or not pool.reservation:
            return None
        match = RESERVATION_PATH.fullmatch(pool.reservation)
        if not match or match["project"] not in (None, self.project) or match["block"]:
            return None
        return self.reservation_by_name(match["name"])

    def pool_by_name(self, name: str) -> TpuPoolConfig | None:
        return next((p for p in self.tpu_pools if p.name == name), None)

    def service_slices(self, pool: TpuPoolConfig) -> int:
        """Slices of `pool` the Shared Pathways Service holds for itself (its first ones), outside Kueue."""
        if self.pathways is None or self.pathways.tpu_pool != pool.name:
            return 0
        return service_slices(self.pathways, pool)

    @cached_property
    def batch_platform(self) -> BatchPlatform:
        """What Kueue, its queues and the workloads see of this stack's cluster."""
        return BatchPlatform(
            tpu_pools=tuple(self.tpu_pools), kueue=self.kueue, cpu_pool=self.cluster.cpu_pool,
            cluster_name=self.cluster.name,
            dedicated_slices={p.name: n for p in self.tpu_pools if (n := self.service_slices(p))},
            service_namespaces=(self.pathways.name,) if self.pathways is not None else ())


# --------------------------------------------------------------------------------------------------------------
# Loading: raw Pulumi config -> StackConfig, or one ConfigError listing every problem.

_HINTS = {
    "slices": "a slice is one node pool; use 1 or more",
    "capacity": "pick exactly one capacity mode per pool",
    "project": "the GCP project id, e.g. acme-ml",
    "region": "a GCP region such as us-east5",
}


def config_path(loc: tuple[Any, ...]) -> str:
    """('tpuplane:tpuPools', 1, 'slices') -> 'tpuplane:tpuPools[1].slices'."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _problem_from_pydantic(err: Mapping[str, Any]) -> Problem:
    loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
    field = next((p for p in reversed(loc) if isinstance(p, str)), "")
    allowed = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        allowed = "no such key: check the spelling against the config reference in README.md"
    given = err.get("input")
    if err["type"] == "missing":
        allowed, given = "a value: this key is required", None
    return Problem(config_path(loc), given, allowed, _HINTS.get(field, ""))


def load_stack_config(raw: Mapping[str, Any]) -> StackConfig:
    """Validate the `config:` mapping of a Pulumi.<stack>.yaml (objects already parsed).

    Keys of other namespaces (`gcp:zone`, `kubernetes:...`) are left to their providers; unknown
    `tpuplane:` keys are errors.
    """
    known = {f.alias for f in StackConfig.model_fields.values()}
    problems = [
        Problem(key, raw[key], f"one of {sorted(k for k in known if k.startswith('tpuplane:'))}",
                "check the spelling of the key")
        for key in raw
        if key.startswith("tpuplane:") and key not in known
    ]
    picked = {k: v for k, v in raw.items() if k in known}
    try:
        cfg = StackConfig.model_validate(picked)
    except ValidationError as exc:
        raise ConfigError(problems + [_problem_from_pydantic(e) for e in exc.errors()]) from None
    problems += stack_problems(cfg)
    if problems:
        raise ConfigError(problems)
    return cfg


# --------------------------------------------------------------------------------------------------------------
# Cross-field rules: what a single field validator cannot see.


def stack_problems(cfg: StackConfig) -> list[Problem]:
    """Every rule between fields, in config order. Pure: the same config gives the same list."""
    problems = _cluster_problems(cfg)
    problems += _duplicate_problems("tpuplane:tpuPools", [p.name for p in cfg.tpu_pools])
    problems += _duplicate_problems("tpuplane:reservations", [r.name for r in cfg.reservations])
    for i, res in enumerate(cfg.reservations):
        problems += _reservation_problems(cfg, i, res)
    for i, pool in enumerate(cfg.tpu_pools):
        problems += pool_problems(pool, f"tpuplane:tpuPools[{i}]", cluster_name=cfg.cluster.name,
                                  project=cfg.project)
    problems += _reservation_fit_problems(cfg)
    if not problems:  # the sections below read resolved pools
        problems += kueue_problems(cfg.batch_platform)
        problems += pathways_problems(cfg)
    return problems


def _cluster_problems(cfg: StackConfig) -> list[Problem]:
    problems = cluster_problems(cfg.cluster, region=cfg.region, path="tpuplane:cluster", region_path="gcp:region")
    vms = sum(p.vms for p in cfg.tpu_pools if _resolves(p))
    nodes = vms + cfg.cluster.cpu_pool.max_nodes  # every pool counts, the CPU pool too
    if nodes > GKE_MAX_NODES:
        problems.append(Problem("tpuplane:tpuPools", f"{vms} TPU VMs and {cfg.cluster.cpu_pool.max_nodes} CPU nodes",
                                f"at most {GKE_MAX_NODES} nodes per cluster",
                                "GKE's default limit; ask Google to raise it, or split the fleet into clusters"))
    return problems


def cluster_problems(cluster: ClusterConfig, *, region: str, path: str, region_path: str) -> list[Problem]:
    """GKE's rules for the cluster itself, under `path` (`tpuplane:cluster`, or a component's Args)."""
    problems = []
    if not re.fullmatch(rf"{re.escape(region)}-[a-z]", cluster.zone):
        problems.append(Problem(f"{path}.zone", cluster.zone, f"a zone of region {region}",
                                f"e.g. {region}-b, or change {region_path}"))
    sa = node_service_account_id(cluster.name)
    if len(sa) > SERVICE_ACCOUNT_ID_MAX:
        problems.append(Problem(f"{path}.name", cluster.name,
                                f"at most {SERVICE_ACCOUNT_ID_MAX - len(sa) + len(cluster.name)} characters",
                                f"the node service account id '{sa}' must fit in {SERVICE_ACCOUNT_ID_MAX} characters"))
    if cluster.private_endpoint and not cluster.master_authorized_networks:
        problems.append(Problem(f"{path}.privateEndpoint", True, "with masterAuthorizedNetworks",
                                "a private control plane is reached only from authorized networks inside the VPC; "
                                "list the ranges pulumi and kubectl run from"))
    problems += _maintenance_exclusion_problems(cluster.maintenance_exclusion, f"{path}.maintenanceExclusion")
    if cluster.cpu_pool.min_nodes > cluster.cpu_pool.max_nodes:
        problems.append(Problem(f"{path}.cpuPool.minNodes", cluster.cpu_pool.min_nodes,
                                f"at most maxNodes ({cluster.cpu_pool.max_nodes})"))
    return problems


def _resolves(pool: TpuPoolConfig) -> bool:
    try:
        pool.spec
    except ConfigError:
        return False
    return True


def _maintenance_exclusion_problems(exclusion: MaintenanceExclusion | None, path: str) -> list[Problem]:
    """GKE's rules: the window ends after it starts; NO_UPGRADES needs an end at most 30 days on."""
    if exclusion is None:
        return []
    start = datetime.fromisoformat(exclusion.start_time)
    if exclusion.end_time is None:
        if exclusion.scope == "NO_UPGRADES":
            return [Problem(f"{path}.endTime", None, "an end time at most 30 days after startTime with scope "
                            "NO_UPGRADES", "only NO_MINOR_UPGRADES and NO_MINOR_OR_NODE_UPGRADES may last until "
                            "the end of the version's support")]
        return []
    end = datetime.fromisoformat(exclusion.end_time)
    if end <= start:
        return [Problem(f"{path}.endTime", exclusion.end_time, f"a time after startTime ({exclusion.start_time})")]
    if exclusion.scope == "NO_UPGRADES" and end - start > timedelta(days=30):
        return [Problem(f"{path}.endTime", exclusion.end_time, "at most 30 days after startTime with scope NO_UPGRADES",
                        "use NO_MINOR_OR_NODE_UPGRADES for a longer freeze")]
    return []


def _duplicate_problems(path: str, names: list[str]) -> list[Problem]:
    seen: set[str] = set()
    problems = []
    for i, name in enumerate(names):
        if name in seen:
            problems.append(Problem(f"{path}[{i}].name", name, "a name not used by another entry",
                                    "names become node pool and resource names, which must be unique"))
        seen.add(name)
    return problems


def tpu_type_problem(path: str, tpu_type: str, machine_type: str | None) -> Problem | None:
    """The catalog's own error, re-pointed at the user's config path (`...tpuType` or `...machineType`)."""
    try:
        resolve_tpu_type(tpu_type, machine_type=machine_type)
    except ConfigError as exc:
        problem = exc.problems[0]
        return Problem(f"{path.rsplit('.', 1)[0]}.{problem.path}", problem.given, problem.allowed, problem.hint)
    return None


def _reservation_problems(cfg: StackConfig, i: int, res: ReservationConfig) -> list[Problem]:
    path = f"tpuplane:reservations[{i}]"
    problems = reservation_problems(res, path)
    if res.zone is not None and res.zone != cfg.cluster.zone:
        problems.append(Problem(f"{path}.zone", res.zone, f"the cluster's zone {cfg.cluster.zone}",
                                "the TPU pools that consume it run in the cluster's zone"))
    return problems


def reservation_problems(res: ReservationConfig, path: str) -> list[Problem]:
    """Compute Engine's rules for one reservation, under `path` (a stack config entry, or a component's Args)."""
    problems = []
    if not DNS_LABEL.fullmatch(res.name) or len(res.name) > COMPUTE_NAME_MAX:
        problems.append(Problem(f"{path}.name", res.name,
                                f"a lowercase name of at most {COMPUTE_NAME_MAX} characters: a-z, 0-9, '-'"))
    bad_type = tpu_type_problem(f"{path}.tpuType", res.tpu_type, res.machine_type)
    if bad_type:
        problems.append(bad_type)
    return problems


def pool_problems(pool: TpuPoolConfig, path: str, *, cluster_name: str, project: str,
                  names_reservation: bool = True) -> list[Problem]:
    """GKE's rules for one pool group, under `path` (a stack config entry, or a component's Args).
    `names_reservation=False`: a description that leaves out which reservation the pools consume (Kueue's)."""
    problems = []
    longest = node_pool_name(pool.name, pool.slices - 1)
    if not DNS_LABEL.fullmatch(pool.name):
        problems.append(Problem(f"{path}.name", pool.name, "lowercase letters, digits and '-', starting with a letter"))
    elif len(longest) > GKE_NAME_MAX:
        problems.append(Problem(f"{path}.name", pool.name,
                                f"at most {GKE_NAME_MAX - len(longest) + len(pool.name)} characters with "
                                f"{pool.slices} slices", f"node pool names such as '{longest}' must fit in "
                                                         f"{GKE_NAME_MAX} characters"))
    problems += _capacity_problems(project, path, pool, names_reservation)  # these need no catalog entry
    bad_type = tpu_type_problem(f"{path}.tpuType", pool.tpu_type, pool.machine_type)
    if bad_type:
        return problems + [bad_type]
    policy = workload_policy_name(cluster_name, pool.name)
    if pool.spec.needs_workload_policy and len(policy) > COMPUTE_NAME_MAX:
        problems.append(Problem(f"{path}.name", pool.name, f"a shorter name: the workload policy '{policy}' has "
                                f"{len(policy)} characters", f"Compute resource names allow at most {COMPUTE_NAME_MAX}"))
    return problems


def reservation_name_problems(pool: TpuPoolConfig, path: str, project: str) -> list[Problem]:
    """The reservation a `capacity: reservation` pool group names: given, a name or path, a block of `project`."""
    if not pool.reservation:
        return [Problem(f"{path}.reservation", None, "a reservation name, or "
                        "projects/P/reservations/R[/reservationBlocks/B]",
                        "capacity: reservation consumes a specific reservation")]
    if not (match := RESERVATION_PATH.fullmatch(pool.reservation)):
        return [Problem(f"{path}.reservation", pool.reservation,
                        "NAME or projects/P/reservations/R[/reservationBlocks/B[/reservationSubBlocks/S]]")]
    if match["block"] and match["project"] not in (None, project):
        return [Problem(f"{path}.reservation", pool.reservation, f"a reservation block of project {project}",
                        "GKE does not support shared extended reservations (blocks of another project)")]
    return []


def _capacity_problems(project: str, path: str, pool: TpuPoolConfig, names_reservation: bool) -> list[Problem]:
    """GKE's rules between capacity modes and pool fields (Cluster Toolkit's preconditions, as errors)."""
    problems = []
    if pool.capacity is Capacity.RESERVATION:
        if names_reservation:
            problems += reservation_name_problems(pool, path, project)
    elif pool.reservation:
        problems.append(Problem(f"{path}.reservation", pool.reservation,
                                f"no reservation with capacity {pool.capacity.value}",
                                "set capacity: reservation to consume it, or remove the key "
                                "(GKE rejects spot, flex-start and queued pools with a reservation affinity)"))
    mode = capacity_mode(pool.capacity.value)
    if pool.max_run_duration and not mode.run_duration:
        problems.append(Problem(f"{path}.maxRunDuration", pool.max_run_duration,
                                "only with capacity flex-start or queued",
                                "other capacity modes keep nodes until you remove them"))
    elif pool.max_run_duration and int(pool.max_run_duration[:-1]) > MAX_RUN_DURATION_SECONDS:
        problems.append(Problem(f"{path}.maxRunDuration", pool.max_run_duration,
                                f"at most {MAX_RUN_DURATION_SECONDS}s (7 days)", "GKE's limit for flex-start and queued"))
    if not mode.periodic_maintenance and pool.maintenance_interval == "PERIODIC":
        problems.append(Problem(f"{path}.maintenanceInterval", "PERIODIC", "AS_NEEDED with capacity "
                                f"{pool.capacity.value}", "PERIODIC maintenance needs a reservation that has it"))
    return problems


def _reservation_fit_problems(cfg: StackConfig) -> list[Problem]:
    """A pool that consumes a reservation this stack declares must fit it: same machine, enough VMs."""
    problems = []
    demand: dict[str, int] = {}
    for i, pool in enumerate(cfg.tpu_pools):
        res = cfg.stack_reservation(pool)
        if res is None:
            continue  # an existing reservation outside this stack: GKE checks it at create time
        try:
            pool_spec, res_spec = pool.spec, res.spec
        except ConfigError:
            continue  # already reported
        if res_spec.machine_type != pool_spec.machine_type:
            problems.append(Problem(f"tpuplane:tpuPools[{i}].reservation", pool.reservation,
                                    f"a reservation of {pool_spec.machine_type} machines",
                                    f"reservation '{res.name}' holds {res_spec.machine_type} "
                                    f"({res.tpu_type}); reserve {pool.tpu_type} or change the pool"))
            continue
        if res.maintenance_interval != pool.maintenance_interval:
            problems.append(Problem(f"tpuplane:tpuPools[{i}].maintenanceInterval", pool.maintenance_interval,
                                    f"{res.maintenance_interval}, as reservation '{res.name}' has",
                                    "GKE rejects a pool whose maintenance interval differs from its reservation's"))
        demand[res.name] = demand.get(res.name, 0) + pool.slices * pool_spec.vms_per_slice
    for j, res in enumerate(cfg.reservations):
        needed = demand.get(res.name, 0)  # only reservations whose spec resolved can have demand
        if needed and needed > res.vms:
            problems.append(Problem(f"tpuplane:reservations[{j}].slices", res.slices,
                                    f"at least {-(-needed // res.spec.vms_per_slice)} slices",
                                    f"the pools consuming '{res.name}' need {needed} VMs of {res.spec.machine_type}"))
    return problems
