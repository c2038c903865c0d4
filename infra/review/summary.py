"""What a plan means for the fleet, read back from the planned resources alone.

A reviewer asks "how many chips, of which generation, on what capacity, queued how?" before "which
properties". The plan holds the answer, spread over NodePool inputs, Kueue manifests and the Pathways
JobSet; this module gathers it into one `FleetSummary`. It reads only what a plan file carries (type, name,
parent, inputs), so it summarises a fresh `tpuplane plan` and the plan files given to `tpuplane diff` alike.

Pure: resources in, frozen dataclasses out. `key_properties` names the few inputs of each resource type that
a reviewer needs when it is created or deleted.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.capacity import FLEX_START_LABEL, SPOT_LABEL
from tpuplane.infra.fleet.catalog import find_generation, machine_type_generation, resolve_tpu_type
from tpuplane.infra.fleet.scheduling import ACCELERATOR_LABEL, INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, TOPOLOGY_LABEL
from tpuplane.infra.pathways.service import MANAGED_BY_LABELS
from tpuplane.infra.storage.volumes import STORAGE_KINDS, STORAGE_LABEL
from tpuplane.infra.review.plan import (
    BUCKET_GRANT,
    CLUSTER,
    CONFIG_GROUP,
    NODE_POOL,
    PERSISTENT_VOLUME,
    PROJECT_GRANT,
    RESERVATION,
    Plan,
    PlannedResource,
    pool_vms,
)

CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
GRANT_TYPES = (BUCKET_GRANT, PROJECT_GRANT)
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
IMAGE = "docker-build:index:Image"

_APP_NAME = "app.kubernetes.io/name"  # the Pathways service's JobSet carries the service's name label
# Capacity modes, in the order a reviewer weighs them (guaranteed first).
CAPACITY_MODES = ("reservation", "on-demand", "flex-start", "queued", "spot")
# Single-host shapes by chips per VM, for pools without a placement policy.
_SINGLE_HOST_TOPOLOGIES = {1: ("1x1", "1x1x1"), 4: ("2x2", "2x2x1"), 8: ("2x4",)}


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
    def min_chips(self) -> int:
        return (self.slices if self.min_slices is None else self.min_slices) * self.chips_per_slice

    @property
    def slices_text(self) -> str:
        """"4", or "1-4" for a group that scales."""
        return str(self.slices) if self.min_slices is None else f"{self.min_slices}-{self.slices}"


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


def _dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


# ---------------------------------------------------------------------------------------------------------
# Node pools


def capacity_of(inputs: Mapping[str, Any]) -> tuple[str, str]:
    """(capacity mode, reservation name) of a NodePool, from the fields GKE acts on."""
    node_config = inputs.get("nodeConfig") or {}
    if node_config.get("spot") or node_config.get("preemptible"):
        return "spot", ""
    if node_config.get("flexStart"):
        return "flex-start", ""
    if _dig(inputs, "queuedProvisioning", "enabled"):
        return "queued", ""
    affinity = node_config.get("reservationAffinity") or {}
    kind = affinity.get("consumeReservationType", "")
    if kind == "SPECIFIC_RESERVATION":
        return "reservation", ",".join(str(v).rsplit("/", 1)[-1] for v in affinity.get("values") or ())
    if kind == "ANY_RESERVATION":
        return "reservation", "(any)"
    return "on-demand", ""


def _tpu_spec(generation: str, machine_type: str, chips_per_vm: int, topology: str):
    """The catalog spec of a pool: its placement topology, else the one single-host shape of its machine."""
    prefix = find_generation(generation).prefix  # type: ignore[union-attr]  # generation came from the catalog
    candidates = (topology,) if topology else _SINGLE_HOST_TOPOLOGIES.get(chips_per_vm, ())
    for candidate in candidates:
        try:
            return resolve_tpu_type(f"{prefix}-{candidate}", machine_type=machine_type)
        except ConfigError:
            continue
    return None


def node_labels(inputs: Mapping[str, Any]) -> dict[str, str]:
    """The labels GKE puts on a pool's nodes that Kueue flavors select on, plus the pool's own labels."""
    node_config = inputs.get("nodeConfig") or {}
    machine_type = node_config.get("machineType", "")
    labels = {NODEPOOL_LABEL: str(inputs.get("name", "")), INSTANCE_TYPE_LABEL: str(machine_type)}
    facts = machine_type_generation(machine_type) if machine_type else None
    if facts:
        generation = find_generation(facts[0])
        topology = _dig(inputs, "placementPolicy", "tpuTopology")
        spec = _tpu_spec(facts[0], machine_type, facts[1], topology or "")
        labels[ACCELERATOR_LABEL] = generation.accelerator  # type: ignore[union-attr]
        if spec is not None:
            labels[TOPOLOGY_LABEL] = spec.topology
    if node_config.get("spot"):
        labels[SPOT_LABEL] = "true"
    if node_config.get("flexStart"):
        labels[FLEX_START_LABEL] = "true"
    labels.update({str(k): str(v) for k, v in (node_config.get("labels") or {}).items()})
    return labels


def _pool_groups(resources: Sequence[PlannedResource]) -> tuple[tuple[PoolGroup, ...], tuple[CpuPool, ...]]:
    tpu: dict[str, list[PlannedResource]] = {}
    cpu: list[CpuPool] = []
    for r in resources:
        if r.type != NODE_POOL:
            continue
        machine_type = _dig(r.inputs, "nodeConfig", "machineType")
        if isinstance(machine_type, str) and machine_type_generation(machine_type):
            tpu.setdefault(r.parent or r.name, []).append(r)
        else:
            cpu.append(CpuPool(r.name, _text(machine_type), pool_size(r.inputs), node_labels(r.inputs)))
    groups = []
    for parent, pools in tpu.items():
        first = pools[0].inputs
        machine_type = first["nodeConfig"]["machineType"]
        generation, chips_per_vm = machine_type_generation(machine_type)  # type: ignore[misc]
        topology = _dig(first, "placementPolicy", "tpuTopology") or ""
        spec = _tpu_spec(generation, machine_type, chips_per_vm, topology)
        vms = pool_vms(first)
        capacity, reservation = capacity_of(first)
        held = tuple(pool_floor(p.inputs) > 0 for p in pools)
        groups.append(PoolGroup(
            name=urn_name(parent) if parent.startswith("urn:") else parent,
            tpu_type=spec.name if spec else f"{generation} ({machine_type})",
            generation=generation, machine_type=machine_type,
            topology=spec.topology if spec else topology, slices=len(pools), vms_per_slice=vms,
            chips_per_slice=vms * chips_per_vm, capacity=capacity, reservation=reservation,
            node_pools=tuple(str(p.inputs.get("name", p.name)) for p in pools),
            node_labels=tuple(node_labels(p.inputs) for p in pools),
            min_slices=sum(held) if not all(held) else None, held=held))
    return tuple(sorted(groups, key=lambda g: g.name)), tuple(sorted(cpu, key=lambda c: c.name))


def pool_floor(inputs: Mapping[str, Any]) -> int:
    """VMs a pool always holds: its static size, else its autoscaling minimum (0: it scales from zero)."""
    autoscaling = inputs.get("autoscaling")
    if isinstance(autoscaling, Mapping):
        low = autoscaling.get("minNodeCount", autoscaling.get("totalMinNodeCount"))
        return low if isinstance(low, int) and not isinstance(low, bool) else 0
    return pool_vms(inputs)


def pool_size(inputs: Mapping[str, Any]) -> str:
    """"4" for a fixed pool, "1-10" for an autoscaled one."""
    autoscaling = inputs.get("autoscaling") or {}
    low = autoscaling.get("minNodeCount", autoscaling.get("totalMinNodeCount"))
    high = autoscaling.get("maxNodeCount", autoscaling.get("totalMaxNodeCount"))
    if high is not None:
        return f"{low or 0}-{high}"
    return _text(inputs.get("nodeCount", inputs.get("initialNodeCount", "")))


# ---------------------------------------------------------------------------------------------------------
# Kueue


def _flavors(resources: Sequence[PlannedResource], groups: tuple[PoolGroup, ...], cpu: tuple[CpuPool, ...]
             ) -> tuple[Flavor, ...]:
    flavors = []
    for r in resources:
        if r.type != RESOURCE_FLAVOR:
            continue
        labels = {str(k): str(v) for k, v in (_dig(r.inputs, "spec", "nodeLabels") or {}).items()}
        candidates = [(g.name, g.node_labels) for g in groups] + [(c.name, (c.node_labels,)) for c in cpu]
        selected = tuple(name for name, pools in candidates
                         if labels and any(labels.items() <= dict(pool).items() for pool in pools))
        flavors.append(Flavor(_text(_dig(r.inputs, "metadata", "name")) or r.name, labels, selected))
    return tuple(sorted(flavors, key=lambda f: f.name))


def _queues(resources: Sequence[PlannedResource]) -> tuple[Queue, ...]:
    feeders: dict[str, list[str]] = {}
    for r in resources:
        if r.type == LOCAL_QUEUE:
            meta = r.inputs.get("metadata") or {}
            feeders.setdefault(_text(_dig(r.inputs, "spec", "clusterQueue")), []).append(
                f"{meta.get('namespace', 'default')}/{meta.get('name', r.name)}")
    queues = [_queue(r.inputs, r.name, feeders) for r in resources if r.type == CLUSTER_QUEUE]
    return tuple(sorted(queues, key=lambda q: q.name))


def _queue(inputs: Mapping[str, Any], name: str, feeders: Mapping[str, list[str]]) -> Queue:
    """A ClusterQueue's cohort and quotas, and the LocalQueues (of `feeders`) that feed it."""
    spec = inputs.get("spec") or {}
    name = _text(_dig(inputs, "metadata", "name")) or name
    quotas = tuple(
        Quota(str(flavor.get("name", "")), str(res.get("name", "")), _text(res.get("nominalQuota")),
              _text(res.get("borrowingLimit")))
        for group in spec.get("resourceGroups") or () for flavor in group.get("flavors") or ()
        for res in flavor.get("resources") or ())
    cohort = spec.get("cohortName", spec.get("cohort", ""))
    return Queue(name, _text(cohort), quotas, tuple(sorted(feeders.get(name, ()))))


# ---------------------------------------------------------------------------------------------------------
# Pathways and images


def _arg(args: Iterable[Any], flag: str) -> str:
    prefix = f"--{flag}="
    return next((str(a)[len(prefix):] for a in args if str(a).startswith(prefix)), "")


def _pathways(resources: Sequence[PlannedResource]) -> tuple[PathwaysService, ...]:
    services = []
    for r in resources:
        if r.type != JOBSET or _dig(r.inputs, "metadata", "labels", _APP_NAME) != MANAGED_BY_LABELS[_APP_NAME]:
            continue
        containers = [c for job in _dig(r.inputs, "spec", "replicatedJobs") or ()
                      for c in _dig(job, "template", "spec", "template", "spec", "containers") or ()]
        head = next((c for c in containers if _arg(c.get("args") or (), "instance_type")), {})
        args = head.get("args") or ()
        services.append(PathwaysService(
            _text(_dig(r.inputs, "metadata", "name")), _text(_dig(r.inputs, "metadata", "namespace")),
            _arg(args, "instance_type"), _arg(args, "instance_count"), _text(head.get("image"))))
    return tuple(sorted(services, key=lambda s: (s.namespace, s.name)))


def _images(resources: Sequence[PlannedResource]) -> tuple[SidecarImage, ...]:
    return tuple(sorted((
        SidecarImage(r.name, tuple(str(t) for t in r.inputs.get("tags") or ()),
                     _text(_dig(r.inputs, "buildArgs", "BASE_IMAGE")))
        for r in resources if r.type == IMAGE), key=lambda i: i.name))


_KIND_BY_DRIVER = {kind.driver: kind.kind for kind in STORAGE_KINDS.values()}


def _storage(resources: Sequence[PlannedResource]) -> tuple[StorageVolume, ...]:
    """Each storage entry from its PersistentVolumes (one per namespace that mounts it)."""
    found: dict[str, StorageVolume] = {}
    for r in resources:
        if r.type != PERSISTENT_VOLUME:
            continue
        name = _text(_dig(r.inputs, "metadata", "labels", STORAGE_LABEL)) or r.name
        csi = _dig(r.inputs, "spec", "csi") or {}
        namespace = _text(_dig(r.inputs, "spec", "claimRef", "namespace"))
        seen = found.get(name)
        kind = _KIND_BY_DRIVER.get(_text(csi.get("driver")), _text(csi.get("driver")))
        found[name] = StorageVolume(
            name, kind, _location(kind, _text(csi.get("volumeHandle")), _dig(r.inputs, "spec", "mountOptions")),
            "ReadOnlyMany" in (_dig(r.inputs, "spec", "accessModes") or ()),
            tuple(sorted({*(seen.namespaces if seen else ()), *([namespace] if namespace else [])})))
    return tuple(sorted(found.values(), key=lambda v: v.name))


def _location(kind: str, handle: str, options: Any) -> str:
    """Where a volume's data lives: a bucket (and its folder), else the driver's handle of the instance or disk."""
    if kind != "gcs":
        return handle.split(":")[0]  # Lustre's handles end in :<namespace>
    folder = next((str(o).partition("=")[2] for o in options or () if str(o).startswith("only-dir=")), "")
    return f"gs://{handle}/{folder}" if folder else f"gs://{handle}"


def grant_of(resource_type: str, name: str, inputs: Mapping[str, Any]) -> Grant | None:
    """The grant a BucketIAMMember or projects IAMMember makes; None for other resources."""
    if resource_type == BUCKET_GRANT:
        target = f"bucket {_text(inputs.get('bucket'))}"
    elif resource_type == PROJECT_GRANT:
        target = f"project {_text(inputs.get('project'))}"
    else:
        return None
    return Grant(_text(inputs.get("member")), _text(inputs.get("role")), target, name)


def _grants(resources: Sequence[PlannedResource]) -> tuple[Grant, ...]:
    grants = (grant_of(r.type, r.name, r.inputs) for r in resources)
    return tuple(sorted((g for g in grants if g is not None), key=lambda g: (g.member, g.target, g.role)))


def _autoprovisioning(resources: Sequence[PlannedResource]) -> tuple[tuple[str, int], ...]:
    for r in resources:
        autoscaling = r.inputs.get("clusterAutoscaling") if r.type == CLUSTER else None
        if isinstance(autoscaling, Mapping) and autoscaling.get("enabled"):
            return tuple((_text(limit.get("resourceType")), limit.get("maximum"))
                         for limit in autoscaling.get("resourceLimits") or () if isinstance(limit, Mapping))
    return ()


def dashboard_title(inputs: Mapping[str, Any]) -> str:
    body = inputs.get("dashboardJson")
    try:
        title = json.loads(body).get("displayName") if isinstance(body, str) else None
    except (ValueError, AttributeError):
        title = None
    return _text(title) or "(untitled)"


def config_objects(inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(kind, name) of each object a ConfigGroup applies, `namespace/name` when namespaced."""
    found = []
    for obj in inputs.get("objs") or ():
        if isinstance(obj, Mapping):
            meta = obj.get("metadata") or {}
            name = f"{meta['namespace']}/{meta.get('name', '')}" if meta.get("namespace") else meta.get("name", "")
            found.append((str(obj.get("kind", "")), str(name)))
    return found


def _cluster(resources: Sequence[PlannedResource]) -> str:
    for r in resources:
        if r.type == CLUSTER:
            return f"{r.inputs.get('name', r.name)} ({r.inputs.get('location', '?')})"
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
                                    for kind, name in config_objects(r.inputs))),
        storage=_storage(items), grants=_grants(items), autoprovisioning=_autoprovisioning(items),
        dashboards=tuple(sorted(dashboard_title(r.inputs) for r in items if r.type == DASHBOARD)),
    )


# ---------------------------------------------------------------------------------------------------------
# Key properties of one resource


def _quota_text(quota: Quota) -> str:
    borrow = f" (+{quota.borrowing_limit} borrowable)" if quota.borrowing_limit else ""
    return f"{quota.resource}={quota.nominal}{borrow}"


def key_properties(resource_type: str, inputs: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The few properties that say what a resource is, as (label, value) pairs; [] when nothing stands out."""
    if resource_type == NODE_POOL:
        node_config = inputs.get("nodeConfig") or {}
        capacity, reservation = capacity_of(inputs)
        props = [("machine type", _text(node_config.get("machineType")))]
        topology = _dig(inputs, "placementPolicy", "tpuTopology")
        if topology:
            props.append(("topology", _text(topology)))
        props += [("nodes", pool_size(inputs)),
                  ("capacity", f"{capacity} {reservation}".strip() if machine_type_generation(
                      _text(node_config.get("machineType"))) else capacity)]
        if node_config.get("maxRunDuration"):
            props.append(("max run", _text(node_config["maxRunDuration"])))
        profile = _dig(inputs, "networkConfig", "acceleratorNetworkProfile")
        if profile:
            props.append(("accelerator network", _text(profile)))
        locations = inputs.get("nodeLocations") or [inputs.get("location")]
        props.append(("zones", ",".join(_text(z) for z in locations if z)))
        return props
    if resource_type == CLUSTER_QUEUE:
        queue = _queue(inputs, "", {})
        by_flavor = [f"{flavor}: " + ", ".join(_quota_text(q) for q in queue.quotas if q.flavor == flavor)
                     for flavor in queue.flavors]
        return [*([("cohort", queue.cohort)] if queue.cohort else []), ("quota", "; ".join(by_flavor))]
    if resource_type == LOCAL_QUEUE:
        return [("namespace", _text(_dig(inputs, "metadata", "namespace"))),
                ("cluster queue", _text(_dig(inputs, "spec", "clusterQueue")))]
    if resource_type == RESOURCE_FLAVOR:
        labels = _dig(inputs, "spec", "nodeLabels") or {}
        return [("node labels", ", ".join(f"{k.rsplit('/', 1)[-1]}={v}" for k, v in sorted(labels.items())))]
    if resource_type == CONFIG_GROUP:
        return [("objects", ", ".join(f"{kind}/{name}" for kind, name in config_objects(inputs)))]
    if resource_type == CLUSTER:
        channel = _dig(inputs, "releaseChannel", "channel")
        props = [(label, _text(value)) for label, value in
                 (("location", inputs.get("location")), ("release channel", channel),
                  ("deletion protection", inputs.get("deletionProtection"))) if value is not None]
        if limits := _autoprovisioning([PlannedResource(urn="", type=CLUSTER, name="", inputs=dict(inputs))]):
            props.append(("node auto-provisioning", ", ".join(f"{kind} <= {most}" for kind, most in limits)))
        return props
    if resource_type == RESERVATION:
        return [("machine type", _text(_dig(inputs, "specificReservation", "instanceProperties", "machineType"))),
                ("VMs", _text(_dig(inputs, "specificReservation", "count"))), ("zone", _text(inputs.get("zone")))]
    if (grant := grant_of(resource_type, "", inputs)) is not None:
        return [("role", grant.role), ("on", grant.target), ("member", grant.member)]
    if resource_type == DASHBOARD:
        return [("title", dashboard_title(inputs))]
    if resource_type == PERSISTENT_VOLUME:
        csi = _dig(inputs, "spec", "csi") or {}
        return [("driver", _text(csi.get("driver"))), ("handle", _text(csi.get("volumeHandle"))),
                ("access", ", ".join(_text(m) for m in _dig(inputs, "spec", "accessModes") or ())),
                ("claim", "/".join(_text(_dig(inputs, "spec", "claimRef", k)) for k in ("namespace", "name")))]
    if resource_type == JOBSET:
        jobs = _dig(inputs, "spec", "replicatedJobs") or ()
        return [("jobs", ", ".join(f"{j.get('name')} x{j.get('replicas', 1)}" for j in jobs))]
    if resource_type == IMAGE:
        return [("tags", ", ".join(_text(t) for t in inputs.get("tags") or ())),
                ("base", _text(_dig(inputs, "buildArgs", "BASE_IMAGE")))]
    if resource_type == "kubernetes:helm.sh/v3:Release":
        return [(label, _text(inputs.get(key))) for label, key in
                (("chart", "chart"), ("version", "version"), ("namespace", "namespace")) if inputs.get(key)]
    if resource_type.startswith("kubernetes:") and isinstance(inputs.get("metadata"), Mapping):
        namespace = _dig(inputs, "metadata", "namespace")
        return [("namespace", _text(namespace))] if namespace else []
    return []

