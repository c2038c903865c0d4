"""The tpuplane Pulumi program: one stack = one TPU platform, composed from its validated config.

`pulumi up` runs this file; `tpuplane plan` runs the very same file under Pulumi's mocks.
"""

from pathlib import Path

import pulumi

from tpuplane.components.batch import BatchStack
from tpuplane.components.cluster import TpuCluster
from tpuplane.components.janitor import ProxyJanitor
from tpuplane.components.pathways import SharedPathwaysService
from tpuplane.components.reservation import TpuReservation
from tpuplane.components.sidecar_image import SidecarImage, SidecarImageArgs
from tpuplane.components.slice_pool import TpuSlicePool, TpuSlicePoolArgs
from tpuplane.components.stack_config import read_stack_config, stop_on_config_error
from tpuplane.infra.fleet.cluster import CPU_POOL_NAME, plan_cluster
from tpuplane.infra.fleet.nodepools import chips_by_generation
from tpuplane.infra.pathways.config import plan_pathways

PROJECT_DIR = Path(__file__).resolve().parent.parent  # relative paths in the config start here

cfg = read_stack_config()
cluster_plan = plan_cluster(cfg)
service = plan_pathways(cfg) if cfg.pathways is not None else None
sidecar_args = None
if service is not None and service.build_sidecar:
    sidecar = cfg.pathways.sidecar
    sidecar_args = SidecarImageArgs(
        project=cfg.project, region=cfg.region, context_dir=PROJECT_DIR / sidecar.context_path,
        requirements_file=sidecar.requirements_in_context, constraints_file=PROJECT_DIR / sidecar.constraints_path,
        jax_version=cfg.pathways.sidecar_jax_version)
    # the sidecar's requirements are checked before the first resource, not after the cluster and the queues
    stop_on_config_error(lambda: SidecarImage.check(f"{service.name}-sidecar", sidecar_args), config_paths={
        f"{service.name}-sidecar.jaxVersion": "tpuplane:pathways.jaxVersion",
        f"{service.name}-sidecar.requirementsFile": "tpuplane:pathways.sidecar.requirements",
        f"{service.name}-sidecar.contextDir": "tpuplane:pathways.sidecar.context"})

cluster = TpuCluster(cfg.cluster.name, cfg)

reservations = {res.name: TpuReservation(res.name, res, cfg) for res in cfg.reservations}

def slice_pool_args(pool) -> TpuSlicePoolArgs:
    """A `tpuplane:tpuPools` entry as the component's Args, on the stack's own cluster."""
    in_stack = cfg.stack_reservation(pool)
    return TpuSlicePoolArgs(
        project=cfg.project, location=cluster_plan.location, zone=cfg.cluster.zone, cluster=cluster.cluster.name,
        cluster_name=cfg.cluster.name, tpu_type=pool.tpu_type, slices=pool.slices, capacity=pool.capacity.value,
        reservation=pool.reservation, machine_type=pool.machine_type, max_run_duration=pool.max_run_duration,
        maintenance_interval=pool.maintenance_interval, disk_size_gb=pool.disk_size_gb, disk_type=pool.disk_type,
        accelerator_network=pool.accelerator_network, service_account=cluster.node_service_account.email,
        dedicated_slices=cfg.service_slices(pool), dedicated_owner=cfg.pathways.name if cfg.pathways else None,
        reservation_resource=reservations[in_stack.name].reservation if in_stack else None)


slice_pools = {pool.name: TpuSlicePool(pool.name, slice_pool_args(pool), opts=pulumi.ResourceOptions(parent=cluster))
               for pool in cfg.tpu_pools}

# Kueue and JobSet, and the queues derived from the pools: every Kubernetes object goes through the provider
# of the new cluster, which waits for the CPU pool.
batch = BatchStack("batch", cfg, cpu_pool_name=CPU_POOL_NAME,
                   opts=pulumi.ResourceOptions(providers=[cluster.provider]))

pulumi.export("cluster_name", cluster.cluster.name)
pulumi.export("cluster_endpoint", cluster.cluster.endpoint)
pulumi.export("node_pools", {name: [p.name for p in pool.node_pools] for name, pool in slice_pools.items()})
pulumi.export("tpu_chips", chips_by_generation([pool.plan for pool in slice_pools.values()]))
pulumi.export("local_queues", batch.local_queues)

if service is not None:
    sidecar_image = service.sidecar_image
    if sidecar_args is not None:
        sidecar_image = SidecarImage(f"{service.name}-sidecar", sidecar_args).image_ref
    pathways = SharedPathwaysService(
        service.name, cfg, node_service_account_email=cluster.node_service_account.email,
        cpu_pool_name=CPU_POOL_NAME, sidecar_image=sidecar_image,
        opts=pulumi.ResourceOptions(providers=[cluster.provider], depends_on=[batch.jobset_release]))
    if service.janitor_image:
        for namespace in service.proxy_namespaces:
            ProxyJanitor(f"proxy-janitor-{namespace}", namespace=namespace, image=service.janitor_image,
                         opts=pulumi.ResourceOptions(providers=[cluster.provider], depends_on=[batch]))
    pulumi.export("pathways_service", pathways.pathways_service)
    pulumi.export("pathways_instance_type", pathways.instance_type)
    pulumi.export("pathways_server_image", pathways.server_image)
    pulumi.export("pathways_proxy_image", pathways.proxy_image)
