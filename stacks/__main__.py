"""The tpuplane Pulumi program: one stack = one TPU platform, composed from its validated config.

`pulumi up` runs this file; `tpuplane plan` runs the very same file under Pulumi's mocks. It is one composition of
the public components: each `tpuplane:` section becomes one component's Args (`tpuplane.infra.stack_args`).
"""

from pathlib import Path

import pulumi

from tpuplane.components import (
    BatchStack,
    BatchStackArgs,
    ProxyJanitor,
    ProxyJanitorArgs,
    SharedPathwaysService,
    SharedPathwaysServiceArgs,
    SidecarImage,
    SidecarImageArgs,
    TpuCluster,
    TpuClusterArgs,
    TpuReservation,
    TpuReservationArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
)
from tpuplane.components.stack_config import read_stack_config, stop_on_config_error
from tpuplane.infra import stack_args
from tpuplane.infra.fleet.nodepools import chips_by_generation

PROJECT_DIR = Path(__file__).resolve().parent.parent  # relative paths in the config start here

cfg = read_stack_config()  # every config rule, before the first resource
pw = cfg.pathways
sidecar_args = stack_args.sidecar_args(cfg, PROJECT_DIR)
if sidecar_args is not None:
    # the sidecar's requirements are checked before the first resource, not after the cluster and the queues
    stop_on_config_error(lambda: SidecarImage.check(SidecarImageArgs(**sidecar_args)), config_paths={
        "SidecarImageArgs.jax_version": "tpuplane:pathways.jaxVersion",
        "SidecarImageArgs.requirements_file": "tpuplane:pathways.sidecar.requirements",
        "SidecarImageArgs.context_dir": "tpuplane:pathways.sidecar.context"})

cluster = TpuCluster(cfg.cluster.name, TpuClusterArgs(**stack_args.cluster_args(cfg)))
reservations = {res.name: TpuReservation(res.name, TpuReservationArgs(**stack_args.reservation_args(cfg, res)))
                for res in cfg.reservations}


def slice_pool(pool) -> TpuSlicePool:
    """A `tpuplane:tpuPools` entry on the stack's cluster, waiting for the stack's reservation it consumes (by
    `depends_on`: the config may name it by its path, which the pools' affinity keeps)."""
    reservation = cfg.stack_reservation(pool)
    return TpuSlicePool(pool.name, TpuSlicePoolArgs(
        **stack_args.slice_pool_args(cfg, pool), cluster=cluster.cluster_name,
        service_account=cluster.node_service_account_email),
        opts=pulumi.ResourceOptions(parent=cluster, depends_on=[reservations[reservation.name].reservation]
                                    if reservation else None))


slice_pools = {pool.name: slice_pool(pool) for pool in cfg.tpu_pools}

# Kueue and JobSet, and the queues derived from the pools: every Kubernetes object goes through the provider
# of the new cluster, which waits for the CPU pool.
batch = BatchStack("batch", BatchStackArgs(**stack_args.batch_args(cfg)),
                   opts=pulumi.ResourceOptions(providers=[cluster.provider]))

pulumi.export("cluster_name", cluster.cluster_name)
pulumi.export("cluster_endpoint", cluster.endpoint)
pulumi.export("node_pools", {name: [p.name for p in pool.node_pools] for name, pool in slice_pools.items()})
pulumi.export("tpu_chips", chips_by_generation([pool.plan for pool in slice_pools.values()]))
pulumi.export("local_queues", batch.local_queues)

if pw is not None:
    image = SidecarImage(f"{pw.name}-sidecar", SidecarImageArgs(**sidecar_args)).image_ref if sidecar_args \
        else pw.sidecar.image if pw.sidecar else None
    pathways = SharedPathwaysService(pw.name, SharedPathwaysServiceArgs(
        **stack_args.service_args(cfg), node_service_account=cluster.node_service_account_email,
        **({"sidecar_image": image} if image is not None else {})),
        opts=pulumi.ResourceOptions(providers=[cluster.provider], depends_on=[batch.jobset_release]))
    for namespace in pathways.proxy_namespaces if pw.janitor_image else ():
        ProxyJanitor(f"proxy-janitor-{namespace}", ProxyJanitorArgs(namespace=namespace, image=pw.janitor_image),
                     opts=pulumi.ResourceOptions(providers=[cluster.provider], depends_on=[batch]))
    pulumi.export("pathways_service", pathways.pathways_service)
    pulumi.export("pathways_instance_type", pathways.instance_type)
    pulumi.export("pathways_server_image", pathways.server_image)
    pulumi.export("pathways_proxy_image", pathways.proxy_image)
