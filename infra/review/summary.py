"""What a plan means for the fleet, read back from the planned resources alone.

A reviewer asks "how many chips, of which generation, on what capacity, queued how?" before "which
properties". The plan holds the answer, spread over NodePool inputs, Kueue manifests and the Pathways
JobSet; this module gathers it into one `FleetSummary`. It reads only what a plan file carries (type, name,
parent, inputs), so it summarises a fresh `tpuplane plan` and the plan files given to `tpuplane diff` alike.

Pure: resources in, frozen dataclasses out. `key_properties` names the few inputs of each resource type that
a reviewer needs when it is created or deleted.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.capacity import FLEX_START_LABEL, SPOT_LABEL
from tpuplane.infra.fleet.catalog import TpuSpec, find_generation, machine_type_generation, resolve_tpu_type
from tpuplane.infra.fleet.scheduling import ACCELERATOR_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, TOPOLOGY_LABEL
from tpuplane.infra.pathways.service import MANAGED_BY_LABELS
from tpuplane.infra.storage.volumes import STORAGE_KINDS, STORAGE_LABEL, LustreInstance
from tpuplane.infra.review.plan import Plan, PlannedResource, node_pool, pool_vms
from tpuplane.infra.review.resource_inputs import (
    BUCKET_GRANT,
    CLUSTER,
    CLUSTER_QUEUE,
    CONFIG_GROUP,
    DASHBOARD,
    GRANT_TYPES,
    IMAGE,
    JOBSET,
    LOCAL_QUEUE,
    NODE_POOL,
    PERSISTENT_VOLUME,
    RESOURCE_FLAVOR,
    ClaimRef,
    ClusterInputs,
    ClusterQueueInputs,
    Csi,
    ConfigGroupInputs,
    DashboardInputs,
    GrantInputs,
    HelmReleaseInputs,
    ImageInputs,
    Inputs,
    JobSetInputs,
    KubernetesInputs,
    LocalQueueInputs,
    NodePoolInputs,
    PersistentVolumeInputs,
    PersistentVolumeSpec,
    Quantity,
    ReservationInputs,
    ResourceFlavorInputs,
    read_inputs,
)

_APP_NAME = "app.kubernetes.io/name"  # the Pathways service's JobSet carries the service's name label
# Capacity modes, in the order a reviewer weighs them (guaranteed first).
CAPACITY_MODES = ("reservation", "on-demand", "flex-start", "queued", "spot")
# Single-host shapes by chips per VM, for pools without a placement policy.
_SINGLE_HOST_TOPOLOGIES = {1: ("1x1", "1x1x1"), 4: ("2x2", "2x2x1"), 8: ("2x4",)}


def range_text(low: float, high: float, spec: str = "d") -> str:
    """A count that scales as `low-high` ("16-64", "11,680-46,720" with spec ",.0f"); one number when it does not."""
    return format(high, spec) if low == high else f"{format(low, spec)}-{format(high, spec)}"


@dataclass(frozen=True)
class PoolGroup:
    """The node pools of one component (a TpuSlicePool): identical slices of one TPU type."""

    name: str
    tpu_type: str
    generation: str
    machine_type: str
    topology: str
    slices: int
    vms_per_slice: int
    chips_per_slice: int
    capacity: str  # one of CAPACITY_MODES
    reservation: str  # the reservation consumed, "" when none (or any)
    node_pools: tuple[str, ...]  # GKE node pool names
    node_labels: tuple[Mapping[str, str], ...]  # per node pool, the labels its nodes carry
    min_slices: int | None = None  # slices always there, when the pools scale (None: all `slices` are)
    held: tuple[bool, ...] = ()  # per node pool: always there (False: it scales from zero)

    @property
    def vms(self) -> int:
        return self.slices * self.vms_per_slice

    @property
    def chips(self) -> int:
        """Chips at the group's maximum: what quotas admit and what the cost estimate prices."""
        return self.slices * self.chips_per_slice

    @property
    def fewest_slices(self) -> int:
        """Slices at the group's minimum: all of them unless it scales."""
        return self.slices if self.min_slices is None else self.min_slices

    @property
    def min_chips(self) -> int:
        return self.fewest_slices * self.chips_per_slice

    @property
    def slices_text(self) -> str:
        """"4", or "1-4" for a group that scales."""
        return range_text(self.fewest_slices, self.slices)

    @property
    def vms_text(self) -> str:
        return range_text(self.fewest_slices * self.vms_per_slice, self.vms)

    @property
    def chips_text(self) -> str:
        return range_text(self.min_chips, self.chips)


@dataclass(frozen=True)
class CpuPool:
    name: str
    machine_type: str
    nodes: str  # "4" or "1-10" (autoscaling)
    node_labels: Mapping[str, str]


@dataclass(frozen=True)
class Quota:
    flavor: str
    resource: str
    nominal: str
    borrowing_limit: str = ""


@dataclass(frozen=True)
class Queue:
    """A ClusterQueue: its cohort, quotas per flavor, and the LocalQueues (namespace/name) that feed it."""

    name: str
    cohort: str
    quotas: tuple[Quota, ...]
    local_queues: tuple[str, ...]

    @property
    def flavors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(q.flavor for q in self.quotas))


@dataclass(frozen=True)
class Flavor:
    name: str
    node_labels: Mapping[str, str]
    pools: tuple[str, ...]  # pool groups and CPU pools whose nodes this flavor selects


@dataclass(frozen=True)
class PathwaysService:
    name: str
    namespace: str
    instance_type: str
    instances: str
    server_image: str


@dataclass(frozen=True)
class SidecarImage:
    name: str
    tags: tuple[str, ...]
    base_image: str


@dataclass(frozen=True)
class StorageVolume:
    """One storage entry of a plan: its kind, where the data lives, access, and the namespaces that mount it."""

    name: str
    kind: str
    location: str
    read_only: bool
    namespaces: tuple[str, ...]
    legacy_port: bool = False  # a Lustre instance the cluster's driver reaches on port 6988

    @property
    def kind_text(self) -> str:
        return f"{self.kind} (legacy port 6988)" if self.legacy_port else self.kind


@dataclass(frozen=True)
class Grant:
    """One IAM grant: who gets which role on what."""

    member: str
    role: str
    target: str  # "bucket <name>" or "project <id>"
    resource: str  # the grant's resource name in the plan


@dataclass(frozen=True)
class FleetSummary:
    project: str
    stack: str
    cluster: str  # "name (location)", "" without a cluster
    pool_groups: tuple[PoolGroup, ...]
    cpu_pools: tuple[CpuPool, ...]
    flavors: tuple[Flavor, ...]
    queues: tuple[Queue, ...]
    pathways: tuple[PathwaysService, ...]
    sidecar_images: tuple[SidecarImage, ...]
    resource_counts: tuple[tuple[str, int], ...]  # (short type, count), most first
    config_objects: tuple[tuple[str, str, str], ...]  # (ConfigGroup name, kind, name)
    storage: tuple[StorageVolume, ...] = ()
    grants: tuple[Grant, ...] = ()
    autoprovisioning: tuple[tuple[str, int], ...] = ()  # node auto-provisioning: (resource type, maximum)
    dashboards: tuple[str, ...] = ()  # Cloud Monitoring dashboards' titles

    @property
    def total_resources(self) -> int:
        return sum(n for _, n in self.resource_counts)

    def chips_by_generation(self) -> dict[str, int]:
        chips: dict[str, int] = {}
        for group in self.pool_groups:
            chips[group.generation] = chips.get(group.generation, 0) + group.chips
        return dict(sorted(chips.items()))

    def chips_by_mode(self, *, minimum: bool = False) -> dict[tuple[str, str], int]:
        """(generation, capacity mode) -> chips: what list prices apply to; the groups at their maximum, or with
        `minimum` at their minimum (scaled down as far as they go)."""
        chips: dict[tuple[str, str], int] = {}
        for group in self.pool_groups:
            key = (group.generation, group.capacity)
            chips[key] = chips.get(key, 0) + (group.min_chips if minimum else group.chips)
        return dict(sorted(chips.items()))


def short_type(resource_type: str) -> str:
    """`gcp:container/nodePool:NodePool` -> `NodePool`."""
    return resource_type.rsplit(":", 1)[-1]


def urn_name(urn: str | None) -> str:
    return (urn or "").rsplit("::", 1)[-1]


def _text(value: Quantity | None) -> str:
    """A read value as text: a quantity's number in JSON's spelling, nothing for an absent one."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


# ---------------------------------------------------------------------------------------------------------
# Node pools


def capacity_of(inputs: Mapping[str, Any] | NodePoolInputs) -> tuple[str, str]:
    """(capacity mode, reservation name) of a NodePool, from the fields GKE acts on."""
    pool = node_pool(inputs)
    config = pool.node_config
    if config and (config.spot or config.preemptible):
        return "spot", ""
    if config and config.flex_start:
        return "flex-start", ""
    if pool.queued_provisioning and pool.queued_provisioning.enabled:
        return "queued", ""
    affinity = config.reservation_affinity if config else None
    kind = affinity.consume_reservation_type if affinity else None
    if kind == "SPECIFIC_RESERVATION":
        return "reservation", ",".join(v.rsplit("/", 1)[-1] for v in affinity.values or ())  # type: ignore
    if kind == "ANY_RESERVATION":
        return "reservation", "(any)"
    return "on-demand", ""


@functools.lru_cache(maxsize=1024)  # one entry per pool shape: a fleet has a few
def _tpu_spec(generation: str, machine_type: str, chips_per_vm: int, topology: str) -> TpuSpec | None:
    """The catalog spec of a pool: its placement topology, else the one single-host shape of its machine."""
    prefix = find_generation(generation).prefix  # type: ignore[union-attr]  # generation came from the catalog
    candidates = (topology,) if topology else _SINGLE_HOST_TOPOLOGIES.get(chips_per_vm, ())
    for candidate in candidates:
        try:
            return resolve_tpu_type(f"{prefix}-{candidate}", machine_type=machine_type)
        except ConfigError:
            continue
    return None


def _machine_type(pool: NodePoolInputs) -> str:
    return (pool.node_config.machine_type if pool.node_config else None) or ""


def _topology(pool: NodePoolInputs) -> str:
    return (pool.placement_policy.tpu_topology if pool.placement_policy else None) or ""


def node_labels(inputs: Mapping[str, Any] | NodePoolInputs) -> dict[str, str]:
    """The labels GKE puts on a pool's nodes that Kueue flavors select on, plus the pool's own labels."""
    pool = node_pool(inputs)
    machine_type, config = _machine_type(pool), pool.node_config
    labels = {NODEPOOL_LABEL: pool.name or "", INSTANCE_TYPE_LABEL: machine_type}
    facts = machine_type_generation(machine_type) if machine_type else None
    if facts:
        spec = _tpu_spec(facts[0], machine_type, facts[1], _topology(pool))
        labels[ACCELERATOR_LABEL] = find_generation(facts[0]).accelerator  # type: ignore[union-attr]
        if spec is not None:
            labels[TOPOLOGY_LABEL] = spec.topology
    if config and config.spot:
        labels[SPOT_LABEL] = "true"
    if config and config.flex_start:
        labels[FLEX_START_LABEL] = "true"
    labels.update((config.labels if config else None) or {})
    return labels


def _pool_groups(resources: Sequence[PlannedResource]) -> tuple[tuple[PoolGroup, ...], tuple[CpuPool, ...]]:
    tpu: dict[str, list[tuple[PlannedResource, NodePoolInputs]]] = {}
    cpu: list[CpuPool] = []
    for r in resources:
        if r.type != NODE_POOL:
            continue
        pool = cast(NodePoolInputs, r.read())
        if machine_type_generation(_machine_type(pool)):
            tpu.setdefault(r.parent or r.name, []).append((r, pool))
        else:
            cpu.append(CpuPool(r.name, _machine_type(pool), pool_size(pool), node_labels(pool)))
    groups = []
    for parent, pools in tpu.items():
        first = pools[0][1]
        machine_type = _machine_type(first)
        generation, chips_per_vm = machine_type_generation(machine_type)  # type: ignore[misc]
        spec = _tpu_spec(generation, machine_type, chips_per_vm, _topology(first))
        vms = pool_vms(first)
        capacity, reservation = capacity_of(first)
        held = tuple(pool_floor(pool) > 0 for _, pool in pools)
        groups.append(PoolGroup(
            name=urn_name(parent) if parent.startswith("urn:") else parent,
            tpu_type=spec.name if spec else f"{generation} ({machine_type})",
            generation=generation, machine_type=machine_type,
            topology=spec.topology if spec else _topology(first), slices=len(pools), vms_per_slice=vms,
            chips_per_slice=vms * chips_per_vm, capacity=capacity, reservation=reservation,
            node_pools=tuple(pool.name or r.name for r, pool in pools),
            node_labels=tuple(node_labels(pool) for _, pool in pools),
            min_slices=sum(held) if not all(held) else None, held=held))
    return tuple(sorted(groups, key=lambda g: g.name)), tuple(sorted(cpu, key=lambda c: c.name))


def pool_floor(inputs: Mapping[str, Any] | NodePoolInputs) -> int:
    """VMs a pool always holds: its static size, else its autoscaling minimum (0: it scales from zero)."""
    pool = node_pool(inputs)
    if pool.autoscaling is not None:
        return pool.autoscaling.least or 0
    return pool_vms(pool)


def pool_size(inputs: Mapping[str, Any] | NodePoolInputs) -> str:
    """"4" for a fixed pool, "1-10" for an autoscaled one."""
    pool = node_pool(inputs)
    autoscaling = pool.autoscaling
    if autoscaling is not None and autoscaling.most is not None:
        return f"{autoscaling.least or 0}-{autoscaling.most}"
    size = pool.node_count if pool.node_count is not None else pool.initial_node_count
    return "" if size is None else str(size)


# ---------------------------------------------------------------------------------------------------------
# Kueue


def _flavors(resources: Sequence[PlannedResource], groups: tuple[PoolGroup, ...], cpu: tuple[CpuPool, ...]
             ) -> tuple[Flavor, ...]:
    flavors = []
    candidates = [(g.name, g.node_labels) for g in groups] + [(c.name, (c.node_labels,)) for c in cpu]
    for r in resources:
        if r.type != RESOURCE_FLAVOR:
            continue
        flavor = cast(ResourceFlavorInputs, r.read())
        labels = dict((flavor.spec.node_labels if flavor.spec else None) or {})
        selected = tuple(name for name, pools in candidates
                         if labels and any(labels.items() <= dict(pool).items() for pool in pools))
        flavors.append(Flavor(_name(flavor, r.name), labels, selected))
    return tuple(sorted(flavors, key=lambda f: f.name))


def _name(obj: KubernetesInputs, default: str) -> str:
    return (obj.metadata.name if obj.metadata else None) or default


def _namespace(obj: KubernetesInputs) -> str:
    return (obj.metadata.namespace if obj.metadata else None) or ""


def _queues(resources: Sequence[PlannedResource]) -> tuple[Queue, ...]:
    feeders: dict[str, list[str]] = {}
    for r in resources:
        if r.type == LOCAL_QUEUE:
            local = cast(LocalQueueInputs, r.read())
            target = (local.spec.cluster_queue if local.spec else None) or ""
            feeders.setdefault(target, []).append(f"{_namespace(local) or 'default'}/{_name(local, r.name)}")
    queues = [_queue(cast(ClusterQueueInputs, r.read()), r.name, feeders)
              for r in resources if r.type == CLUSTER_QUEUE]
    return tuple(sorted(queues, key=lambda q: q.name))


def _queue(queue: ClusterQueueInputs, name: str, feeders: Mapping[str, list[str]]) -> Queue:
    """A ClusterQueue's cohort and quotas, and the LocalQueues (of `feeders`) that feed it."""
    spec = queue.spec
    name = _name(queue, name)
    quotas = tuple(
        Quota(flavor.name or "", res.name or "", _text(res.nominal_quota), _text(res.borrowing_limit))
        for group in (spec.resource_groups if spec else None) or () for flavor in group.flavors or ()
        for res in flavor.resources or ())
    cohort = (spec.cohort_name or spec.cohort) if spec else None
    return Queue(name, cohort or "", quotas, tuple(sorted(feeders.get(name, ()))))


# ---------------------------------------------------------------------------------------------------------
# Pathways and images


def _arg(args: Iterable[str], flag: str) -> str:
    prefix = f"--{flag}="
    return next((a[len(prefix):] for a in args if a.startswith(prefix)), "")


def _pathways(resources: Sequence[PlannedResource]) -> tuple[PathwaysService, ...]:
    services = []
    for r in resources:
        if r.type != JOBSET:
            continue
        jobset = cast(JobSetInputs, r.read())
        labels = (jobset.metadata.labels if jobset.metadata else None) or {}
        if labels.get(_APP_NAME) != MANAGED_BY_LABELS[_APP_NAME]:
            continue
        containers = [c for job in (jobset.spec.replicated_jobs if jobset.spec else None) or ()
                      for c in _containers(job)]
        head = next((c for c in containers if _arg(c.args or (), "instance_type")), None)
        args = (head.args if head else None) or ()
        services.append(PathwaysService(
            _name(jobset, ""), _namespace(jobset), _arg(args, "instance_type"), _arg(args, "instance_count"),
            (head.image if head else None) or ""))
    return tuple(sorted(services, key=lambda s: (s.namespace, s.name)))


def _containers(job) -> list:
    pod = job.template and job.template.spec and job.template.spec.template and job.template.spec.template.spec
    return list((pod.containers if pod else None) or ())


def _images(resources: Sequence[PlannedResource]) -> tuple[SidecarImage, ...]:
    images = []
    for r in resources:
        if r.type == IMAGE:
            image = cast(ImageInputs, r.read())
            images.append(SidecarImage(r.name, tuple(image.tags or ()), _base_image(image)))
    return tuple(sorted(images, key=lambda i: i.name))


def _base_image(image: ImageInputs) -> str:
    return (image.build_args.base_image if image.build_args else None) or ""


_KIND_BY_DRIVER = {kind.driver: kind.kind for kind in STORAGE_KINDS.values()}


def _storage(resources: Sequence[PlannedResource]) -> tuple[StorageVolume, ...]:
    """Each storage entry from its PersistentVolumes (one per namespace that mounts it), Lustre's with the port of
    the cluster's driver."""
    legacy_port = any(cast(ClusterInputs, r.read()).lustre_legacy_port for r in resources if r.type == CLUSTER)
    found: dict[str, StorageVolume] = {}
    for r in resources:
        if r.type != PERSISTENT_VOLUME:
            continue
        volume = cast(PersistentVolumeInputs, r.read())
        spec = volume.spec or PersistentVolumeSpec()
        csi = spec.csi or Csi()
        name = ((volume.metadata.labels if volume.metadata else None) or {}).get(STORAGE_LABEL) or r.name
        namespace = spec.claim_ref.namespace if spec.claim_ref else None
        seen = found.get(name)
        kind = _KIND_BY_DRIVER.get(csi.driver or "", csi.driver or "")
        found[name] = StorageVolume(
            name, kind, _location(kind, csi.volume_handle or "", spec.mount_options or ()),
            "ReadOnlyMany" in (spec.access_modes or ()),
            tuple(sorted({*(seen.namespaces if seen else ()), *([namespace] if namespace else [])})),
            legacy_port and kind == LustreInstance.kind)
    return tuple(sorted(found.values(), key=lambda v: v.name))


def _location(kind: str, handle: str, options: Sequence[str]) -> str:
    """Where a volume's data lives: a bucket (and its folder), else the driver's handle of the instance or disk."""
    if kind != "gcs":
        return handle.split(":")[0]  # Lustre's handles end in :<namespace>
    folder = next((o.partition("=")[2] for o in options if o.startswith("only-dir=")), "")
    return f"gs://{handle}/{folder}" if folder else f"gs://{handle}"


def grant_of(resource_type: str, name: str, inputs: Mapping[str, Any] | Inputs) -> Grant | None:
    """The grant a BucketIAMMember or projects IAMMember makes (raw inputs, or its `read()`); None for other
    resources."""
    if resource_type not in GRANT_TYPES:
        return None
    read = inputs if isinstance(inputs, Inputs) else read_inputs(resource_type, inputs)
    if not isinstance(read, GrantInputs):
        return None
    target = f"bucket {read.bucket or ''}" if resource_type == BUCKET_GRANT else f"project {read.project or ''}"
    return Grant(read.member or "", read.role or "", target, name)


def _grants(resources: Sequence[PlannedResource]) -> tuple[Grant, ...]:
    grants = (grant_of(r.type, r.name, r.read()) for r in resources if r.type in GRANT_TYPES)
    return tuple(sorted((g for g in grants if g is not None), key=lambda g: (g.member, g.target, g.role)))


def _autoprovisioning(cluster: ClusterInputs) -> tuple[tuple[str, int], ...]:
    """Node auto-provisioning's limits, (resource type, maximum); () when it is off."""
    autoscaling = cluster.cluster_autoscaling
    if autoscaling is None or not autoscaling.enabled:
        return ()
    return tuple((limit.resource_type or "", limit.maximum) for limit in autoscaling.resource_limits or ()
                 if limit.maximum is not None)


def dashboard_title(dashboard: DashboardInputs) -> str:
    try:
        title = json.loads(dashboard.dashboard_json).get("displayName") if dashboard.dashboard_json else None
    except (ValueError, AttributeError, RecursionError):
        title = None
    return title if isinstance(title, str) and title else "(untitled)"


def config_objects(inputs: Mapping[str, Any] | ConfigGroupInputs) -> list[tuple[str, str]]:
    """(kind, name) of each object a ConfigGroup applies, `namespace/name` when namespaced."""
    group = inputs if isinstance(inputs, ConfigGroupInputs) else ConfigGroupInputs.model_validate(inputs)
    found = []
    for obj in group.objs or ():
        namespace, name = _namespace(obj), _name(obj, "")
        found.append((obj.kind or "", f"{namespace}/{name}" if namespace else name))
    return found


def _cluster(resources: Sequence[PlannedResource]) -> str:
    for r in resources:
        if r.type == CLUSTER:
            cluster = cast(ClusterInputs, r.read())
            return f"{cluster.name or r.name} ({cluster.location or '?'})"
    return ""


def summarize(plan: Plan) -> FleetSummary:
    """The fleet a plan describes: TPU pool groups, Kueue queues, Pathways services, what else and how many."""
    project, stack, items = plan.project, plan.stack, plan.resources
    groups, cpu = _pool_groups(items)
    counts = Counter(short_type(r.type) for r in items)
    return FleetSummary(
        project=project, stack=stack, cluster=_cluster(items), pool_groups=groups, cpu_pools=cpu,
        flavors=_flavors(items, groups, cpu), queues=_queues(items), pathways=_pathways(items),
        sidecar_images=_images(items),
        resource_counts=tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        config_objects=tuple(sorted((r.name, kind, name) for r in items if r.type == CONFIG_GROUP
                                    for kind, name in config_objects(cast(ConfigGroupInputs, r.read())))),
        storage=_storage(items), grants=_grants(items),
        autoprovisioning=next((limits for r in items if r.type == CLUSTER
                               and (limits := _autoprovisioning(cast(ClusterInputs, r.read())))), ()),
        dashboards=tuple(sorted(dashboard_title(cast(DashboardInputs, r.read())) for r in items
                                if r.type == DASHBOARD)),
    )


# ---------------------------------------------------------------------------------------------------------
# Key properties of one resource


def _quota_text(quota: Quota) -> str:
    borrow = f" (+{quota.borrowing_limit} borrowable)" if quota.borrowing_limit else ""
    return f"{quota.resource}={quota.nominal}{borrow}"


def key_text(props: list[tuple[str, str]]) -> str:
    """Key properties on one line: `machine type: ct6e-standard-4t; nodes: 4`."""
    return "; ".join(f"{k}: {v}" for k, v in props)


def key_properties(resource_type: str, inputs: Mapping[str, Any] | Inputs) -> list[tuple[str, str]]:
    """The few properties that say what a resource is, as (label, value) pairs; [] when nothing stands out. Takes
    raw inputs, or a resource's `read()`."""
    read = inputs if isinstance(inputs, Inputs) else read_inputs(resource_type, inputs)
    if isinstance(read, NodePoolInputs):
        return _pool_properties(read)
    if isinstance(read, ClusterQueueInputs):
        queue = _queue(read, "", {})
        by_flavor = [f"{flavor}: " + ", ".join(_quota_text(q) for q in queue.quotas if q.flavor == flavor)
                     for flavor in queue.flavors]
        return [*([("cohort", queue.cohort)] if queue.cohort else []), ("quota", "; ".join(by_flavor))]
    if isinstance(read, LocalQueueInputs):
        return [("namespace", _namespace(read)), ("cluster queue", (read.spec.cluster_queue if read.spec else None)
                                                                     or "")]
    if isinstance(read, ResourceFlavorInputs):
        labels = (read.spec.node_labels if read.spec else None) or {}
        return [("node labels", ", ".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in sorted(labels.items())))]
    if isinstance(read, ConfigGroupInputs):
        return [("objects", ", ".join(f"{kind}/{name}" for kind, name in config_objects(read)))]
    if isinstance(read, ClusterInputs):
        channel = read.release_channel.channel if read.release_channel else None
        props = [(label, value) for label, value in
                 (("location", read.location), ("release channel", channel),
                  ("deletion protection", None if read.deletion_protection is None
                   else json.dumps(read.deletion_protection))) if value is not None]
        if limits := _autoprovisioning(read):
            props.append(("node auto-provisioning", ", ".join(f"{kind} <= {most}" for kind, most in limits)))
        return props
    if isinstance(read, ReservationInputs):
        specific = read.specific_reservation
        machine_type = specific.instance_properties.machine_type if specific and specific.instance_properties \
            else None
        return [("machine type", machine_type or ""), ("VMs", _text(specific.count if specific else None)),
                ("zone", read.zone or "")]
    if (grant := grant_of(resource_type, "", read)) is not None:
        return [("role", grant.role), ("on", grant.target), ("member", grant.member)]
    if isinstance(read, DashboardInputs):
        return [("title", dashboard_title(read))]
    if isinstance(read, PersistentVolumeInputs):
        spec = read.spec or PersistentVolumeSpec()
        csi, claim = spec.csi or Csi(), spec.claim_ref or ClaimRef()
        return [("driver", csi.driver or ""), ("handle", csi.volume_handle or ""),
                ("access", ", ".join(spec.access_modes or ())),
                ("claim", f"{claim.namespace or ''}/{claim.name or ''}")]
    if isinstance(read, JobSetInputs):
        jobs = (read.spec.replicated_jobs if read.spec else None) or ()
        return [("jobs", ", ".join(f"{j.name} x{1 if j.replicas is None else j.replicas}" for j in jobs))]
    if isinstance(read, ImageInputs):
        return [("tags", ", ".join(read.tags or ())), ("base", _base_image(read))]
    if isinstance(read, HelmReleaseInputs):
        return [(label, value) for label, value in
                (("chart", read.chart), ("version", read.version), ("namespace", read.namespace)) if value]
    if isinstance(read, KubernetesInputs) and read.metadata is not None:
        return [("namespace", read.metadata.namespace)] if read.metadata.namespace else []
    return []


def _pool_properties(pool: NodePoolInputs) -> list[tuple[str, str]]:
    config = pool.node_config
    capacity, reservation = capacity_of(pool)
    machine_type = _machine_type(pool)
    props = [("machine type", machine_type)]
    if _topology(pool):
        props.append(("topology", _topology(pool)))
    props += [("nodes", pool_size(pool)),
              ("capacity", f"{capacity} {reservation}".strip() if machine_type_generation(machine_type) else capacity)]
    if config and config.max_run_duration:
        props.append(("max run", config.max_run_duration))
    profile = pool.network_config.accelerator_network_profile if pool.network_config else None
    if profile:
        props.append(("accelerator network", profile))
    locations = pool.node_locations or [pool.location]
    props.append(("zones", ",".join(z for z in locations if z)))
    return props
