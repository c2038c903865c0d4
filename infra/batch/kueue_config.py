"""Kueue's vocabulary for the batch stack: the controllers' namespaces and versions, priorities, and a team
(`KueueTeamArgs`, an entry of `tpuplane:kueue.teams`, and the name and namespace other components know it by,
`WorkloadTeamArgs`).

Share semantics (what a team is guaranteed):
- `share` is a fraction in (0, 1] of EVERY flavor's capacity (TPU slices per flavor, CPU and memory of the CPU
  pool). The shares of all teams add up to at most 1.
- TPU quotas are whole slices: each flavor's slices are split with the largest-remainder method, then turned into
  chips (slices x chips per slice), so the teams' chips (plus the remainder) add up to exactly the pool capacity
  and no team holds a fraction of a slice it could never use. CPU cores and MiB are split the same way.
  When the shares add up to less than 1, the remainder sits in a lending-only ClusterQueue (`unassigned`) in the
  same cohort: nobody submits to it, every team can borrow from it.
- `borrowingLimit` (fraction of a flavor's slices, default: no limit) caps what a team may borrow beyond its own
  quota; `lendingLimit` (fraction of the team's own slices, default: all of them) caps what it lends while idle.
  Both are rounded down to whole slices.
- A team may end up with less than one slice (own plus borrowable) of some flavor: it then never runs there, and
  a workload asking for that flavor in its queue is refused. A team with less than one slice of EVERY flavor
  could run nothing at all, which is a ConfigError.
- `priority` is the team's default workload priority (used when a workload names the team's queue and no priority).
"""

from __future__ import annotations

from packaging.version import Version
from pydantic import Field

from tpuplane.infra.errors import Problem
from tpuplane.infra.model import ConfigModel

# Kueue WorkloadPriorityClasses and pod PriorityClasses share these names (xpk's and Cluster Toolkit's values).
PRIORITIES: dict[str, int] = {"very-low": 100, "low": 250, "medium": 500, "high": 750, "very-high": 1000}
DEFAULT_PRIORITY = "medium"

KUEUE_NAMESPACE = "kueue-system"
JOBSET_NAMESPACE = "jobset-system"
# Namespaces a team must not own: the controllers' and Kubernetes' own.
SYSTEM_NAMESPACES = frozenset({"kube-system", "kube-public", "kube-node-lease", KUEUE_NAMESPACE, JOBSET_NAMESPACE,
                               "gke-managed-system", "gmp-system", "gmp-public"})
UNASSIGNED_QUEUE = "unassigned"  # the lending-only ClusterQueue that holds chips no team owns

MIN_KUEUE = Version("0.15.0")  # first release that serves kueue.x-k8s.io/v1beta2
MIN_JOBSET = Version("0.8.0")  # PathwaysJob needs it


class WorkloadTeam(ConfigModel):
    """`WorkloadTeamArgs`: a team whose jobs run in one namespace; what the rest of a stack (its storage, its
    service accounts) knows of a Kueue team."""

    name: str
    namespace: str | None = None  # default: the team name

    @property
    def team_namespace(self) -> str:
        return self.namespace or self.name


class KueueTeam(WorkloadTeam):
    """One tenant: a namespace, a LocalQueue there, and a ClusterQueue in the shared cohort."""

    share: float = Field(gt=0, le=1)
    borrowing_limit: float | None = Field(None, ge=0)
    lending_limit: float | None = Field(None, ge=0, le=1)
    priority: str = DEFAULT_PRIORITY


DEFAULT_KUEUE_VERSION = "0.19.2"  # Helm chart versions, no leading "v": the ones tpuplane is tested with
DEFAULT_JOBSET_VERSION = "0.12.0"
DEFAULT_COHORT = "tpuplane"


def priority_problem(path: str, priority: str) -> Problem | None:
    """A priority must name one of the classes the batch stack creates."""
    if priority in PRIORITIES:
        return None
    listed = ", ".join(f"{k} ({v})" for k, v in PRIORITIES.items())
    return Problem(path, priority, f"one of {listed}", "priorities are WorkloadPriorityClasses of the batch stack")
