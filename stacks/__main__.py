"""The tpuplane Pulumi program: one stack = one TPU platform, composed from its validated config.

`pulumi up` runs this file; `tpuplane plan` runs the very same file under Pulumi's mocks.
"""

import pulumi

from tpuplane.components.cluster import TpuCluster
from tpuplane.components.reservation import TpuReservation
from tpuplane.components.slice_pool import TpuSlicePool
from tpuplane.components.stack_config import read_stack_config
from tpuplane.infra.cluster import plan_cluster
from tpuplane.infra.nodepools import chips_by_generation, plan_tpu_pools

cfg = read_stack_config()
cluster_plan = plan_cluster(cfg)
groups = plan_tpu_pools(cfg)

cluster = TpuCluster(cfg.cluster.name, cfg)

reservations = {
    res.name: TpuReservation(res.name, res, cfg)
    for res in cfg.reservations
}

slice_pools = {
    group.config.name: TpuSlicePool(
        group.config.name, group, project=cfg.project, region=cfg.region, location=cluster_plan.location,
        zone=cfg.cluster.zone, cluster=cluster.cluster.name, service_account=cluster.node_service_account.email,
        reservation=reservations[group.pools[0].reservation_in_stack].reservation
        if group.pools[0].reservation_in_stack else None,
        opts=pulumi.ResourceOptions(parent=cluster))
    for group in groups
}

pulumi.export("cluster_name", cluster.cluster.name)
pulumi.export("cluster_endpoint", cluster.cluster.endpoint)
pulumi.export("node_pools", {name: [p.name for p in pool.node_pools] for name, pool in slice_pools.items()})
pulumi.export("tpu_chips", chips_by_generation(groups))
