"""Will it schedule? What Kueue and kube-scheduler would do with a JobSet or Job on a stack, decided offline.

The workload is judged as the API server would store it (`tpuplane.infra.batch.admission`: the JobSet and Kueue
webhooks' defaults, then validation), so a JobSet written for xpk is read with the names and defaults it gets.
The simulation reads the very objects the stack deploys (ResourceFlavors, ClusterQueues, LocalQueues, rendered by
`tpuplane.infra.batch.kueue`) and the node pools it plans (`tpuplane.infra.fleet.nodepools`), then follows Kueue's
documented flavor assignment: per pod set and resource group, the ClusterQueue's flavors in order; a flavor fits
when the pod's node selector and required node affinity agree with the flavor's node labels (on the flavor's own
label keys), when the pod (with the flavor's tolerations) tolerates the flavor's node taints, and when the quota,
with what the cohort can lend, could ever hold the pod set. Admitted pods carry the flavor's node labels and
tolerations; kube-scheduler then needs a node pool whose labels, taints and allocatable TPU/cpu/memory fit them.

"Could ever" is the question: the check judges an empty cluster (no other workload holds quota), so a workload it
passes may still wait its turn, but one it refuses would never run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal
from typing import Any, Iterable, Mapping, Sequence

from tpuplane.infra.batch.admission import QUEUE_LABEL, admitted
from tpuplane.infra.batch.kueue import CPU_FLAVOR, render_cluster_queues, render_flavors, render_local_queues
from tpuplane.infra.batch.kueue_config import PRIORITIES
from tpuplane.infra.batch.workload import PRIORITY_LABEL
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.machines import gke_allocatable, machine_shape
from tpuplane.infra.fleet.nodepools import plan_tpu_pools
from tpuplane.infra.fleet.pools import SlicePoolSpec
from tpuplane.infra.fleet.scheduling import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GKE_MULTISLICE_RULE,
    INSTANCE_TYPE_LABEL,
    NODEPOOL_LABEL,
    PLACEMENT_POLICY_LABEL,
    TPU_RESOURCE,
    tpu_node_labels,
    tpu_node_taints,
)
from tpuplane.infra.quantity import QUANTITY_ALLOWED, parse_quantity
from tpuplane.infra.storage.args import TeamStorageSpec


_GKE_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
_MIB = Decimal(2**20)
_LABELS_DISAGREE = "labels do not match the node selector/affinity"


# ---------------------------------------------------------------------------------------------------------------
# What the stack offers


@dataclass(frozen=True)
class NodePoolFacts:
    """One node pool as kube-scheduler sees its nodes."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, str], ...]
    nodes: int
    tpu_chips: int  # per node
    cpu: Decimal | None  # allocatable cores per node; None when the machine's shape is unknown
    memory_mib: Decimal | None


@dataclass(frozen=True)
class StackFacts:
    """The Kueue objects, node pools and storage claims of one stack."""

    flavors: Mapping[str, Mapping[str, Any]]
    cluster_queues: Mapping[str, Mapping[str, Any]]
    local_queues: Mapping[tuple[str, str], str]  # (namespace, name) -> ClusterQueue
    pools: tuple[NodePoolFacts, ...]
    priority_classes: frozenset[str] | None = None  # WorkloadPriorityClass names; None when not known
    # storage (claim) name -> its namespaces; None when not known (a cluster whose claims could not be read)
    claims: Mapping[str, tuple[str, ...]] | None = None


def _allocatable(machine_type: str) -> tuple[Decimal | None, Decimal | None]:
    shape = machine_shape(machine_type)
    if shape is None:
        return None, None
    allocatable = gke_allocatable(shape)
    return Decimal(allocatable.millicores) / 1000, Decimal(allocatable.memory_mib)


def stack_facts(tpu_pools: Sequence[SlicePoolSpec], platform: BatchPlatform,
                storage: TeamStorageSpec | None = None) -> StackFacts:
    """Everything the simulation needs, from the same renderers and plans the stack program uses."""
    pools = []
    for group in plan_tpu_pools(tpu_pools):
        cpu, memory = _allocatable(group.spec.machine_type)
        for pool in group.pools:
            labels = {**tpu_node_labels(group.spec, group.config.capacity.value), **pool.labels,
                      NODEPOOL_LABEL: pool.name}
            if pool.workload_policy is not None:
                labels[PLACEMENT_POLICY_LABEL] = pool.workload_policy.name
            taints = {(t["key"], t["effect"]): t for t in tpu_node_taints(group.config.capacity.value)}
            for taint in pool.taints:
                effect = _GKE_EFFECTS.get(taint["effect"], taint["effect"])
                taints[(taint["key"], effect)] = {**taint, "effect": effect}
            pools.append(NodePoolFacts(pool.name, labels, tuple(taints.values()), group.spec.vms_per_slice,
                                       group.spec.chips_per_vm, cpu, memory))
    cpu, memory = _allocatable(platform.cpu_machine_type)
    pools.append(NodePoolFacts(platform.cpu_pool_name, {NODEPOOL_LABEL: platform.cpu_pool_name,
                                                        INSTANCE_TYPE_LABEL: platform.cpu_machine_type},
                               (), platform.cpu_max_nodes, 0, cpu, memory))
    return StackFacts(
        flavors={f["metadata"]["name"]: f for f in render_flavors(platform)},
        cluster_queues={q["metadata"]["name"]: q for q in render_cluster_queues(platform)},
        local_queues={(q["metadata"]["namespace"], q["metadata"]["name"]): q["spec"]["clusterQueue"]
                      for q in render_local_queues(platform)},
        pools=tuple(pools),
        priority_classes=frozenset(PRIORITIES),
        claims={s.name: tuple(sorted(s.namespaces)) for s in storage.storages} if storage is not None else {},
    )


# ---------------------------------------------------------------------------------------------------------------
# What the workload asks for


@dataclass(frozen=True)
class PodSet:
    """Kueue's unit of admission: the pods of one replicated job (or of a Job)."""

    name: str
    jobs: int  # child Jobs (a JobSet's replicas: slices, for TPU jobs)
    count: int  # pods in all
    per_job: int  # pods of one child Job (a slice's worth for TPU jobs)
    template: Mapping[str, Any]  # the pod spec
    requests: Mapping[str, Decimal]  # per pod; cpu in cores, memory in MiB, others in units
    exclusive: bool = False  # its Jobs carry JobSet's exclusive-topology annotation themselves


def _quantity(value: Any, resource: str, where: str) -> Decimal:
    try:
        amount = parse_quantity(value)
    except ValueError:
        raise ConfigError.at(where, value, QUANTITY_ALLOWED) from None
    return amount / _MIB if resource == "memory" else amount


def _container_requests(container: Mapping[str, Any], where: str) -> dict[str, Decimal]:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}  # requests default to limits
    return {name: _quantity(value, name, f"{where}.resources.{name}") for name, value in merged.items()}


def pod_requests(pod: Mapping[str, Any], where: str) -> dict[str, Decimal]:
    """What Kueue counts for one pod: its containers' requests added up, and the largest init container's (native
    sidecars, init containers that keep running, add up too)."""
    total: dict[str, Decimal] = {}
    for i, container in enumerate(pod.get("containers") or []):
        for name, amount in _container_requests(container, f"{where}.containers[{i}]").items():
            total[name] = total.get(name, Decimal(0)) + amount
    init_peak: dict[str, Decimal] = {}
    for i, container in enumerate(pod.get("initContainers") or []):
        requests = _container_requests(container, f"{where}.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            for name, amount in requests.items():
                total[name] = total.get(name, Decimal(0)) + amount
        else:
            for name, amount in requests.items():
                init_peak[name] = max(init_peak.get(name, Decimal(0)), amount)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), amount)
    return {name: amount for name, amount in sorted(total.items()) if amount}


def _count(value: Any, default: int, where: str) -> int:
    """parallelism/replicas: absent means the default; the API server refuses a negative one."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError.at(where, value, "a whole number >= 0", "the API server refuses anything else")
    return value


def pod_sets(manifest: Mapping[str, Any]) -> list[PodSet]:
    """The pod sets of an admitted JobSet (one per replicated job) or Job (`admission.admitted`)."""
    spec = manifest["spec"]
    if manifest["kind"] == "JobSet":
        sets = []
        for i, rjob in enumerate(spec["replicatedJobs"]):
            job_spec = rjob["template"]["spec"]
            per_job = _count(job_spec.get("parallelism"), 1, f"spec.replicatedJobs[{i}].template.spec.parallelism")
            pod = ((job_spec.get("template") or {}).get("spec")) or {}
            where = f"spec.replicatedJobs[{i}].template.spec.template.spec"
            replicas = rjob["replicas"]  # defaulted, and validated by the schema
            annotations = ((rjob["template"].get("metadata") or {}).get("annotations") or {})
            sets.append(PodSet(str(rjob["name"]), replicas, replicas * per_job, per_job, pod,
                               pod_requests(pod, where), EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations))
        return sets
    per_job = _count(spec.get("parallelism"), 1, "spec.parallelism")
    pod = (spec.get("template") or {}).get("spec") or {}
    return [PodSet("main", 1, per_job, per_job, pod, pod_requests(pod, "spec.template.spec"))]


# ---------------------------------------------------------------------------------------------------------------
# Matching: selectors, affinity, taints


def _expression_holds(expression: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values") or []
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return False  # Gt/Lt on labels tpuplane never sets


def _required_terms(pod: Mapping[str, Any]) -> list[list[Mapping[str, Any]]]:
    required = (((pod.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    return [term.get("matchExpressions") or [] for term in required.get("nodeSelectorTerms") or []]


def selects(pod: Mapping[str, Any], labels: Mapping[str, str], *, keys: Iterable[str] | None = None) -> bool:
    """Do the pod's node selector and required node affinity accept nodes with `labels`? With `keys`, only
    those label keys are judged (Kueue judges a flavor on its own label keys only)."""
    judged = set(labels) if keys is None else set(keys)
    selector = pod.get("nodeSelector") or {}
    for key, value in selector.items():
        if key in judged and labels.get(key) != value:
            return False
        if keys is None and key not in labels:
            return False
    terms = _required_terms(pod)
    if not terms:
        return True
    return any(all(_expression_holds(e, labels) for e in term if keys is None or e.get("key") in judged)
               for term in terms)


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return not toleration.get("key") or toleration.get("key") == taint.get("key")
    return toleration.get("key") == taint.get("key") and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(taints: Iterable[Mapping[str, Any]], tolerations: list[Mapping[str, Any]]) -> list[str]:
    """The scheduling taints (NoSchedule, NoExecute) that no toleration covers, as `key=value:effect`."""
    return [f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints
            if t.get("effect") in ("NoSchedule", "NoExecute") and not any(_tolerates(x, t) for x in tolerations)]


# ---------------------------------------------------------------------------------------------------------------
# Kueue: flavor assignment and quota


def _entries(cluster_queue: Mapping[str, Any]) -> list[tuple[list[str], list[Mapping[str, Any]]]]:
    return [(g["coveredResources"], g["flavors"]) for g in cluster_queue["spec"]["resourceGroups"]]


def _amount(entry: Mapping[str, Any], key: str, resource: str) -> Decimal | None:
    if key not in entry:
        return None
    return _quantity(entry[key], resource, f"ClusterQueue quota {entry['name']}")


def reach(facts: StackFacts, queue: str, flavor: str, resource: str) -> Decimal:
    """The most of `resource` in `flavor` the queue could ever be admitted: its nominal quota plus what it may
    borrow from its cohort (capped by its borrowingLimit; what others lend is capped by their lendingLimit)."""

    def entry_of(name: str) -> Mapping[str, Any] | None:
        for _, flavors in _entries(facts.cluster_queues[name]):
            for f in flavors:
                if f["name"] == flavor:
                    return next((r for r in f["resources"] if r["name"] == resource), None)
        return None

    own = entry_of(queue)
    if own is None:
        return Decimal(0)
    nominal = _amount(own, "nominalQuota", resource) or Decimal(0)
    cohort = facts.cluster_queues[queue]["spec"].get("cohortName")
    if not cohort:
        return nominal
    lendable = Decimal(0)
    for name, other in facts.cluster_queues.items():
        if name == queue or other["spec"].get("cohortName") != cohort:
            continue
        entry = entry_of(name)
        if entry is not None:
            lent = _amount(entry, "lendingLimit", resource)
            lendable += lent if lent is not None else (_amount(entry, "nominalQuota", resource) or Decimal(0))
    limit = _amount(own, "borrowingLimit", resource)
    return nominal + (min(lendable, limit) if limit is not None else lendable)


def _fmt(resource: str, amount: Decimal) -> str:
    if resource == "memory":  # whole MiB: 132G is 125885.0098 MiB, shown as 125886Mi
        return f"{amount.to_integral_value(rounding=ROUND_CEILING).normalize():f}Mi"
    return f"{amount.normalize():f}"


@dataclass(frozen=True)
class PodSetCheck:
    """What happens to one pod set: the flavor Kueue gives it, where its pods can run, and why not."""

    name: str
    pods: int
    requests: Mapping[str, Decimal]
    flavor: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    pools: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "pods": self.pods,
                "requests": {k: _fmt(k, v) for k, v in self.requests.items()}, "flavor": self.flavor,
                "nodeSelector": dict(self.node_selector), "tolerations": [dict(t) for t in self.tolerations],
                "nodePools": list(self.pools), "problems": list(self.problems)}


@dataclass(frozen=True)
class ScheduleCheck:
    workload: str
    namespace: str
    queue: str
    cluster_queue: str | None
    pod_sets: tuple[PodSetCheck, ...]
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems and not any(p.problems for p in self.pod_sets)

    def all_problems(self) -> list[str]:
        return [*self.problems, *(f"{p.name}: {problem}" for p in self.pod_sets for problem in p.problems)]

    def to_json(self) -> dict[str, Any]:
        return {"workload": self.workload, "namespace": self.namespace, "queue": self.queue,
                "clusterQueue": self.cluster_queue, "admissible": self.ok, "problems": list(self.problems),
                "podSets": [p.to_json() for p in self.pod_sets]}


def _assign_flavor(facts: StackFacts, queue: str, pod_set: PodSet,
                   used: dict[tuple[str, str], Decimal]) -> tuple[str | None, list[str]]:
    """Kueue's first-fit over the ClusterQueue's flavors for the resource group covering the pod set's requests
    (a pod set needing two groups is judged per group; tpuplane's queues have one)."""
    requested = [r for r in pod_set.requests]
    covered = {r for resources, _ in _entries(facts.cluster_queues[queue]) for r in resources}
    missing = [r for r in requested if r not in covered]
    if missing:
        return None, [f"requests {', '.join(missing)}, which ClusterQueue {queue} does not cover "
                      f"(it covers {', '.join(sorted(covered))}): Kueue leaves the workload inadmissible"]
    chosen: str | None = None
    reasons: list[str] = []
    for resources, flavors in _entries(facts.cluster_queues[queue]):
        wanted = [r for r in requested if r in resources]
        if not wanted:
            continue
        for flavor_quota in flavors:
            name = flavor_quota["name"]
            flavor = facts.flavors.get(name, {"spec": {}})
            spec = flavor.get("spec") or {}
            labels = spec.get("nodeLabels") or {}
            if not selects(pod_set.template, labels, keys=labels):
                reasons.append(f"flavor {name}: node selector/affinity disagrees with its labels")
                continue
            taints = untolerated(spec.get("nodeTaints") or [],
                                 [*(pod_set.template.get("tolerations") or []), *(spec.get("tolerations") or [])])
            if taints:
                reasons.append(f"flavor {name}: taint {taints[0]} not tolerated")
                continue
            short = []
            for resource in wanted:
                need = pod_set.requests[resource] * pod_set.count + used.get((name, resource), Decimal(0))
                most = reach(facts, queue, name, resource)
                if need > most:
                    short.append(f"{resource} {_fmt(resource, need)} > {_fmt(resource, most)}")
            if short:
                reasons.append(f"flavor {name}: quota too small even with the cohort ({'; '.join(short)})")
                continue
            for resource in wanted:
                used[(name, resource)] = used.get((name, resource), Decimal(0)) + pod_set.requests[resource] * pod_set.count
            chosen = name
            break
        else:
            return None, ["no flavor fits: " + "; ".join(reasons)]
    return chosen, []


def _pool_problem(pool: NodePoolFacts, pod: Mapping[str, Any], pod_set: PodSet, selector: Mapping[str, str],
                  tolerations: list[Mapping[str, Any]]) -> str | None:
    if not selects({**pod, "nodeSelector": selector}, pool.labels):
        return _LABELS_DISAGREE
    taints = untolerated(pool.taints, tolerations)
    if taints:
        return f"taint {taints[0]} not tolerated"
    tpu = pod_set.requests.get(TPU_RESOURCE, Decimal(0))
    if tpu and tpu != pool.tpu_chips:
        return (f"asks for {_fmt(TPU_RESOURCE, tpu)} TPU chips per pod, its VMs have {pool.tpu_chips}"
                if pool.tpu_chips else "has no TPUs")
    for resource, allocatable in (("cpu", pool.cpu), ("memory", pool.memory_mib)):
        need = pod_set.requests.get(resource)
        if need and allocatable is not None and need > allocatable:
            return f"asks for {_fmt(resource, need)} {resource} per pod, its VMs give pods {_fmt(resource, allocatable)}"
    if tpu and pool.nodes and pod_set.per_job > pool.nodes:
        return f"one Job has {pod_set.per_job} pods, a slice has {pool.nodes} VMs"
    return None


def _names(pools: Iterable[NodePoolFacts]) -> str:
    names = [pool.name for pool in pools]
    return ", ".join(names[:4]) + (f" (+{len(names) - 4} more)" if len(names) > 4 else "")


def _selector_mismatch(selector: Mapping[str, str], flavor_labels: Mapping[str, str],
                       all_pools: Iterable[NodePoolFacts]) -> str:
    """Why no pool of the flavor's shape (the pools carrying its labels) matches: each selected label they disagree
    on, with the value the pod wants, what they carry and how to make the two agree."""
    pools = [pool for pool in all_pools if all(pool.labels.get(k) == v for k, v in flavor_labels.items())]
    if not pools:
        return "no pool carries the labels of its flavor"
    reasons = []
    for key, wanted in sorted(selector.items()):
        carried = {pool.labels.get(key) for pool in pools}
        if carried == {wanted}:
            continue
        values = " or ".join(f"{key}={v}" if v is not None else f"no {key} label"
                             for v in sorted(carried, key=lambda v: (v is not None, v or "")))
        if key == PLACEMENT_POLICY_LABEL and carried != {None}:
            fix = ("GKE labels the nodes of a workload-policy pool with the policy's name, and tpuplane names a pool "
                   "group's policy <cluster>-<group>-wp (xpk selects the policy it creates, "
                   f"<type>-<topology>-placement-policy): select {values} instead, as "
                   "`tpuplane workload render --stack` does")
        else:
            fix = f"select a value those pools carry, or add a pool whose nodes carry {key}={wanted}"
        reasons.append(f"it selects {key}={wanted}, and pools {_names(pools)} of its flavor carry {values}: {fix}")
    return "; ".join(reasons) or f"its required node affinity matches none of pools {_names(pools)} of its flavor"


def claim_problems(pod: Mapping[str, Any], namespace: str, facts: StackFacts) -> list[str]:
    """The claims a pod mounts that its namespace does not have: each storage of the stack is a claim in the
    namespaces of the teams it names, and no other claim exists on the stack's cluster (on a live cluster: its
    PersistentVolumeClaims; none judged when they could not be read)."""
    problems: list[str] = []
    if facts.claims is None:
        return problems
    for volume in pod.get("volumes") or ():
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName") if isinstance(volume, Mapping) else None
        if claim is None:
            continue
        namespaces = facts.claims.get(claim)
        if namespaces is None:
            here = sorted(name for name, where in facts.claims.items() if namespace in where)
            problems.append(f"mounts claim {claim}, which does not exist (the claims for namespace {namespace}: "
                            f"{', '.join(here) or 'none'}): the pods would wait for it forever")
        elif namespace not in namespaces:
            problems.append(f"mounts storage {claim}, which is for namespaces {', '.join(namespaces)}, not "
                            f"{namespace}: add the team to the storage's teams, or run in one of those namespaces")
    return problems


def _multislice_problem(pod_set: PodSet, pools: list[NodePoolFacts]) -> str | None:
    """Several slices (child Jobs) of a TPU type whose slices are one VM each: GKE runs no Multislice there."""
    if pod_set.jobs > 1 and pod_set.requests.get(TPU_RESOURCE) and pools and all(p.nodes == 1 for p in pools):
        return (f"{pod_set.jobs} slices (replicas) of a single-host TPU type (pools {_names(pools)} have one VM per "
                f"slice): {GKE_MULTISLICE_RULE}; run one slice per JobSet, or use a multi-host type")
    return None


def check_workload(manifest: Mapping[str, Any], facts: StackFacts) -> ScheduleCheck:
    """Simulate Kueue admission and node placement of one JobSet or Job on the stack, as the API server would
    store it (`admission.admitted`: webhook defaults applied, then validated; bad input raises ConfigError)."""
    manifest = admitted(manifest, facts.local_queues)
    meta = manifest["metadata"]
    name, namespace = meta["name"], meta["namespace"]
    queue = str(meta["labels"].get(QUEUE_LABEL, ""))
    sets = pod_sets(manifest)
    if not queue:
        return ScheduleCheck(name, namespace, queue, None, (), (
            f"no {QUEUE_LABEL} label: Kueue leaves the workload alone, and no quota or flavor applies",))
    cluster_queue = facts.local_queues.get((namespace, queue))
    if cluster_queue is None:
        known = ", ".join(f"{ns}/{q}" for ns, q in sorted(facts.local_queues)) or "none"
        return ScheduleCheck(name, namespace, queue, None, (), (
            f"no LocalQueue {queue} in namespace {namespace}; the stack has {known}",))
    priority = meta["labels"].get(PRIORITY_LABEL)
    if priority is not None and facts.priority_classes is not None and priority not in facts.priority_classes:
        known = ", ".join(sorted(facts.priority_classes)) or "none"
        return ScheduleCheck(name, namespace, queue, cluster_queue, (), (
            f"its {PRIORITY_LABEL} label names WorkloadPriorityClass {priority}, which does not exist (there are: "
            f"{known}): Kueue makes no Workload for it, so it never runs",))
    exclusive = EXCLUSIVE_TOPOLOGY_ANNOTATION in (meta.get("annotations") or {})
    used: dict[tuple[str, str], Decimal] = {}
    checks = []
    for pod_set in sets:
        flavor, problems = _assign_flavor(facts, cluster_queue, pod_set, used)
        problems += claim_problems(pod_set.template, namespace, facts)
        spec = (facts.flavors.get(flavor, {}).get("spec") or {}) if flavor else {}
        flavor_labels = spec.get("nodeLabels") or {}
        selector = {**(pod_set.template.get("nodeSelector") or {}), **flavor_labels}
        tolerations = [*(pod_set.template.get("tolerations") or []), *(spec.get("tolerations") or [])]
        pools: tuple[str, ...] = ()
        if flavor:
            fits = {pool.name: _pool_problem(pool, pod_set.template, pod_set, selector, tolerations)
                    for pool in facts.pools}
            pools = tuple(n for n, problem in fits.items() if problem is None)
            if not pools:
                why = "; ".join(f"{n}: {p}" for n, p in fits.items() if p and p != _LABELS_DISAGREE)
                problems.append("no node pool can run its pods" + (
                    f" ({why})" if why else f": {_selector_mismatch(selector, flavor_labels, facts.pools)}"))
            elif (multislice := _multislice_problem(pod_set, [p for p in facts.pools if p.name in pools])):
                problems.append(multislice)
            elif pod_set.requests.get(TPU_RESOURCE) and not (exclusive or pod_set.exclusive) and pod_set.jobs > 1:
                problems.append(f"several slices without the {EXCLUSIVE_TOPOLOGY_ANNOTATION} annotation: "
                                "a slice's pods may spread over several node pools")
        checks.append(PodSetCheck(pod_set.name, pod_set.count, pod_set.requests, flavor, dict(sorted(selector.items())),
                                  tuple(tolerations), pools, tuple(problems)))
    return ScheduleCheck(name, namespace, queue, cluster_queue, tuple(checks))


def schedule_problems(manifests: Iterable[Mapping[str, Any]], tpu_pools: Sequence[SlicePoolSpec],
                      platform: BatchPlatform, storage: TeamStorageSpec | None = None) -> list[Problem]:
    """The check as problems, for the renderers: a workload the stack could never run is refused up front."""
    facts = stack_facts(tpu_pools, platform, storage)
    problems = []
    for manifest in manifests:
        result = check_workload(manifest, facts)
        problems += [Problem(f"{manifest['kind']} {result.workload}", problem, "a workload the stack can run",
                             "tpuplane workload check FILE explains each step")
                     for problem in result.all_problems()]
    return problems


__all__ = ["CPU_FLAVOR", "NodePoolFacts", "PodSet", "PodSetCheck", "ScheduleCheck", "StackFacts", "check_workload",
           "claim_problems",
           "pod_requests", "pod_sets", "reach", "schedule_problems", "selects", "stack_facts", "untolerated"]
