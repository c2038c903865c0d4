"""Data-center networking of TPU slices: GKE's automated networking for accelerator VMs.

A node pool with `networkConfig.acceleratorNetworkProfile: auto` gets the extra VPC networks, subnets and NICs
its machine type is built for, created and attached by GKE; the cluster must have multi-networking on (which
needs Dataplane V2, tpuplane's default). The node label `cloud.google.com/gke-networking-dra-driver=true` runs
GKE's managed DRANET driver on those nodes, so pods can claim the extra NICs through Kubernetes DRA.
xpk 1.16 sets both for v6e (Trillium, whose hosts have several physical NICs); tpuplane does the same by default
for v6e and offers it for the other generations (`acceleratorNetwork: true`), off by default where GKE's docs do
not show it as the recommended setup.
"""

from __future__ import annotations

from tpuplane.infra.fleet.pools import SlicePoolSpec

ACCELERATOR_NETWORK_PROFILE = "auto"
NETWORKING_DRA_LABEL = "cloud.google.com/gke-networking-dra-driver"
DEFAULT_GENERATIONS = frozenset({"v6e"})


def accelerator_networking(pool: SlicePoolSpec) -> bool:
    """Does the pool get automated accelerator networking: as configured, else by its generation's default."""
    if pool.accelerator_network is not None:
        return pool.accelerator_network
    return pool.spec.generation in DEFAULT_GENERATIONS


def networking_labels(pool: SlicePoolSpec) -> dict[str, str]:
    """Node labels the pool declares for it: the managed DRANET driver runs only where asked."""
    return {NETWORKING_DRA_LABEL: "true"} if accelerator_networking(pool) else {}
