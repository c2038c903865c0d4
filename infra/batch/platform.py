"""What Kueue, its queues and the workloads see of a cluster: `BatchPlatform`.

One description, whoever made the cluster: a tpuplane stack (`StackConfig.batch_platform`) or a team's own
program that hands the `BatchStack` component a plain list of its pools (`tpuplane.infra.batch.args`).
Every Kueue renderer and every workload rule reads this, never the whole stack config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:
    from tpuplane.infra.batch.kueue_config import KueueConfig
    from tpuplane.infra.config import CpuPoolConfig, TpuPoolConfig


@dataclass(frozen=True)
class BatchPlatform:
    """The TPU pool groups Kueue admits to, the CPU pool, the tenancy layout and what Kueue must leave alone."""

    tpu_pools: tuple["TpuPoolConfig", ...]
    kueue: "KueueConfig"
    cpu_pool: "CpuPoolConfig"
    cluster_name: str = ""
    """Names derived from the cluster (tpu7/tpu7x workload policies); empty when no pool needs one."""
    dedicated_slices: Mapping[str, int] = field(default_factory=dict)
    """Pool group -> its first slices, held outside Kueue (by a Shared Pathways Service)."""
    service_namespaces: tuple[str, ...] = ()
    """Namespaces of long-lived services whose jobs Kueue must never intercept."""

    def queued_slices(self, pool: "TpuPoolConfig") -> int:
        """Slices of `pool` that Kueue admits workloads to: all but the dedicated ones."""
        return pool.slices - self.dedicated_slices.get(pool.name, 0)


def kueue_pool_of(pool: "TpuPoolConfig", *, dedicated_slices: int = 0) -> dict[str, Any]:
    """A pool group as `BatchStackArgs.pools` describes it: only what Kueue's flavors and quotas read."""
    fields = {"name": pool.name, "tpu_type": pool.tpu_type, "slices": pool.slices, "capacity": pool.capacity.value,
              "machine_type": pool.machine_type, "max_run_duration": pool.max_run_duration,
              "dedicated_slices": dedicated_slices}
    return {key: value for key, value in fields.items() if value is not None}
