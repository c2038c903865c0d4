"""What Kueue, its queues and the workloads see of a cluster: `BatchPlatform`, the `BatchStackArgs` read.

One description, whoever made the cluster: a tpuplane stack (its `tpuplane:kueue` section, with the pools,
the CPU pool and the service namespaces the stack supplies) or a team's own program that hands the `BatchStack`
component a plain list of its pools. Every Kueue renderer and every workload rule reads this, never a whole
stack config.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from tpuplane.infra.args import text, text_list
from tpuplane.infra.batch.kueue_config import (
    DEFAULT_COHORT,
    DEFAULT_JOBSET_VERSION,
    DEFAULT_KUEUE_VERSION,
    KueueTeam,
)
from tpuplane.infra.fleet.cluster import CPU_POOL_NAME, DEFAULT_CPU_MACHINE_TYPE, CpuPool
from tpuplane.infra.fleet.pools import KueuePool
from tpuplane.infra.model import Allowed, FromStack, Hint
from tpuplane.infra.naming import DNS_LABEL, GKE_MAX_NODES, GKE_NAME, K8S_NAME
from tpuplane.infra.model import ConfigModel

BATCH_ARGS = "BatchStackArgs"


class BatchPlatform(ConfigModel):
    """The TPU pool groups Kueue admits to, the tenancy layout, the CPU pool and what Kueue must leave alone."""

    pools: Annotated[list[KueuePool], FromStack("tpuplane:tpuPools"), Allowed("a list of KueuePoolArgs"),
                     Hint("TpuSlicePool(...).kueue_pool")]
    teams: list[KueueTeam] = []
    cohort: str = DEFAULT_COHORT
    kueue_version: str = Field(DEFAULT_KUEUE_VERSION, alias="version")
    jobset_version: str = DEFAULT_JOBSET_VERSION
    cpu_pool_name: Annotated[text("a GKE node pool name", DNS_LABEL),
                             FromStack("tpuplane:cluster.cpuPool")] = CPU_POOL_NAME
    cpu_machine_type: Annotated[str, FromStack("tpuplane:cluster.cpuPool.machineType")] = DEFAULT_CPU_MACHINE_TYPE
    cpu_max_nodes: Annotated[int, FromStack("tpuplane:cluster.cpuPool.maxNodes")] = Field(
        CpuPool.model_fields["max_nodes"].default, ge=1, le=GKE_MAX_NODES)
    cluster_name: Annotated[text("a GKE cluster name", GKE_NAME), FromStack("tpuplane:cluster.name")] = ""
    """Names derived from the cluster (tpu7/tpu7x workload policies); empty when no pool needs one."""
    service_namespaces: Annotated[text_list("a namespace name", K8S_NAME), FromStack("tpuplane:pathways.name")] = []
    """Namespaces of long-lived services whose jobs Kueue must never intercept."""
    install_controllers: Annotated[bool, FromStack("")] = True
    """False: Kueue and JobSet already run on the cluster (no Helm releases, nothing waits on them)."""

    @property
    def team_namespaces(self) -> list[str]:
        """Namespaces of the declared teams: where clients (and their proxies) run."""
        return sorted({team.team_namespace for team in self.teams})
