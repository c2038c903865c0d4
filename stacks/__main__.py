"""The tpuplane Pulumi program: one stack = one TPU platform, composed from its validated config.

`pulumi up` runs this file; `tpuplane plan` runs the very same file under Pulumi's mocks. It is one composition of
the public components (`tpuplane.components`): each `tpuplane:` section becomes one component's Args.
"""

from pathlib import Path

import pulumi

from tpuplane.components.batch import BatchStack, BatchStackArgs
from tpuplane.components.cluster import TpuCluster, TpuClusterArgs
from tpuplane.components.janitor import ProxyJanitor, ProxyJanitorArgs
from tpuplane.components.pathways import SharedPathwaysService, SharedPathwaysServiceArgs
from tpuplane.components.reservation import TpuReservation, TpuReservationArgs
from tpuplane.components.sidecar_image import SidecarImage, SidecarImageArgs
from tpuplane.components.slice_pool import TpuSlicePool, TpuSlicePoolArgs
from tpuplane.components.stack_config import read_stack_config, stop_on_config_error
from tpuplane.infra.batch.platform import kueue_pool_of
from tpuplane.infra.fleet.cluster import cluster_location, needs_multi_networking
from tpuplane.infra.fleet.nodepools import chips_by_generation

PROJECT_DIR = Path(__file__).resolve().parent.parent  # relative paths in the config start here

cfg = read_stack_config()  # every config rule, before the first resource
c, pw = cfg.cluster, cfg.pathways
teams = [t.model_dump(exclude_none=True) for t in cfg.kueue.teams]
client_namespaces = sorted({t.team_namespace for t in cfg.kueue.teams})

cluster_args = TpuClusterArgs(project=cfg.project, region=cfg.region, multi_networking=needs_multi_networking(cfg),
                              **c.model_dump(exclude_none=True))
pool_args = {pool.name: TpuSlicePoolArgs(
    project=cfg.project, location=cluster_location(c, cfg.region), zone=c.zone, cluster=c.name,
    **pool.model_dump(exclude_none=True, exclude={"name", "capacity"}), capacity=pool.capacity.value,
    dedicated_slices=cfg.service_slices(pool), **({"dedicated_owner": pw.name} if pw else {}))
    for pool in cfg.tpu_pools}
batch_args = BatchStackArgs(
    pools=[kueue_pool_of(pool, dedicated_slices=cfg.service_slices(pool)) for pool in cfg.tpu_pools],
    teams=teams, cohort=cfg.kueue.cohort, kueue_version=cfg.kueue.version, jobset_version=cfg.kueue.jobset_version,
    cpu_machine_type=c.cpu_pool.machine_type, cpu_max_nodes=c.cpu_pool.max_nodes, cluster_name=c.name,
    service_namespaces=[pw.name] if pw else [])

service_args = sidecar_args = None
if pw is not None:
    # completed with the cluster's node service account below
    service_args = SharedPathwaysServiceArgs(
        project=cfg.project, region=cfg.region, cluster_name=c.name, pool=kueue_pool_of(cfg.pool_by_name(pw.tpu_pool)),
        client_namespaces=client_namespaces, cpu_machine_type=c.cpu_pool.machine_type,
        **pw.model_dump(exclude_none=True, include={"jax_version", "server_image", "slices", "gcs_bucket"}))
    if pw.sidecar is not None and pw.sidecar.image is None:
        sidecar_args = SidecarImageArgs(
            project=cfg.project, region=cfg.region, context_dir=str(PROJECT_DIR / pw.sidecar.context_path),
            requirements_file=pw.sidecar.requirements_in_context,
            constraints_file=str(PROJECT_DIR / pw.sidecar.constraints_path), jax_version=pw.sidecar_jax_version)
        # the sidecar's requirements are checked before the first resource, not after the cluster and the queues
        stop_on_config_error(lambda: SidecarImage.check(sidecar_args), config_paths={
            "SidecarImageArgs.jax_version": "tpuplane:pathways.jaxVersion",
            "SidecarImageArgs.requirements_file": "tpuplane:pathways.sidecar.requirements",
            "SidecarImageArgs.context_dir": "tpuplane:pathways.sidecar.context"})

cluster = TpuCluster(c.name, cluster_args)
reservations = {res.name: TpuReservation(res.name, TpuReservationArgs(
    project=cfg.project, keep_on_delete=c.production,
    **res.model_dump(exclude_none=True, exclude={"name", "zone"}), zone=res.zone or c.zone)) for res in cfg.reservations}


def slice_pool(pool) -> TpuSlicePool:
    """A `tpuplane:tpuPools` entry on the stack's cluster, waiting for the stack's reservation it consumes."""
    reservation = cfg.stack_reservation(pool)
    return TpuSlicePool(pool.name, TpuSlicePoolArgs(
        pool_args[pool.name], cluster=cluster.cluster_name, cluster_name=c.name,
        service_account=cluster.node_service_account_email),
        opts=pulumi.ResourceOptions(parent=cluster, depends_on=[reservations[reservation.name].reservation]
                                    if reservation else None))


slice_pools = {pool.name: slice_pool(pool) for pool in cfg.tpu_pools}

# Kueue and JobSet, and the queues derived from the pools: every Kubernetes object goes through the provider
# of the new cluster, which waits for the CPU pool.
batch = BatchStack("batch", batch_args, opts=pulumi.ResourceOptions(providers=[cluster.provider]))

pulumi.export("cluster_name", cluster.cluster_name)
pulumi.export("cluster_endpoint", cluster.endpoint)
pulumi.export("node_pools", {name: [p.name for p in pool.node_pools] for name, pool in slice_pools.items()})
pulumi.export("tpu_chips", chips_by_generation([pool.plan for pool in slice_pools.values()]))
pulumi.export("local_queues", batch.local_queues)

if pw is not None:
    sidecar_image = SidecarImage(f"{pw.name}-sidecar", sidecar_args).image_ref if sidecar_args else None
    pathways = SharedPathwaysService(pw.name, SharedPathwaysServiceArgs(
        service_args, node_service_account=cluster.node_service_account_email,
        **({"sidecar_image": sidecar_image or pw.sidecar.image} if pw.sidecar else {})),
        opts=pulumi.ResourceOptions(providers=[cluster.provider], depends_on=[batch.jobset_release]))
    for namespace in pathways.proxy_namespaces if pw.janitor_image else ():
        ProxyJanitor(f"proxy-janitor-{namespace}", ProxyJanitorArgs(namespace=namespace, image=pw.janitor_image),
                     opts=pulumi.ResourceOptions(providers=[cluster.provider], depends_on=[batch]))
    pulumi.export("pathways_service", pathways.pathways_service)
    pulumi.export("pathways_instance_type", pathways.instance_type)
    pulumi.export("pathways_server_image", pathways.server_image)
    pulumi.export("pathways_proxy_image", pathways.proxy_image)
