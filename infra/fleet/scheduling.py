"""How TPU pods land on TPU nodes: the labels, taints, selectors, tolerations and limits that must agree
across node pools, Kueue flavors and JobSet pod templates. One definition, used by all three.
"""

from __future__ import annotations

from tpuplane.infra.fleet.capacity import QUEUED_LABEL, capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.quantity import canonical_quantity

TPU_RESOURCE = "google.com/tpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
PLACEMENT_POLICY_LABEL = "cloud.google.com/placement-policy-name"
# The well-known label kubelet sets on every node: it tells a 2x4 slice on two ct6e-standard-4t VMs from one on
# a single ct6e-standard-8t VM, which share accelerator and topology labels.
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
EXCLUSIVE_TOPOLOGY_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
# Set by tpuplane on every TPU pool, so that Kueue flavors of one shape select disjoint nodes: without it an
# on-demand flavor's selector (accelerator + topology) would also match spot nodes of the same shape.
CAPACITY_LABEL = "tpuplane.dev/capacity"
# Label and taint of the node pools a long-running service (the Shared Pathways Service) holds outside Kueue:
# batch pods never land there, and only the service's pods tolerate it.
DEDICATED_KEY = "tpuplane.dev/dedicated"
# Pod label naming the slice group (`tpuplane:tpuPools[].name`) a TPU pod runs on: Cloud Monitoring shows pod labels
# as `metadata.user_labels`, so the fleet dashboard charts TPU use per group by it.
SLICE_GROUP_LABEL = "tpuplane.dev/slice-group"

TPU_TAINT_KEY = TPU_RESOURCE
TPU_TAINT_VALUE = "present"
QUEUED_TAINT_KEY = QUEUED_LABEL

# GKE's Multislice rule, quoted: a workload of several slices (a JobSet whose TPU job has replicas > 1, as xpk
# and tpuplane write them) needs multi-host slices. Pools are not concerned: several single-host pools of one type
# are valid, each serving single-slice jobs.
GKE_MULTISLICE_RULE = ('GKE: "Multislice only supports multi-host TPU slice node pools" '
                       "(https://cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice)")


def tpu_node_labels(spec: TpuSpec, capacity: str) -> dict[str, str]:
    """Labels every node of a TPU pool carries (GKE's and tpuplane's): what flavors and pods select.

    Every capacity mode is its own class: on-demand, reservation, flex-start, spot and queued nodes differ in
    what GKE does to them (reservation-backed, short-lived with a run duration, preemptible, DWS-gated), so a
    workload that asks for one capacity must never land on another's nodes."""
    labels = {ACCELERATOR_LABEL: spec.accelerator, TOPOLOGY_LABEL: spec.topology, CAPACITY_LABEL: capacity,
              INSTANCE_TYPE_LABEL: spec.machine_type}
    labels.update(capacity_mode(capacity).gke_labels)
    return dict(sorted(labels.items()))


def pool_node_labels(capacity: str) -> dict[str, str]:
    """The node labels tpuplane sets on a pool itself; GKE sets the TPU and spot labels on its own.

    Queued-provisioning nodes get their taint from GKE, but the label only if the pool declares it
    (Cluster Toolkit's practice), and workloads need it to select those nodes.
    """
    labels = {CAPACITY_LABEL: capacity, **capacity_mode(capacity).pool_labels}
    return dict(sorted(labels.items()))


def pool_taints() -> list[dict[str, str]]:
    """The taint every TPU pool carries (GKE enum spelling), so only pods that ask for TPUs land there."""
    return [{"key": TPU_TAINT_KEY, "value": TPU_TAINT_VALUE, "effect": "NO_SCHEDULE"}]


def dedicated_taint(owner: str) -> dict[str, str]:
    """GKE taint of a node pool dedicated to `owner`."""
    return {"key": DEDICATED_KEY, "value": owner, "effect": "NO_SCHEDULE"}


def dedicated_toleration(owner: str) -> dict[str, str]:
    """What `owner`'s pods tolerate to run on their dedicated node pools."""
    return {"key": DEDICATED_KEY, "operator": "Equal", "value": owner, "effect": "NoSchedule"}


def tpu_node_taints(capacity: str) -> list[dict[str, str]]:
    """Kubernetes taints (pod-side effect names) a TPU pool carries: only TPU pods land there."""
    taints = [{"key": TPU_TAINT_KEY, "value": TPU_TAINT_VALUE, "effect": "NoSchedule"}]
    taints += [dict(t) for t in capacity_mode(capacity).node_taints]
    return taints


def tpu_node_selector(spec: TpuSpec, capacity: str, placement_policy: str | None = None) -> dict[str, str]:
    """What a TPU pod selects: the same labels the pool's nodes carry, plus the workload policy if any."""
    selector = tpu_node_labels(spec, capacity)
    if placement_policy:
        selector[PLACEMENT_POLICY_LABEL] = placement_policy
    return dict(sorted(selector.items()))


def tpu_tolerations(capacity: str) -> list[dict[str, str]]:
    """Tolerations matching `tpu_node_taints`."""
    return [
        {"key": t["key"], "operator": "Equal", "value": t["value"], "effect": t["effect"]}
        for t in tpu_node_taints(capacity)
    ]


def tpu_resources(spec: TpuSpec) -> dict[str, dict[str, str]]:
    """A TPU container asks for every chip of its VM: one pod per VM. Written as the API server stores it: JobSet's
    webhook rewrites `4` as "4", and a JobSet's spec is immutable, so anything else replaces it on every apply."""
    chips = canonical_quantity(spec.chips_per_vm)
    return {"limits": {TPU_RESOURCE: chips}, "requests": {TPU_RESOURCE: chips}}


def slice_chips(spec: TpuSpec, slices: int) -> int:
    """Kueue's quota formula: slices x VMs per slice x chips per VM."""
    return slices * spec.vms_per_slice * spec.chips_per_vm
