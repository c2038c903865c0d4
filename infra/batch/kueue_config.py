"""Config of the batch stack (`tpuplane:kueue`): controller versions, and the teams that share the fleet.

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

from typing import TYPE_CHECKING

from packaging.version import Version
from pydantic import Field

from tpuplane.infra.errors import Problem
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.naming import DNS_LABEL

if TYPE_CHECKING:
    from tpuplane.infra.batch.platform import BatchPlatform

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


class TeamConfig(ConfigModel):
    """One tenant: a namespace, a LocalQueue there, and a ClusterQueue in the shared cohort."""

    name: str
    namespace: str | None = None  # default: the team name
    share: float = Field(gt=0, le=1)
    borrowing_limit: float | None = Field(None, ge=0)
    lending_limit: float | None = Field(None, ge=0, le=1)
    priority: str = DEFAULT_PRIORITY

    @property
    def team_namespace(self) -> str:
        return self.namespace or self.name


class KueueConfig(ConfigModel):
    """Pinned controller versions (Helm chart versions, no leading "v") and the tenancy layout."""

    version: str = "0.19.2"
    jobset_version: str = "0.12.0"
    cohort: str = "tpuplane"
    teams: list[TeamConfig] = []


def priority_problem(path: str, priority: str) -> Problem | None:
    """A priority must name one of the classes the batch stack creates."""
    if priority in PRIORITIES:
        return None
    listed = ", ".join(f"{k} ({v})" for k, v in PRIORITIES.items())
    return Problem(path, priority, f"one of {listed}", "priorities are WorkloadPriorityClasses of the batch stack")


def _version_problems(path: str, given: str, minimum: Version, chart: str) -> list[Problem]:
    hint = f"the {chart} Helm chart version, e.g. {minimum}"
    if given.startswith("v"):
        return [Problem(path, given, "a chart version without a leading 'v'", f"write {given[1:]}")]
    try:
        parsed = Version(given)
    except ValueError:  # InvalidVersion, or a release part too long to read as a number
        return [Problem(path, given, "a version such as 0.19.2", hint)]
    if parsed < minimum:
        return [Problem(path, given, f"at least {minimum}", hint)]
    return []


def _team_problems(platform: "BatchPlatform") -> list[Problem]:
    problems: list[Problem] = []
    names: set[str] = set()
    namespaces: dict[str, str] = {}
    total = 0.0
    for i, team in enumerate(platform.kueue.teams):
        path = f"tpuplane:kueue.teams[{i}]"
        if not DNS_LABEL.fullmatch(team.name) or len(team.name) > 63:
            problems.append(Problem(f"{path}.name", team.name, "a DNS label of at most 63 characters: a-z, 0-9, '-'",
                                    "the name becomes a ClusterQueue, a LocalQueue and by default a namespace"))
        elif team.name == UNASSIGNED_QUEUE:
            problems.append(Problem(f"{path}.name", team.name, f"any name but '{UNASSIGNED_QUEUE}'",
                                    "that ClusterQueue holds the chips no team owns"))
        if team.name in names:
            problems.append(Problem(f"{path}.name", team.name, "a name no other team uses"))
        names.add(team.name)
        ns_path = f"{path}.namespace" if team.namespace else f"{path}.name"
        ns = team.team_namespace
        if team.namespace is not None and (not DNS_LABEL.fullmatch(ns) or len(ns) > 63):
            problems.append(Problem(ns_path, ns, "a DNS label of at most 63 characters"))
        elif ns in SYSTEM_NAMESPACES or ns.startswith("kube-"):
            problems.append(Problem(ns_path, ns, "a namespace that is not a system namespace",
                                    f"system namespaces: {', '.join(sorted(SYSTEM_NAMESPACES))}"))
        elif ns in namespaces:
            problems.append(Problem(ns_path, ns, "a namespace no other team uses",
                                    f"team '{namespaces[ns]}' already owns it; a namespace maps to one LocalQueue"))
        namespaces.setdefault(ns, team.name)
        bad_priority = priority_problem(f"{path}.priority", team.priority)
        if bad_priority:
            problems.append(bad_priority)
        total += team.share
        if total > 1 + 1e-9:
            problems.append(Problem(f"{path}.share", team.share, f"at most {max(0.0, 1 - (total - team.share)):.6g}",
                                    f"team shares are fractions of the pool capacity and add up to {total:.6g} > 1"))
    return problems


def kueue_config_problems(platform: "BatchPlatform") -> list[Problem]:
    """Rules of `tpuplane:kueue` on their own: versions, cohort and team layout. The rules that need the derived
    quotas live beside them in `tpuplane.infra.batch.kueue.kueue_problems`."""
    problems = _version_problems("tpuplane:kueue.version", platform.kueue.version, MIN_KUEUE, "Kueue")
    problems += _version_problems("tpuplane:kueue.jobsetVersion", platform.kueue.jobset_version, MIN_JOBSET, "JobSet")
    if not DNS_LABEL.fullmatch(platform.kueue.cohort) or len(platform.kueue.cohort) > 63:
        problems.append(Problem("tpuplane:kueue.cohort", platform.kueue.cohort, "a DNS label of at most 63 characters"))
    return problems + _team_problems(platform)
