"""The Kubernetes Node objects GKE registers for a planned node pool: labels, taints, capacity and allocatable.

GKE's side of a node is decided here, from the same tables the pools, flavors and workloads use: the TPU labels
(`scheduling.tpu_node_labels`), the pool's own labels and taints (its `SlicePoolPlan`), the capacity mode's
GKE-applied labels and taints (`capacity`), and the machine shape less GKE's reservations (`machines`). The
sandbox registers these objects with a real API server (kwok plays their kubelets), so Kueue and the scheduler see
the nodes a platform team's stack would get.

A host whose shape is not published (tpu7x) gets `google.com/tpu` and `pods` only: its cpu and memory are unknown,
and a made-up number would let the scheduler accept what GKE might refuse.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.fleet.machines import MachineShape, gke_allocatable, machine_shape
from tpuplane.infra.fleet.nodepools import SlicePoolPlan
from tpuplane.infra.fleet.scheduling import NODEPOOL_LABEL, PLACEMENT_POLICY_LABEL, TPU_RESOURCE, tpu_node_labels

if TYPE_CHECKING:
    from tpuplane.infra.stack import StackConfig

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
ACCELERATOR_COUNT_LABEL = "cloud.google.com/gke-accelerator-count"
RESERVATION_LABEL = "cloud.google.com/reservation-name"
# GKE's default maximum of pods per node on a pool that does not set one (the CPU pool).
DEFAULT_MAX_PODS = 110
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}


@dataclass(frozen=True)
class NodeGroup:
    """Nodes of one node pool as GKE would register them: `count` VMs of `machine_type` in `zone`."""

    pool: str
    machine_type: str
    zone: str
    count: int
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    tpu_chips_per_vm: int = 0
    max_pods: int = DEFAULT_MAX_PODS

    def node_names(self, cluster: str) -> list[str]:
        return [f"gke-{cluster}-{self.pool}-{i}" for i in range(self.count)]


def slice_pool_nodes(pool: SlicePoolPlan, spec: TpuSpec, capacity: str, zone: str) -> NodeGroup:
    """One slice's VMs. Pools that scale from zero (flex-start, queued) are registered at their scaled-up size:
    the nodes a ProvisioningRequest or a pending slice brings up."""
    labels = {**tpu_node_labels(spec, capacity), **pool.labels, NODEPOOL_LABEL: pool.name,
              ACCELERATOR_COUNT_LABEL: str(spec.chips_per_vm)}
    if pool.workload_policy is not None:  # GKE: workloads select a workload-policy pool by the policy's name
        labels[PLACEMENT_POLICY_LABEL] = pool.workload_policy.name
    if pool.reservation_affinity and pool.reservation_affinity.values:  # a name, or a path ending in one
        labels[RESERVATION_LABEL] = pool.reservation_affinity.values[0].split("/reservations/")[-1].split("/")[0]
    taints = [{"key": t["key"], "value": t["value"], "effect": _EFFECTS.get(t["effect"], t["effect"])}
              for t in pool.taints]
    taints += [dict(t) for t in capacity_mode(capacity).node_taints if dict(t) not in taints]
    return NodeGroup(pool.name, pool.machine_type, zone, spec.vms_per_slice, labels, tuple(taints),
                     tpu_chips_per_vm=spec.chips_per_vm, max_pods=pool.max_pods_per_node)


def cpu_pool_nodes(pool_name: str, machine_type: str, zone: str, count: int) -> NodeGroup:
    return NodeGroup(pool_name, machine_type, zone, count, {NODEPOOL_LABEL: pool_name}, ())


def node_objects(group: NodeGroup, cluster: str, region: str) -> list[dict[str, Any]]:
    """The Node objects of a group, as the API server stores them once the kubelet registered."""
    shape = machine_shape(group.machine_type)
    capacity, allocatable = _resources(group, shape)
    nodes = []
    for name in group.node_names(cluster):
        labels = {
            **group.labels,
            HOSTNAME_LABEL: name, ZONE_LABEL: group.zone, REGION_LABEL: region,
            "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": group.machine_type,
        }
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": dict(sorted(labels.items()))},
            "spec": {"taints": [dict(t) for t in group.taints]} if group.taints else {},
            "status": {"capacity": capacity, "allocatable": allocatable},
        })
    return nodes


def _resources(group: NodeGroup, shape: MachineShape | None) -> tuple[dict[str, str], dict[str, str]]:
    base = {"pods": str(group.max_pods)}
    if group.tpu_chips_per_vm:
        base[TPU_RESOURCE] = str(group.tpu_chips_per_vm)
    if shape is None:
        return dict(base), dict(base)
    allocatable = gke_allocatable(shape)
    return ({**base, "cpu": str(shape.vcpus), "memory": f"{shape.memory_mib}Mi"},
            {**base, "cpu": f"{allocatable.millicores}m", "memory": f"{allocatable.memory_mib}Mi"})



def stack_nodes(cfg: "StackConfig") -> list[NodeGroup]:
    """Every node a stack's pools register: each slice's VMs, then the CPU pool at its maximum size, as GKE's
    cluster autoscaler grows it when pods wait (the Pathways head, a proxy per client, Kueue and JobSet run there),
    like the flex-start and queued pools at their scaled-up size."""
    from tpuplane.infra.fleet.cluster import CPU_POOL_NAME
    from tpuplane.infra.fleet.nodepools import plan_tpu_pools

    groups = [slice_pool_nodes(pool, group.spec, group.config.capacity.value, group.config.zone)
              for group in plan_tpu_pools(cfg.tpu_pools) for pool in group.pools]
    cpu = cfg.cluster.cpu_pool
    return [*groups, cpu_pool_nodes(CPU_POOL_NAME, cpu.machine_type, cfg.cluster.zone, cpu.max_nodes)]
