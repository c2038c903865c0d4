"""The tpuplane Pulumi program: one stack = one TPU platform, composed from its stack config.

`pulumi up` runs this file; `tpuplane plan` runs the very same file under Pulumi's mocks. It is one composition of
the public components: the stack config is read section by section into each component's Args
(`tpuplane.infra.stack`), and each component takes its Args as they were read, adding only what exists once
resources do (the cluster's name and node service account as outputs, the sidecar image built).
"""

from pathlib import Path

import pulumi

from tpuplane.components import FleetDashboard, SidecarImage, TpuCluster, TpuReservation, TpuSlicePool
from tpuplane.components.kubernetes_half import GcpSide, compose_kubernetes_half
from tpuplane.components.stack_config import read_stack_config
from tpuplane.infra.fleet.nodepools import chips_by_generation

PROJECT_DIR = Path(__file__).resolve().parent.parent  # relative paths in the config start here

cfg = read_stack_config(PROJECT_DIR)  # every config rule, before the first resource

cluster = TpuCluster(cfg.cluster.name, cfg.cluster)
reservations = {res.name: TpuReservation(res.name, res) for res in cfg.reservations}


def slice_pool(pool) -> TpuSlicePool:
    """A `tpuplane:tpuPools` entry on the stack's cluster, waiting for the stack's reservation it consumes (by
    `depends_on`: the config may name it by its path, which the pools' affinity keeps)."""
    reservation = cfg.stack_reservation(pool)
    return TpuSlicePool(pool.name, pool.model_copy(update={
        "cluster": cluster.cluster_name, "service_account": cluster.node_service_account_email}),
        opts=pulumi.ResourceOptions(parent=cluster, depends_on=[reservations[reservation.name].reservation]
                                    if reservation else None))


slice_pools = {pool.name: slice_pool(pool) for pool in cfg.tpu_pools}

# Kueue and JobSet, the queues derived from the pools, the Shared Pathways Service and its janitors: every
# Kubernetes object goes through the provider of the new cluster, which waits for the CPU pool.
sidecar_image = None
if cfg.pathways is not None:
    pw = cfg.pathways
    sidecar_image = SidecarImage(f"{pw.service_name}-sidecar", cfg.sidecar).image_ref if cfg.sidecar \
        else pw.sidecar_image
half = compose_kubernetes_half(cfg, GcpSide(provider=cluster.provider,
                                            node_service_account=cluster.node_service_account_email,
                                            sidecar_image=sidecar_image))

# The dashboard charts GKE's and Managed Prometheus' metrics: it exists only on GKE, never in the Kubernetes half.
dashboard = FleetDashboard("dashboard", cfg.dashboard, opts=pulumi.ResourceOptions(
    providers=[cluster.provider], depends_on=[half.batch])) if cfg.dashboard is not None else None

pulumi.export("cluster_name", cluster.cluster_name)
pulumi.export("cluster_endpoint", cluster.endpoint)
pulumi.export("node_pools", {name: [p.name for p in pool.node_pools] for name, pool in slice_pools.items()})
pulumi.export("tpu_chips", chips_by_generation([pool.plan for pool in slice_pools.values()]))
pulumi.export("local_queues", half.batch.local_queues)
pulumi.export("service_accounts", half.storage.service_accounts)
if dashboard is not None:
    pulumi.export("dashboard", dashboard.dashboard_id)
if half.pathways is not None:
    pulumi.export("pathways_service", half.pathways.pathways_service)
    pulumi.export("pathways_instance_type", half.pathways.instance_type)
    pulumi.export("pathways_server_image", half.pathways.server_image)
    pulumi.export("pathways_proxy_image", half.pathways.proxy_image)
