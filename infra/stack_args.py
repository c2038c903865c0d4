"""A validated stack config as the Args of the components `stacks/__main__.py` composes: one mapping per
component, field for field. Values that only exist once resources do (the cluster's name as an Output, the node
service account) are added by the program.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpuplane.infra.batch.platform import kueue_pool_of
from tpuplane.infra.config import ReservationConfig, StackConfig, TpuPoolConfig
from tpuplane.infra.fleet.cluster import cluster_location, needs_multi_networking
from tpuplane.infra.pathways.config import team_namespaces


def cluster_args(cfg: StackConfig) -> dict[str, Any]:
    """`TpuClusterArgs`: the `tpuplane:cluster` section, and multi-networking when a pool needs it."""
    return {"project": cfg.project, "region": cfg.region, "multi_networking": needs_multi_networking(cfg),
            **cfg.cluster.model_dump(exclude_none=True)}


def reservation_args(cfg: StackConfig, res: ReservationConfig) -> dict[str, Any]:
    """`TpuReservationArgs`: a `tpuplane:reservations` entry, in the cluster's zone unless it names one; kept on
    delete in production."""
    return {"project": cfg.project, "keep_on_delete": cfg.cluster.production,
            **res.model_dump(exclude_none=True, exclude={"zone"}), "zone": res.zone or cfg.cluster.zone}


def slice_pool_args(cfg: StackConfig, pool: TpuPoolConfig) -> dict[str, Any]:
    """`TpuSlicePoolArgs` of a `tpuplane:tpuPools` entry on the stack's cluster (add `cluster` and
    `service_account` from the cluster's outputs)."""
    dedicated = {"dedicated_slices": cfg.service_slices(pool), "dedicated_owner": cfg.pathways.name} \
        if cfg.pathways is not None else {}
    return {"project": cfg.project, "location": cluster_location(cfg.cluster, cfg.region), "zone": cfg.cluster.zone,
            "cluster_name": cfg.cluster.name, **pool.model_dump(exclude_none=True, exclude={"name", "capacity"}),
            "capacity": pool.capacity.value, **dedicated}


def batch_args(cfg: StackConfig) -> dict[str, Any]:
    """`BatchStackArgs`: every pool group (less the service's slices), the `tpuplane:kueue` section and the CPU
    pool."""
    return {"pools": [kueue_pool_of(pool, dedicated_slices=cfg.service_slices(pool)) for pool in cfg.tpu_pools],
            "teams": [team.model_dump(exclude_none=True) for team in cfg.kueue.teams], "cohort": cfg.kueue.cohort,
            "kueue_version": cfg.kueue.version, "jobset_version": cfg.kueue.jobset_version,
            "cpu_machine_type": cfg.cluster.cpu_pool.machine_type, "cpu_max_nodes": cfg.cluster.cpu_pool.max_nodes,
            "cluster_name": cfg.cluster.name, "service_namespaces": list(cfg.batch_platform.service_namespaces)}


def service_args(cfg: StackConfig) -> dict[str, Any]:
    """`SharedPathwaysServiceArgs` of `tpuplane:pathways` (add `node_service_account` and `sidecar_image`)."""
    pw = cfg.pathways
    assert pw is not None and (pool := cfg.pool_by_name(pw.tpu_pool)) is not None  # checked by the config rules
    return {"project": cfg.project, "region": cfg.region, "cluster_name": cfg.cluster.name,
            "service_name": pw.name, "pool": kueue_pool_of(pool, dedicated_slices=cfg.service_slices(pool)),
            "client_namespaces": team_namespaces(cfg),
            "cpu_machine_type": cfg.cluster.cpu_pool.machine_type,
            **pw.model_dump(exclude_none=True, include={"jax_version", "server_image", "slices", "gcs_bucket"})}


def sidecar_args(cfg: StackConfig, project_dir: Path) -> dict[str, Any] | None:
    """`SidecarImageArgs` when `tpuplane:pathways.sidecar` asks for a build (paths start at `project_dir`)."""
    pw = cfg.pathways
    if pw is None or pw.sidecar is None or pw.sidecar.image is not None:
        return None
    return {"project": cfg.project, "region": cfg.region, "context_dir": str(project_dir / pw.sidecar.context_path),
            "requirements_file": pw.sidecar.requirements_in_context,
            "constraints_file": str(project_dir / pw.sidecar.constraints_path), "jax_version": pw.sidecar_jax_version}
