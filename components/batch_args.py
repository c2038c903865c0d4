"""The Args of `BatchStack` (Kueue, JobSet and the queues) and of the workloads checked against it.

Kept apart from `batch.py` so that a program describing its pools (`TpuSlicePool.kueue_pool`) never loads the
Kubernetes SDK. Every field is a plain value: Kueue's quotas are decided at preview, from what is written here.
"""

from typing import NotRequired, TypedDict


class KueuePoolArgs(TypedDict):
    """One group of identical TPU slices as Kueue sees it: tpuplane's `TpuSlicePool` (its `kueue_pool`), or a
    pool group your own program or Terraform manages, described by hand."""

    name: str
    """The group's name: its node pools are `<name>-<i>`."""
    tpu_type: str
    """A TPU type `tpuplane catalog` knows, e.g. `v6e-16`."""
    slices: NotRequired[int]
    """How many slices (default 1)."""
    capacity: NotRequired[str]
    """on-demand (default), reservation, spot, flex-start or queued: one Kueue flavor per capacity mode."""
    machine_type: NotRequired[str]
    """Only for the single-host 8-chip machines of 2x4 shapes (`ct6e-standard-8t`, `ct5lp-hightpu-8t`)."""
    max_run_duration: NotRequired[str]
    """`<seconds>s` for flex-start or queued pools: the longest run Kueue's provisioning requests may ask for."""
    dedicated_slices: NotRequired[int]
    """The first slices, held outside Kueue (by a Shared Pathways Service): not part of any quota (default 0)."""


class KueueTeamArgs(TypedDict):
    """One tenant: a namespace, a LocalQueue there and a ClusterQueue with its share of every flavor."""

    name: str
    """The team's ClusterQueue and LocalQueue, and by default its namespace."""
    share: float
    """The team's fraction of every flavor's capacity (0 < share <= 1; all shares add up to at most 1)."""
    namespace: NotRequired[str]
    """The namespace of its LocalQueue (default: the team's name)."""
    borrowing_limit: NotRequired[float]
    """How much more than its share the team may borrow from the cohort, as a fraction of its share."""
    lending_limit: NotRequired[float]
    """The fraction of its share the team lends to others while idle (0 to 1)."""
    priority: NotRequired[str]
    """The default WorkloadPriorityClass of its workloads: very-low, low, medium (default), high, very-high."""


class BatchStackArgs(TypedDict):
    """Kueue and JobSet on any GKE cluster, and the flavors and queues derived from the TPU pools given here."""

    pools: list[KueuePoolArgs]
    """The TPU pool groups Kueue admits to; quotas are derived from their slices."""
    teams: NotRequired[list[KueueTeamArgs]]
    """Tenants sharing the pools; without teams, one queue holds all capacity (namespace `default`)."""
    cohort: NotRequired[str]
    """The Kueue cohort the teams' ClusterQueues borrow within (default `tpuplane`)."""
    kueue_version: NotRequired[str]
    """Kueue's Helm chart version (pinned; default 0.19.2, the version tpuplane is tested with)."""
    jobset_version: NotRequired[str]
    """JobSet's Helm chart version (pinned; default 0.12.0, the version tpuplane is tested with)."""
    cpu_pool_name: NotRequired[str]
    """The CPU node pool where the controllers run and CPU pods are admitted (default `cpu`)."""
    cpu_machine_type: NotRequired[str]
    """That pool's machine type (default n2-standard-16): its cpu and memory become Kueue quota."""
    cpu_max_nodes: NotRequired[int]
    """That pool's maximum size (default 10)."""
    cluster_name: NotRequired[str]
    """The cluster's name: tpu7/tpu7x workloads select the workload policies named after it."""
    service_namespaces: NotRequired[list[str]]
    """Namespaces of long-lived services (a Shared Pathways Service) whose jobs Kueue must leave alone."""
    install_controllers: NotRequired[bool]
    """Install Kueue and JobSet from their pinned Helm charts (default true). False: they already run on the
    cluster (installed by other means), so no Helm release is created and nothing waits on one; the Kueue objects,
    priorities, team namespaces and queues are still created."""
