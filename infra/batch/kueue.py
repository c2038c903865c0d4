"""Kueue and JobSet for the fleet, as pure renderers: Helm values, queue objects, priorities, the webhook gate.

Every object is derived from the TPU pools, so a quota can never disagree with the capacity it stands for:
- one ResourceFlavor per distinct set of TPU node labels (accelerator, topology, host machine type, and the
  spot/queued label);
- ClusterQueue quota of `google.com/tpu` per flavor = the chips of that flavor's Kueue slices (slices x chips
  per slice; slices a service holds outside Kueue are not counted);
- teams split every flavor's SLICES by share (largest remainder, exact sums), so every team quota is a whole
  number of slices: a TPU workload takes whole slices, and a quota of 1.5 slices would only ever admit one.
  Teams sit in one cohort, lend idle slices, and reclaim them by preemption.
Kueue objects use `kueue.x-k8s.io/v1beta2` field names (`cohortName`, `admissionChecksStrategy`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import yaml

from tpuplane.infra.args import Source
from tpuplane.infra.batch.kueue_config import (
    JOBSET_NAMESPACE,
    KUEUE_NAMESPACE,
    PRIORITIES,
    UNASSIGNED_QUEUE,
    KueueTeam,
)
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.quantity import canonical_quantity
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.fleet.machines import Allocatable, gke_allocatable, machine_shape
from tpuplane.infra.fleet.pools import KueuePool
from tpuplane.infra.fleet.scheduling import (
    NODEPOOL_LABEL,
    TPU_RESOURCE,
    tpu_node_labels,
    tpu_tolerations,
)


KUEUE_API = "kueue.x-k8s.io/v1beta2"
KUEUE_CHART = "oci://registry.k8s.io/kueue/charts/kueue"
JOBSET_CHART = "oci://registry.k8s.io/jobset/charts/jobset"
SINGLE_CLUSTER_QUEUE = "cluster-queue"  # xpk's and Cluster Toolkit's name
DEFAULT_LOCAL_QUEUE = "multislice-queue"  # xpk's LocalQueue: `xpk workload create` users keep their manifests
DEFAULT_NAMESPACE = "default"
CPU_FLAVOR = "cpu"
PROVISIONING_CHECK = "dws-prov"  # xpk's names for the DWS queued-provisioning check and its config
PROVISIONING_CONFIG = "dws-config"
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
QUEUED_PROVISIONING_CLASS = "queued-provisioning.gke.io"
# GKE system components' taint: Cluster Toolkit lets the controllers run on nodes that carry it.
GKE_MANAGED_TOLERATION = {"key": "components.gke.io/gke-managed-components", "operator": "Equal",
                          "value": "true", "effect": "NoSchedule"}
WEBHOOK_PROBE = "kueue-webhook-ready"
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.32.0"  # shell-free kubectl; the Job's retries are the loop
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
# Namespaces whose Jobs and JobSets Kueue never manages, so its webhooks (failurePolicy Fail) never intercept them.
UNMANAGED_NAMESPACES = ("kube-system", KUEUE_NAMESPACE, JOBSET_NAMESPACE)

# --------------------------------------------------------------------------------------------------------------
# Sizes: the CPU pool's quota and the controllers' resources.


def cpu_pool_quota(platform: BatchPlatform) -> tuple[int, int]:
    """The CPU pool at its maximum size: (cpu cores, memory MiB). Kueue admits against it, kube-scheduler fits."""
    shape = machine_shape(platform.cpu_machine_type)
    vcpus, mib = (shape.vcpus, shape.memory_mib) if shape else (0, 0)
    return vcpus * platform.cpu_max_nodes, mib * platform.cpu_max_nodes


def controller_node_count(platform: BatchPlatform) -> int:
    """Nodes the controllers watch at most: every TPU VM plus the CPU pool at its maximum (xpk's sizing input)."""
    tpu_vms = sum(pool.vms for pool in platform.pools)
    return tpu_vms + platform.cpu_max_nodes


def _controller_placement(cpu_pool_name: str) -> dict[str, Any]:
    return {"nodeSelector": {NODEPOOL_LABEL: cpu_pool_name}, "tolerations": [GKE_MANAGED_TOLERATION]}


def unmanaged_namespaces(platform: BatchPlatform) -> list[str]:
    """Namespaces Kueue must leave alone: the system's and controllers', and the Pathways service's.

    The service's JobSet carries no queue-name label, so with `manageJobsWithoutQueueName: false` Kueue would
    ignore it anyway; excluding its namespace also keeps Kueue's webhooks out of its path, so a Kueue outage
    can never block the service's (re)creation.
    """
    return sorted({*UNMANAGED_NAMESPACES, *platform.service_namespaces})


def managed_jobs_namespace_selector(platform: BatchPlatform) -> dict[str, Any]:
    """Kueue's `managedJobsNamespaceSelector`: every namespace but `unmanaged_namespaces`.

    The Kueue chart (since 0.11.5) stamps this selector on every job-framework webhook (Job, JobSet, ...), not
    only on the pod-based ones. Without it the Job webhooks have no namespaceSelector at all, so during the
    10-30 s after Kueue's pod is Ready, when its webhook does not answer, the API server refuses every Job in
    the cluster, the webhook gate's own Job in kueue-system included. Cluster-scoped Kueue objects
    (ResourceFlavor, ClusterQueue) are never filtered by a namespaceSelector: the gate's dry run still goes
    through the webhook.
    """
    return {"matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "NotIn",
                                  "values": unmanaged_namespaces(platform)}]}


def kueue_manager_config(platform: BatchPlatform) -> str:
    """The Kueue Configuration (v1beta2) the chart mounts. Only the integrations we use, so that the webhooks of
    other frameworks (pods, deployments) can never block unrelated objects while Kueue restarts; and the system,
    controller and service namespaces are outside Kueue's management (`managed_jobs_namespace_selector`)."""
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        # Quota use per ClusterQueue and flavor (kueue_cluster_queue_resource_usage, ..._nominal_quota): what the
        # fleet dashboard charts. Off by default in Kueue.
        "metrics": {"bindAddress": ":8443", "enableClusterQueueResources": True},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {"groupKindConcurrency": {
            "Job.batch": 5, "Pod": 5, "Workload.kueue.x-k8s.io": 5, "LocalQueue.kueue.x-k8s.io": 1,
            "ClusterQueue.kueue.x-k8s.io": 1, "ResourceFlavor.kueue.x-k8s.io": 1}},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": ["batch/job", "jobset.x-k8s.io/jobset"]},
        "manageJobsWithoutQueueName": False,  # only workloads that name a queue are Kueue's
        "managedJobsNamespaceSelector": managed_jobs_namespace_selector(platform),
    }
    return yaml.safe_dump(config, sort_keys=True)


def kueue_helm_values(platform: BatchPlatform) -> dict[str, Any]:
    """Chart values: xpk's sizing (cpu max(ceil(0.004 n), 2), memory max(ceil(32 MiB n), 4096 MiB))."""
    nodes = controller_node_count(platform)
    cpu = max(math.ceil(0.004 * nodes), 2)
    memory = f"{max(math.ceil(32 * nodes), 4096)}Mi"
    return {
        "controllerManager": {
            "manager": {"resources": {"limits": {"cpu": str(cpu), "memory": memory},
                                      "requests": {"cpu": "500m", "memory": memory}}},
            **_controller_placement(platform.cpu_pool_name),
        },
        "enableCertManager": False,
        "enableKueueViz": False,
        "managerConfig": {"controllerManagerConfigYaml": kueue_manager_config(platform)},
    }


def jobset_helm_values(platform: BatchPlatform) -> dict[str, Any]:
    """Chart values: xpk's sizing (memory limit max(ceil(1.2 MiB n), 4096 MiB), requests 1 CPU / 128Mi)."""
    memory = f"{max(math.ceil(1.2 * controller_node_count(platform)), 4096)}Mi"
    return {"controller": {"resources": {"limits": {"cpu": "2", "memory": memory},
                                         "requests": {"cpu": "1000m", "memory": "128Mi"}},
                           **_controller_placement(platform.cpu_pool_name)}}


@dataclass(frozen=True)
class HelmRelease:
    """What a `helm install --wait` of a pinned chart needs; the component passes it to `k8s.helm.v3.Release`."""

    name: str
    chart: str
    version: str
    namespace: str
    values: dict[str, Any]


def controller_releases(platform: BatchPlatform) -> tuple[HelmRelease, HelmRelease]:
    """Kueue and JobSet, each in its own namespace; versions from `tpuplane:kueue`."""
    return (
        HelmRelease("kueue", KUEUE_CHART, platform.kueue_version, KUEUE_NAMESPACE,
                    kueue_helm_values(platform)),
        HelmRelease("jobset", JOBSET_CHART, platform.jobset_version, JOBSET_NAMESPACE,
                    jobset_helm_values(platform)),
    )


# --------------------------------------------------------------------------------------------------------------
# Flavors: one per distinct set of TPU node labels.


def _shape_key(pool: KueuePool) -> tuple[str, str, str]:
    """What a flavor's TPU node labels say: accelerator, topology, capacity mode (the host machine aside)."""
    return pool.spec.accelerator, pool.spec.topology, pool.capacity.value


def serving_pools(platform: BatchPlatform, spec: TpuSpec, capacity: str) -> list[KueuePool]:
    """The pools Kueue admits a job of `spec` on `capacity` to: same TPU node labels and host machine type (so
    the same flavor), with slices that a service does not hold outside Kueue. The one answer workloads,
    quotas and policies use."""
    return [p for p in platform.pools
            if _shape_key(p) == (spec.accelerator, spec.topology, capacity)
            and p.spec.machine_type == spec.machine_type and p.queued_slices > 0]


def flavor_name(accelerator: str, topology: str, capacity: str, machine_type: str | None = None) -> str:
    """`tpu-v6e-slice-4x4` (on-demand), `tpu-v6e-slice-4x4-spot`, `...-flex-start`, `...-reservation`,
    `...-queued`: readable, DNS-safe, and stable across pool renames. One flavor per capacity mode, because
    their nodes differ and a workload asks for one. The host machine type joins the name only when one shape
    runs on two machine types in the stack (`tpu-v6e-slice-2x4-ct6e-standard-8t`)."""
    return (f"{accelerator}-{topology}" + (f"-{machine_type}" if machine_type else "")
            + capacity_mode(capacity).flavor_suffix)


def pool_flavor_name(platform: BatchPlatform, pool: KueuePool) -> str:
    """The flavor a pool's chips count in."""
    machines = {p.spec.machine_type for p in platform.pools if _shape_key(p) == _shape_key(pool)}
    return flavor_name(pool.spec.accelerator, pool.spec.topology, pool.capacity.value,
                       pool.spec.machine_type if len(machines) > 1 else None)


@dataclass(frozen=True)
class TpuFlavor:
    """A ResourceFlavor and the pools whose Kueue slices it counts (all of one shape and machine type)."""

    name: str
    capacity: str  # the capacity mode: on-demand, reservation, flex-start, spot or queued
    node_labels: dict[str, str]
    slices: int  # slices Kueue admits to (a service's dedicated slices excluded)
    chips_per_slice: int
    pools: tuple[str, ...]
    vms_per_slice: int = 1
    host: Allocatable | None = None  # what a pod may request of one host VM; None for a host of unknown shape

    @property
    def chips(self) -> int:
        return self.slices * self.chips_per_slice

    @property
    def queued(self) -> bool:
        return capacity_mode(self.capacity).provisioning_request


def flavor_node_labels(pool: KueuePool) -> dict[str, str]:
    """The labels of a pool's nodes a flavor selects: the TPU labels, the host machine type among them."""
    return tpu_node_labels(pool.spec, pool.capacity.value)


def tpu_flavors(platform: BatchPlatform) -> list[TpuFlavor]:
    """Flavors in their capacity modes' Kueue order (`tpuplane.infra.fleet.capacity`), then by name."""
    grouped: dict[str, list[KueuePool]] = {}
    for pool in platform.pools:
        grouped.setdefault(pool_flavor_name(platform, pool), []).append(pool)
    flavors = []
    for name, pools in grouped.items():
        slices = sum(p.queued_slices for p in pools)
        if not slices:
            continue  # a group wholly dedicated to a service is not Kueue's
        chips = {p.spec.chips for p in pools}
        assert len(chips) == 1, f"flavor {name} mixes slice sizes {sorted(chips)}"  # one shape, one machine type
        shape = machine_shape(pools[0].spec.machine_type)
        flavors.append(TpuFlavor(name=name, capacity=pools[0].capacity.value,
                                 node_labels=flavor_node_labels(pools[0]), slices=slices,
                                 chips_per_slice=chips.pop(), pools=tuple(p.name for p in pools),
                                 vms_per_slice=pools[0].spec.vms_per_slice,
                                 host=gke_allocatable(shape) if shape else None))
    return sorted(flavors, key=lambda f: (capacity_mode(f.capacity).kueue_order, f.name))


def render_tpu_flavor(flavor: TpuFlavor) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeLabels": flavor.node_labels, "tolerations": tpu_tolerations(flavor.capacity)}
    taints = capacity_mode(flavor.capacity).node_taints
    if taints:  # only pods that tolerate the capacity's taint (queued) may take this flavor
        spec["nodeTaints"] = [dict(t) for t in taints]
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": flavor.name}, "spec": spec}


def render_cpu_flavor(cpu_pool_name: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": CPU_FLAVOR},
            "spec": {"nodeLabels": {NODEPOOL_LABEL: cpu_pool_name}}}


# --------------------------------------------------------------------------------------------------------------
# Quotas and their split between teams.


def largest_remainder(total: int, weights: list[Fraction], names: list[str] | None = None) -> list[int]:
    """Split `total` integer units in proportion to `weights` (which sum to 1) so the parts sum to `total` exactly.

    Each part gets the floor of its exact share; the units left go to the largest fractional remainders
    (ties: the first by `names`, else the earlier entry, so that listing teams in another order changes
    nothing), and no part ever differs from its exact share by a whole unit or more.
    """
    exact = [total * w for w in weights]
    parts = [math.floor(x) for x in exact]
    left = total - sum(parts)
    tie = names or [f"{i:09d}" for i in range(len(weights))]
    by_remainder = sorted(range(len(weights)), key=lambda i: (-(exact[i] - parts[i]), tie[i]))
    for i in by_remainder[:left]:
        parts[i] += 1
    return parts


def share_fraction(share: float) -> Fraction:
    return Fraction(share).limit_denominator(10**6)


def whole_units(fraction: float, units: int) -> int:
    """A fractional limit in whole units, rounded down: never more than promised."""
    return math.floor(share_fraction(fraction) * units)


@dataclass(frozen=True)
class QueueQuota:
    """One ClusterQueue's quotas: whole TPU slices per flavor name, and the CPU flavor's cores and MiB."""

    name: str
    slices: dict[str, int]
    cpu: int
    memory_mib: int
    team: KueueTeam | None = None

    def reach(self, flavor: TpuFlavor) -> int:
        """The most slices of `flavor` this queue can ever be admitted: its own plus what it may borrow."""
        own = self.slices[flavor.name]
        if self.team is None or self.team.borrowing_limit is None:
            return flavor.slices
        return min(flavor.slices, own + whole_units(self.team.borrowing_limit, flavor.slices))


def cluster_queue_quotas(platform: BatchPlatform) -> list[QueueQuota]:
    """Without teams: one queue with all capacity. With teams: one per team, plus `unassigned` for the remainder."""
    flavors = tpu_flavors(platform)
    cpu, mib = cpu_pool_quota(platform)
    teams = platform.teams
    if not teams:
        return [QueueQuota(SINGLE_CLUSTER_QUEUE, {f.name: f.slices for f in flavors}, cpu, mib)]
    weights = [share_fraction(t.share) for t in teams]
    remainder = 1 - sum(weights)
    has_unassigned = remainder > 0
    if has_unassigned:
        weights.append(remainder)
    names = [t.name for t in teams] + ([UNASSIGNED_QUEUE] if has_unassigned else [])
    slice_parts = {f.name: largest_remainder(f.slices, weights, names) for f in flavors}
    cpu_parts, mib_parts = largest_remainder(cpu, weights, names), largest_remainder(mib, weights, names)
    return [
        QueueQuota(name, {f.name: slice_parts[f.name][i] for f in flavors}, cpu_parts[i], mib_parts[i],
                   teams[i] if i < len(teams) else None)
        for i, name in enumerate(names)
    ]


def team_quota_problems(platform: BatchPlatform, source: Source) -> list[Problem]:
    """A team that can never run anything: less than one whole slice of EVERY flavor, even with borrowing.

    Less than one slice of SOME flavor is allowed: the team simply never runs there (its workloads of that
    flavor would stay pending, and `workload_problems` refuses them up front).
    """
    flavors = tpu_flavors(platform)
    if not flavors:
        return []
    problems = []
    for i, quota in enumerate(q for q in cluster_queue_quotas(platform) if q.team is not None):
        if any(quota.reach(f) >= 1 for f in flavors):
            continue
        smallest = min(Fraction(1, f.slices) for f in flavors)
        problems.append(Problem(
            source.path("teams", i, "share"), quota.team.share,
            f"a share (or share plus {source.key('borrowing_limit', KueueTeam)}) worth one whole slice of some flavor, e.g. {float(smallest):.4g}",
            "quotas are whole slices: " + ", ".join(f"{f.name} has {f.slices}" for f in flavors)
            + "; this team would get none of any of them and could never run a workload"))
    return problems


def _resource(name: str, nominal: int, capacity: int, team: KueueTeam | None, *, per_unit: int = 1,
              suffix: str = "") -> dict[str, Any]:
    """One quota entry from whole units (slices, cores, MiB), each `per_unit` of the resource (chips per slice).
    Team limits are fractions turned into whole units, rounded down. Amounts are written as Kueue stores them
    (`tpuplane.infra.quantity`), so applying them again changes nothing."""

    def amount(units: int) -> str:
        return canonical_quantity(f"{units * per_unit}{suffix}")

    entry: dict[str, Any] = {"name": name, "nominalQuota": amount(nominal)}
    if team is not None and team.borrowing_limit is not None:
        entry["borrowingLimit"] = amount(whole_units(team.borrowing_limit, capacity))
    if team is not None and team.lending_limit is not None:
        entry["lendingLimit"] = amount(whole_units(team.lending_limit, nominal))
    return entry


def _tpu_flavor_quota(flavor: TpuFlavor, quota: QueueQuota) -> dict[str, Any]:
    """A TPU flavor's quota in whole slices: its chips, and the cpu and memory of those slices' host VMs."""
    slices = quota.slices[flavor.name]
    host_millicores, host_mib = (flavor.host.millicores, flavor.host.memory_mib) if flavor.host else (0, 0)

    def per_slice(name: str, per_vm: int, suffix: str = "") -> dict[str, Any]:
        return _resource(name, slices, flavor.slices, quota.team, per_unit=per_vm * flavor.vms_per_slice,
                         suffix=suffix)

    return {"name": flavor.name, "resources": [per_slice(TPU_RESOURCE, flavor.chips_per_slice // flavor.vms_per_slice),
                                               per_slice("cpu", host_millicores, "m"),
                                               per_slice("memory", host_mib, "Mi")]}


def render_cluster_queue(platform: BatchPlatform, quota: QueueQuota) -> dict[str, Any]:
    """A ClusterQueue with ONE resource group covering `google.com/tpu`, cpu and memory.

    Kueue assigns one flavor per resource group and merges the node labels of every flavor it assigns, so a
    TPU pod that also asks for cpu or memory must get all three from its TPU flavor: with a separate cpu/memory
    group it would also get the CPU pool's `gke-nodepool` label and never schedule. The CPU flavor comes first
    with no TPU quota: a TPU pod cannot fit it and moves on to the TPU flavors, whose cpu and memory quota is
    what GKE leaves to pods on their host VMs; a CPU-only pod takes the CPU flavor."""
    flavors = tpu_flavors(platform)
    cpu_total, mib_total = cpu_pool_quota(platform)
    cpu_flavor = {"name": CPU_FLAVOR, "resources": [
        _resource(TPU_RESOURCE, 0, 0, None),
        _resource("cpu", quota.cpu, cpu_total, quota.team),
        _resource("memory", quota.memory_mib, mib_total, quota.team, suffix="Mi")]}
    groups = [{"coveredResources": [TPU_RESOURCE, "cpu", "memory"],
               "flavors": [cpu_flavor, *(_tpu_flavor_quota(f, quota) for f in flavors)]}]
    spec: dict[str, Any] = {"queueingStrategy": "BestEffortFIFO", "resourceGroups": groups}
    if not platform.teams:
        # xpk's queue: every namespace may submit; no cohort, so nothing to reclaim.
        spec["namespaceSelector"] = {}
        spec["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
    else:
        spec["cohortName"] = platform.cohort
        if quota.team is not None:
            spec["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": quota.team.team_namespace}}
            # A share is a guarantee: a team below its quota reclaims lent chips from any borrower, whatever the
            # borrower's priority (Any); borrowing never preempts another team's workloads inside its share.
            spec["preemption"] = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any",
                                  "borrowWithinCohort": {"policy": "Never"}}
        # `unassigned` has no namespaceSelector (Kueue's default selects no namespace): it only lends.
    queued = [f.name for f in flavors if f.queued]
    if queued:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": queued}]}
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": quota.name}, "spec": spec}


def local_queues(platform: BatchPlatform) -> dict[str, tuple[str, str]]:
    """Team (or "default" without teams) -> (namespace, LocalQueue name)."""
    if not platform.teams:
        return {DEFAULT_NAMESPACE: (DEFAULT_NAMESPACE, DEFAULT_LOCAL_QUEUE)}
    return {t.name: (t.team_namespace, t.name) for t in platform.teams}


def render_local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "LocalQueue", "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue}}


def render_local_queues(platform: BatchPlatform) -> list[dict[str, Any]]:
    """Sorted by namespace: the teams' order in the config does not matter."""
    cluster_queue = {t.name: t.name for t in platform.teams} or {DEFAULT_NAMESPACE: SINGLE_CLUSTER_QUEUE}
    return [render_local_queue(ns, name, cluster_queue[team])
            for team, (ns, name) in sorted(local_queues(platform).items(), key=lambda item: item[1])]


def render_team_namespaces(platform: BatchPlatform) -> list[dict[str, Any]]:
    """Namespaces the teams own (`default` exists already)."""
    names = sorted({t.team_namespace for t in platform.teams} - {DEFAULT_NAMESPACE})
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in names]


# --------------------------------------------------------------------------------------------------------------
# Priorities and queued provisioning.


def render_priority_classes() -> list[dict[str, Any]]:
    """Each priority twice: Kueue's (queue order and preemption) and the pod's (kube-scheduler preemption)."""
    objects = []
    for name, value in PRIORITIES.items():
        description = f"tpuplane priority {name}"
        objects.append({"apiVersion": KUEUE_API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                        "value": value, "description": description})
        objects.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                        "value": value, "description": description})  # never the global default: that is unset
    return objects


def render_provisioning(platform: BatchPlatform) -> list[dict[str, Any]]:
    """DWS queued provisioning: Kueue asks GKE for the nodes of a queued flavor before it admits a workload."""
    if not any(f.queued for f in tpu_flavors(platform)):
        return []
    return [
        {"apiVersion": KUEUE_API, "kind": "ProvisioningRequestConfig", "metadata": {"name": PROVISIONING_CONFIG},
         "spec": {"provisioningClassName": QUEUED_PROVISIONING_CLASS, "managedResources": [TPU_RESOURCE],
                  # pods must land on the nodes provisioned for them (GKE names the resize request)
                  "podSetUpdates": {"nodeSelector": [{"key": "autoscaling.gke.io/provisioning-request",
                                                      "valueFromProvisioningClassDetail": "ResizeRequestName"}]}}},
        {"apiVersion": KUEUE_API, "kind": "AdmissionCheck", "metadata": {"name": PROVISIONING_CHECK},
         "spec": {"controllerName": PROVISIONING_CONTROLLER,
                  "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "ProvisioningRequestConfig",
                                 "name": PROVISIONING_CONFIG}}},
    ]


def render_flavors(platform: BatchPlatform) -> list[dict[str, Any]]:
    return [render_tpu_flavor(f) for f in tpu_flavors(platform)] + [render_cpu_flavor(platform.cpu_pool_name)]


def render_cluster_queues(platform: BatchPlatform) -> list[dict[str, Any]]:
    """Sorted by name: the teams' order in the config does not matter."""
    return [render_cluster_queue(platform, q) for q in sorted(cluster_queue_quotas(platform), key=lambda q: q.name)]


def render_queue_objects(platform: BatchPlatform) -> list[dict[str, Any]]:
    """Every Kueue object of the stack, in creation order (flavors and checks before the queues naming them)."""
    return (render_flavors(platform) + render_provisioning(platform) + render_cluster_queues(platform)
            + render_local_queues(platform))


# --------------------------------------------------------------------------------------------------------------
# The webhook gate: Kueue's webhook refuses objects for 10-30 s after its pod is Ready (kueue#13036).


def render_webhook_probe(kueue_version: str) -> list[dict[str, Any]]:
    """A Job that server-side dry-run-creates a ResourceFlavor until Kueue's admission webhook answers.

    The dry run goes API server -> Kueue webhook exactly as a real create does, and persists nothing. The image has
    no shell, so the Job's pod retries are the loop (backoff 10 s, 20 s, 40 s, ...). It lives in kueue-system,
    which `managedJobsNamespaceSelector` excludes, so Kueue's Job webhooks are not called for it and cannot refuse
    the gate itself while they are down. Its pod template carries the Kueue version, so an upgrade replaces the
    Job and the gate runs again.
    """
    labels = {"app.kubernetes.io/name": WEBHOOK_PROBE, "app.kubernetes.io/managed-by": "tpuplane"}
    meta = {"name": WEBHOOK_PROBE, "namespace": KUEUE_NAMESPACE, "labels": labels}
    probe_flavor = {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": "tpuplane-probe"}}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": WEBHOOK_PROBE, "labels": labels},
         "rules": [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["create"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": WEBHOOK_PROBE, "labels": labels},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": WEBHOOK_PROBE},
         "subjects": [{"kind": "ServiceAccount", "name": WEBHOOK_PROBE, "namespace": KUEUE_NAMESPACE}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta,
         "data": {"resourceflavor.yaml": yaml.safe_dump(probe_flavor, sort_keys=True)}},
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {
            "backoffLimit": 12,
            "template": {
                "metadata": {"labels": labels, "annotations": {"tpuplane.dev/kueue-version": kueue_version}},
                "spec": {
                    "serviceAccountName": WEBHOOK_PROBE,
                    "restartPolicy": "Never",
                    "tolerations": [GKE_MANAGED_TOLERATION],
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": "probe",
                        "image": KUBECTL_IMAGE,
                        "command": ["kubectl", "create", "--dry-run=server", "-f", "/probe/resourceflavor.yaml"],
                        "env": [{"name": "HOME", "value": "/tmp"}],
                        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        "volumeMounts": [{"name": "probe", "mountPath": "/probe", "readOnly": True},
                                         {"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "probe", "configMap": {"name": WEBHOOK_PROBE}},
                                {"name": "tmp", "emptyDir": {}}],
                },
            },
        }},
    ]


def cpu_quota_problems(platform: BatchPlatform, source: Source) -> list[Problem]:
    """The CPU pool's Kueue quota (cpu, memory) is derived from its machine type: its name must say its shape."""
    if machine_shape(platform.cpu_machine_type) is not None:
        return []
    return [Problem(source.path("cpu_machine_type"), platform.cpu_machine_type,
                    "<family>-standard|highmem|highcpu-<vCPUs> or <family>-custom-<vCPUs>-<MiB>",
                    "the CPU pool's Kueue quota (cpu, memory) is derived from it")]
