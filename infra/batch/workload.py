"""TPU workloads as JobSets (what `xpk workload create` submits), rendered by a pure function.

A workload is one JobSet; each of its jobs is one replicated Job with one child Job per slice
(`replicas` = slices, `parallelism` = `completions` = VMs per slice, one pod per VM asking for all its chips).
Several jobs in one workload form a job group: Kueue admits them together (one Workload, several pod sets).

Failure handling follows xpk: a pod that exits with a code outside the retry set fails its Job at once
(podFailurePolicy FailJob), and the JobSet then fails without restart; exit codes in the retry set
(42, 127-255 — signals, preemption, maintenance — plus the user's) fail the Job normally and JobSet restarts
the whole set, up to `maxRestarts` times.

The container's command is a small POSIX sh wrapper (`shell_command`): the shell stays PID 1 with a TERM trap,
forwards SIGTERM to the program (a program that is PID 1 itself never sees a signal it installed no handler for),
and exits with the program's code, so preemption's SIGTERM reaches JAX and a killed run exits 143 (retried).

`ttlSecondsAfterFinished` is unset unless asked for: the CLI sets xpk's 12 h for `kubectl` users, while a JobSet
a Pulumi stack owns must outlive its run (a JobSet the TTL deleted is re-created, i.e. re-run, by the next
`pulumi up` after a refresh).
"""

from __future__ import annotations

import re
from shlex import quote
from typing import Any

from pydantic import Field

from tpuplane.infra.batch.admission import QUEUE_LABEL
from tpuplane.infra.fleet.capacity import CAPACITY_MODES
from tpuplane.infra.fleet.catalog import TpuSpec, UnknownTpuType, resolve_tpu_type
from tpuplane.infra.fleet.pools import Capacity
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.batch.kueue import (
    DEFAULT_LOCAL_QUEUE,
    DEFAULT_NAMESPACE,
    cluster_queue_quotas,
    local_queues,
    pool_flavor_name,
    serving_pools,
    tpu_flavors,
)
from tpuplane.infra.batch.kueue_config import DEFAULT_PRIORITY, priority_problem
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.naming import DNS_LABEL, INT32_MAX, K8S_LABEL_VALUE_MAX, POD_NAME_SUFFIX, workload_policy_name
from tpuplane.infra.fleet.scheduling import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GKE_MULTISLICE_RULE,
    NODEPOOL_LABEL,
    PLACEMENT_POLICY_LABEL,
    SLICE_GROUP_LABEL,
    tpu_node_selector,
    tpu_resources,
    tpu_tolerations,
)
from tpuplane.infra.args import Source
from tpuplane.infra.fleet.cluster import CPU_POOL_NAME
from tpuplane.infra.pathways.job import (
    WORKER_JOB,
    PathwaysJobOptions,
    PathwaysJobSpec,
    UserContainer,
    pathways_options_problems,
    render_pathways_jobset,
)
from tpuplane.infra.pathways.proxy import parse_gcs_location
from tpuplane.infra.pathways.service import HEAD_JOB, PATHWAYS_GENERATIONS
from tpuplane.infra.storage.args import TeamStorageSpec
from tpuplane.infra.storage.identity import WORKLOAD_SERVICE_ACCOUNT
from tpuplane.infra.storage.volumes import (
    Mount,
    PodMounts,
    mount_path,
    mount_problems,
    pod_mounts,
    with_pod_mounts,
)

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
WORKLOAD_LABEL = "tpuplane.dev/workload"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
CONTAINER = "jax-tpu"  # xpk's container name: log queries written for xpk keep working
DEFAULT_JOB = "slice"
MOUNTS = "mounts"  # the field of the workload (and experiment file) that lists its mounts
# JAX's own Cloud TPU coordinator port (`jax._src.clusters.cloud_tpu_cluster.coordinator_port`): a program that
# calls `jax.distributed.initialize()` with no arguments reads JAX_COORDINATOR_ADDRESS, which carries it.
JAX_COORDINATOR_PORT = 8482
# The TPU runtime's metrics port. GKE reports a container's `kubernetes.io/container/accelerator/duty_cycle` and
# `memory_used` (what the fleet dashboard's TPU tiles chart) only for TPU containers that expose it: GKE's own TPU
# manifests declare `containerPort: 8431 # Port to export TPU runtime metrics, if supported.`
# (https://cloud.google.com/kubernetes-engine/docs/concepts/node-auto-provisioning,
# https://cloud.google.com/kubernetes-engine/docs/how-to/tpus), and Google's GKE TPU monitoring guide lists
# "containerPort: 8431 exposed on the TPU container" as a prerequisite of these metrics
# (https://github.com/GoogleCloudPlatform/gke-mcp, skill gke-tpu-metrics-monitoring). With `hostNetwork` it is
# also a host port: one TPU pod per VM (it asks for every chip), so pods never contend for it.
TPU_METRICS_PORT = 8431
DEFAULT_TTL = 43200  # xpk: finished JobSets stay 12 h for inspection (CLI renders only)
# Kueue copies `provreq.kueue.x-k8s.io/*` annotations into the ProvisioningRequest of a queued (DWS) workload.
MAX_RUN_DURATION_ANNOTATION = "provreq.kueue.x-k8s.io/maxRunDurationSeconds"
# xpk's retry set: 42 (user "please retry"), 127-255 (killed by a signal: preemption, maintenance, OOM).
RETRY_EXIT_CODES = (42, *range(127, 256))
KUEUE_WORKLOAD_PREFIX = "jobset-"  # Kueue names a JobSet's Workload jobset-<name>-<5 hex>
KUEUE_WORKLOAD_SUFFIX = 6
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
# Kubernetes label syntax: an optional DNS-subdomain prefix and '/', then a name of at most 63 characters.
_LABEL_NAME = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
_LABEL_PREFIX = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_PREFIX_MAX = 253
# Label prefixes whose keys the controllers and tpuplane set: a user label there would steer them.
RESERVED_LABEL_PREFIXES = ("kueue.x-k8s.io/", "jobset.sigs.k8s.io/", "tpuplane.dev/")
# Set by `multislice_env`; a user's env must not shadow them.
RESERVED_ENV = frozenset({"JOBSET_NAME", "REPLICATED_JOB_NAME", "JOB_INDEX", "JAX_COORDINATOR_PORT",
                          "JAX_COORDINATOR_ADDRESS", "JAX_PROCESS_COUNT", "MEGASCALE_COORDINATOR_ADDRESS",
                          "MEGASCALE_NUM_SLICES", "MEGASCALE_SLICE_ID"})


class TpuJob(ConfigModel):
    """One replicated job: a program on `slices` slices of one TPU type.

    `env` is the user's; tpuplane adds what JAX and libtpu need across slices (`multislice_env`), and
    JAX_PROCESS_COUNT (slices x VMs per slice) for the program's own use: JAX itself does not read it."""

    unicode_fields = frozenset({"command"})  # a shell script: any text, newlines included

    name: str = DEFAULT_JOB
    tpu_type: str
    machine_type: str | None = None
    slices: int = Field(1, ge=1)
    capacity: str = "on-demand"
    # Required, but for the workers of a headless Pathways job. A blank image or command never starts.
    image: str | None = Field(None, pattern=r"^\S+$")
    command: str | None = Field(None, pattern=r"\S")
    args: list[str] = []  # appended to the command, shell-quoted (experiments put trial parameters here)
    env: dict[str, str] = {}

    @property
    def spec(self) -> TpuSpec:
        return resolve_tpu_type(self.tpu_type, machine_type=self.machine_type)


class TpuWorkloadSpec(ConfigModel):
    """A JobSet of one job, or of several gang-scheduled together (a job group)."""

    name: str
    jobs: list[TpuJob] = Field(min_length=1)
    namespace: str | None = None  # default: the queue's namespace
    queue: str | None = None  # default: the stack's only LocalQueue (xpk's multislice-queue)
    priority: str | None = None  # default: the team's priority, else medium
    max_restarts: int = Field(0, ge=0, le=INT32_MAX)  # JobSet's failurePolicy.maxRestarts is an int32
    restart_on_exit_codes: list[int] = []
    ttl_seconds_after_finished: int | None = Field(None, ge=0, le=INT32_MAX)  # None: stays until deleted
    termination_grace_period_seconds: int = Field(30, ge=0)
    service_account: str | None = None  # default: the team's (`tpuplane-workload`) on a stack, else `default`
    labels: dict[str, str] = {}  # extra labels on the JobSet and its pods
    mounts: list[str] = []  # NAME:/path[:ro], storage of the stack mounted in every TPU container
    pathways: PathwaysJobOptions | None = None  # a per-job Pathways cluster; its one job is the TPU workers


# --------------------------------------------------------------------------------------------------------------
# Names: the JobSet name ends up inside longer names that Kubernetes limits to 63 characters.


def pod_hostname(name: str, job: str, job_index: int, pod_index: int) -> str:
    """JobSet's pod hostname (and DNS name under the JobSet's subdomain)."""
    return f"{name}-{job}-{job_index}-{pod_index}"


def max_name_length(spec: TpuWorkloadSpec) -> int:
    """The longest JobSet name whose derived names all fit in a DNS label (63):
    - every pod name `<name>-<job>-<lastSlice>-<lastVm>-<5 random>`, which JobSet's webhook checks (the child
      Job name and the pod hostname are its prefixes);
    - Kueue's Workload name `jobset-<name>-<hash>`, kept a label value so it can be selected on.
    """
    limit = K8S_LABEL_VALUE_MAX - len(KUEUE_WORKLOAD_PREFIX) - KUEUE_WORKLOAD_SUFFIX
    for job in spec.jobs:
        try:
            vms = job.spec.vms_per_slice
        except UnknownTpuType:
            continue
        # a Pathways job's pods are its head's and its workers' (the job's slices)
        named = [(HEAD_JOB, 1, 1), (WORKER_JOB, job.slices, vms)] if spec.pathways else [(job.name, job.slices, vms)]
        for name, slices, pods in named:
            pod_name = pod_hostname("", name, slices - 1, pods - 1) + POD_NAME_SUFFIX
            limit = min(limit, K8S_LABEL_VALUE_MAX - len(pod_name))
    return limit


# --------------------------------------------------------------------------------------------------------------
# Checks: pure, shared by the CLI and the TpuWorkload/TpuExperiment components.


def label_problems(path: str, labels: dict[str, str]) -> list[Problem]:
    """Kubernetes' label syntax, and no key under a prefix the controllers or tpuplane own."""
    problems = []
    for key, value in labels.items():
        prefix, slash, name = key.rpartition("/")
        if (not name or len(name) > K8S_LABEL_VALUE_MAX or not _LABEL_NAME.fullmatch(name)
                or (slash and (not prefix or len(prefix) > LABEL_PREFIX_MAX or not _LABEL_PREFIX.fullmatch(prefix)))):
            problems.append(Problem(path, key, "a label key: [prefix/]name, name of at most 63 letters, digits, "
                                    "'-', '_', '.' (alphanumeric at both ends), prefix a lowercase DNS subdomain"))
        elif any(key.startswith(p) for p in RESERVED_LABEL_PREFIXES):
            problems.append(Problem(path, key, f"a key outside {', '.join(RESERVED_LABEL_PREFIXES)}",
                                    "Kueue, JobSet and tpuplane set labels there and act on them"))
        if len(value) > K8S_LABEL_VALUE_MAX or not _LABEL_NAME.fullmatch(value):
            problems.append(Problem(f"{path}.{key}", value, "a label value: at most 63 letters, digits, '-', '_', "
                                    "'.', alphanumeric at both ends (or empty)"))
    return problems


def _provisioned(capacity: str) -> bool:
    """Admitted through a ProvisioningRequest (queued): one such job per workload, its run bounded."""
    mode = CAPACITY_MODES.get(capacity)
    return mode is not None and mode.provisioning_request


def _pool_summary(platform: BatchPlatform) -> str:
    pools = [f"{p.name} ({p.tpu_type} x{p.queued_slices} for Kueue, {p.capacity.value})" for p in platform.pools]
    return ", ".join(pools) or "no TPU pools"


def _job_problems(path: str, job: TpuJob, platform: BatchPlatform | None, *, program: bool = True) -> list[Problem]:
    """A job's rules; `program`: it runs the user's program (all but the workers of a headless Pathways job)."""
    problems = [Problem(f"{path}.{key}", None, what, "this field is required")
                for key, value, what in (("image", job.image, "a container image"),
                                         ("command", job.command, "a command line"))
                if program and value is None]
    if not DNS_LABEL.fullmatch(job.name):
        problems.append(Problem(f"{path}.name", job.name, "lowercase letters, digits and '-', starting with a letter"))
    if job.capacity not in {c.value for c in Capacity}:
        problems.append(Problem(f"{path}.capacity", job.capacity, f"one of {', '.join(c.value for c in Capacity)}"))
    for key in job.env:
        if not _ENV_NAME.fullmatch(key):
            problems.append(Problem(f"{path}.env", key, "a name of letters, digits, '_', '.', '-'"))
        elif key in RESERVED_ENV:
            problems.append(Problem(f"{path}.env", key, f"a name other than {', '.join(sorted(RESERVED_ENV))}",
                                    "tpuplane sets these for multi-slice JAX"))
    try:
        spec = job.spec
    except UnknownTpuType as exc:
        return problems + [Problem(f"{path}.tpuType", job.tpu_type, str(exc), "see `tpuplane catalog`")]
    if job.slices > 1 and spec.single_host:
        problems.append(Problem(f"{path}.slices", job.slices,
                                f"1: {job.tpu_type} on {spec.machine_type} is a single-host type (one VM per slice)",
                                f"{GKE_MULTISLICE_RULE}; run one workload per slice, or pick a multi-host type"))
    if platform is not None and not serving_pools(platform, spec, job.capacity):
        problems.append(Problem(f"{path}.tpuType", f"{job.tpu_type} on {spec.machine_type} ({job.capacity})",
                                f"a TPU type, host and capacity a pool provides to Kueue: {_pool_summary(platform)}",
                                "add a pool to the stack, or pick one of these"))
    return problems


def _group_problems(spec: TpuWorkloadSpec, platform: BatchPlatform, team_queue: str | None) -> list[Problem]:
    """A job group is admitted whole or not at all: its slices of each flavor must fit the flavor's Kueue
    capacity, and the queue's own plus borrowable slices, or the gang waits forever."""
    by_flavor: dict[str, list[int]] = {}
    for i, job in enumerate(spec.jobs):
        pools = serving_pools(platform, job.spec, job.capacity)
        if pools:
            by_flavor.setdefault(pool_flavor_name(platform, pools[0]), []).append(i)
    flavors = {f.name: f for f in tpu_flavors(platform)}
    quota = next((q for q in cluster_queue_quotas(platform) if q.team is not None and q.name == team_queue), None)
    problems = []
    for name, members in by_flavor.items():
        flavor = flavors[name]
        wanted = sum(spec.jobs[i].slices for i in members)
        limit, why = flavor.slices, f"the Kueue slices of pools {', '.join(flavor.pools)}"
        if quota is not None and quota.reach(flavor) < limit:
            limit, why = quota.reach(flavor), f"what queue {team_queue} owns or may borrow of flavor {name}"
        if wanted <= limit:
            continue
        last = members[-1]
        others = wanted - spec.jobs[last].slices
        group = f"; jobs {', '.join(spec.jobs[i].name for i in members)} share it" if len(members) > 1 else ""
        problems.append(Problem(f"jobs[{last}].slices", spec.jobs[last].slices,
                                f"at most {max(limit - others, 0)} ({why}: {limit} slice(s){group})",
                                "a workload is admitted whole: each slice takes a whole node pool"))
    return problems


def _queued_problems(spec: TpuWorkloadSpec) -> list[Problem]:
    """GKE's ProvisioningRequest takes one PodSet: a job group may hold one queued (DWS) member at most."""
    queued = [i for i, job in enumerate(spec.jobs) if _provisioned(job.capacity)]
    return [Problem(f"jobs[{i}].capacity", "queued", "one queued (DWS) job per workload",
                    f"job {spec.jobs[queued[0]].name} is queued already; GKE's ProvisioningRequest "
                    "provisions one PodSet, so split the group or use another capacity")
            for i in queued[1:]]


PATHWAYS_SOURCE = Source.config("pathways", PathwaysJobOptions)


def _pathways_problems(spec: TpuWorkloadSpec, platform: BatchPlatform | None) -> list[Problem]:
    """A per-job Pathways workload: its options, one job of a Pathways TPU (the workers), and the program beside
    the head unless headless."""
    options = spec.pathways
    if options is None:
        return []
    problems = pathways_options_problems(options, PATHWAYS_SOURCE)
    if len(spec.jobs) != 1:
        return problems + [Problem("jobs", [job.name for job in spec.jobs], "one job: the Pathways workers",
                                   "a Pathways job runs its program on the head, and its one job's slices as workers")]
    job = spec.jobs[0]
    if options.headless:
        problems += [Problem(f"jobs[0].{key}", value, f"no {key} with pathways.headless",
                             "a headless Pathways cluster runs no program of yours: its clients connect to the proxy")
                     for key, value in (("image", job.image), ("command", job.command), ("args", job.args),
                                        ("env", job.env)) if value]
    if spec.restart_on_exit_codes:
        problems.append(Problem("restartOnExitCodes", spec.restart_on_exit_codes, "none with pathways",
                                "a Pathways job restarts as a whole, up to maxRestarts"))
    if CAPACITY_MODES.get(job.capacity) and CAPACITY_MODES[job.capacity].provisioning_request:
        problems.append(Problem("jobs[0].capacity", job.capacity, "on-demand, spot, flex-start or reservation",
                                "a queued (DWS) request provisions one pod set; a Pathways job has two (head, workers)"))
    try:
        generation = job.spec.generation
    except UnknownTpuType:
        return problems  # reported with the job
    if generation not in PATHWAYS_GENERATIONS:
        problems.append(Problem("jobs[0].tpuType", job.tpu_type, f"a TPU of {', '.join(PATHWAYS_GENERATIONS)}",
                                "the generations Pathways serves"))
    elif len(placement_policies(platform, job)) > 1:
        problems.append(Problem("jobs[0].tpuType", job.tpu_type, "a TPU type one pool group serves",
                                "Pathways workers select one workload policy; several groups of this shape have one "
                                "each"))
    return problems


def _queue_problems(spec: TpuWorkloadSpec, platform: BatchPlatform) -> list[Problem]:
    queues = local_queues(platform)
    wanted = (spec.namespace or DEFAULT_NAMESPACE, spec.queue or DEFAULT_LOCAL_QUEUE)
    if wanted in queues.values():
        return []
    listed = ", ".join(f"{q} in namespace {ns}" for ns, q in sorted(queues.values()))
    return [Problem("queue", f"{wanted[1]} in namespace {wanted[0]}", f"a LocalQueue of the stack: {listed}",
                    "use --queue and --namespace of your team")]


def _team_queue(spec: TpuWorkloadSpec, platform: BatchPlatform) -> str | None:
    """The team ClusterQueue behind the workload's LocalQueue, if it names a team's."""
    wanted = (spec.namespace or DEFAULT_NAMESPACE, spec.queue or DEFAULT_LOCAL_QUEUE)
    return next((t.name for t in platform.teams if (t.team_namespace, t.name) == wanted), None)


def parsed_mounts(spec: TpuWorkloadSpec, mounts_at: str = MOUNTS) -> tuple[list[Mount], list[Problem]]:
    """The workload's `mounts`, each `NAME:/path[:ro]`; the malformed ones as problems at `mounts_at`."""
    mounts, problems = [], []
    for i, text in enumerate(spec.mounts):
        try:
            mounts.append(Mount.parse(text, path=mount_path(mounts_at, i)))
        except ConfigError as exc:
            problems += exc.problems
    return mounts, problems


def mounting_pods(spec: TpuWorkloadSpec) -> int:
    """Pods that mount the workload's storage: one per VM of every slice of every job, and the head of a per-job
    Pathways cluster when the program runs beside it (on a CPU node of its own)."""
    total = 1 if spec.pathways is not None and not spec.pathways.headless else 0
    for job in spec.jobs:
        try:
            total += job.slices * job.spec.vms_per_slice
        except UnknownTpuType:
            continue
    return total


def _checked_mounts(spec: TpuWorkloadSpec, storage: TeamStorageSpec | None, mounts_at: str
                    ) -> tuple[PodMounts | None, list[Problem]]:
    """What the workload's pods get for its mounts (None without any), and the rules its mounts break."""
    if not spec.mounts:
        return None, []
    if storage is None:
        return None, [Problem(mounts_at, list(spec.mounts), "mounts of a stack's storage, checked against it",
                              "render against the stack (--stack or --config), whose tpuplane:storage declares "
                              "them")]
    mounts, problems = parsed_mounts(spec, mounts_at)
    if problems:
        return None, problems
    problems = mount_problems(mounts, storage.storages, namespace=spec.namespace or DEFAULT_NAMESPACE,
                              pods=mounting_pods(spec), path=mounts_at)
    return (None if problems else pod_mounts(mounts, storage.storages)), problems


def workload_problems(spec: TpuWorkloadSpec, platform: BatchPlatform | None = None,
                      storage: TeamStorageSpec | None = None, *, mounts_at: str = MOUNTS) -> list[Problem]:
    """Every rule a workload must pass; with `platform`, also against the stack's pools and queues, and with
    `storage` its mounts against the stack's storage. `mounts_at` names where the mounts were given (the
    command line's `--mount`)."""
    return _checked(spec, platform, storage, mounts_at)[1]


def _checked(spec: TpuWorkloadSpec, platform: BatchPlatform | None, storage: TeamStorageSpec | None,
             mounts_at: str) -> tuple[PodMounts | None, list[Problem]]:
    """`workload_problems`, with what the pods get for the workload's mounts once they pass (parsed once)."""
    mounts, mount_rules = _checked_mounts(spec, storage, mounts_at)
    problems = label_problems("labels", spec.labels) + mount_rules
    limit = max_name_length(spec)
    if not DNS_LABEL.fullmatch(spec.name):
        problems.append(Problem("name", spec.name, "lowercase letters, digits and '-', starting with a letter"))
    elif len(spec.name) > limit:
        problems.append(Problem("name", spec.name, f"at most {limit} characters for this workload",
                                "pod names <name>-<job>-<slice>-<vm>-<5 random> and Kueue's jobset-<name>-<hash> "
                                "must fit in 63 characters"))
    if spec.priority is not None and (bad := priority_problem("priority", spec.priority)):
        problems.append(bad)
    for code in spec.restart_on_exit_codes:
        if not 1 <= code <= 255:
            problems.append(Problem("restartOnExitCodes", code, "exit codes 1 to 255"))
    names = [j.name for j in spec.jobs]
    program = spec.pathways is None or not spec.pathways.headless
    for i, job in enumerate(spec.jobs):
        if job.name in names[:i]:
            problems.append(Problem(f"jobs[{i}].name", job.name, "a name no other job of the workload uses"))
        problems += _job_problems(f"jobs[{i}]", job, platform, program=program)
    problems += _queued_problems(spec) + _pathways_problems(spec, platform)
    if platform is not None:
        problems += _queue_problems(spec, platform)
        if not problems:  # capacity is meaningful once every job resolves to a pool and the queue exists
            problems += _group_problems(spec, platform, _team_queue(spec, platform))
    return mounts, problems


def resolve_workload(spec: TpuWorkloadSpec, platform: BatchPlatform | None = None,
                     storage: TeamStorageSpec | None = None, *, mounts_at: str = MOUNTS
                     ) -> tuple[TpuWorkloadSpec, PodMounts | None]:
    """Check the workload, then fill queue, namespace and priority from the stack's queues, and the service account
    from the stack's teams (each runs its jobs as `tpuplane-workload`); with what its pods get for its mounts (None
    without any). Raises ConfigError."""
    mounts, problems = _checked(spec, platform, storage, mounts_at)
    if problems:
        raise ConfigError(problems)
    namespace = spec.namespace or DEFAULT_NAMESPACE
    queue = spec.queue or DEFAULT_LOCAL_QUEUE
    priority = spec.priority
    if priority is None and platform is not None:
        team = next((t for t in platform.teams if (t.team_namespace, t.name) == (namespace, queue)), None)
        priority = team.priority if team else None
    service_account = spec.service_account
    if service_account is None and storage is not None and namespace in {
            team.team_namespace for team in storage.workload_teams}:
        service_account = WORKLOAD_SERVICE_ACCOUNT
    return spec.model_copy(update={"namespace": namespace, "queue": queue, "priority": priority or DEFAULT_PRIORITY,
                                   "service_account": service_account}), mounts


# --------------------------------------------------------------------------------------------------------------
# Rendering.


def _field_env(name: str, label: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


def multislice_env(spec: TpuSpec, slices: int) -> list[dict[str, Any]]:
    """What JAX and libtpu read to join one program across slices. Order matters: `$(VAR)` expands only names
    defined earlier. Process 0 (slice 0, VM 0) hosts both the JAX coordinator and the megascale coordinator.
    `jax.distributed.initialize()` reads JAX_COORDINATOR_ADDRESS; JAX_PROCESS_COUNT is for the program itself
    (JAX does not read it: pass it as `num_processes` if you initialize by hand)."""
    coordinator = "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
    env = [
        _field_env("JOBSET_NAME", JOBSET_NAME_LABEL),
        _field_env("REPLICATED_JOB_NAME", REPLICATED_JOB_LABEL),
        _field_env("JOB_INDEX", JOB_INDEX_LABEL),
        {"name": "JAX_COORDINATOR_PORT", "value": str(JAX_COORDINATOR_PORT)},
        {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{coordinator}:$(JAX_COORDINATOR_PORT)"},
        {"name": "JAX_PROCESS_COUNT", "value": str(slices * spec.vms_per_slice)},
    ]
    if slices > 1:  # single-slice programs must not start libtpu's DCN (megascale) runtime
        env += [
            {"name": "MEGASCALE_COORDINATOR_ADDRESS", "value": coordinator},
            {"name": "MEGASCALE_NUM_SLICES", "value": str(slices)},
            _field_env("MEGASCALE_SLICE_ID", JOB_INDEX_LABEL),
        ]
    return env




# Runs the program in a background subshell and stays PID 1: on SIGTERM it ignores TERM itself and sends it to
# its whole process group (the program and anything it started, pipelines included), then keeps waiting
# (`wait` returns early when a trapped signal arrives) and exits with the program's own code.
_SIGTERM_WRAPPER = """\
trap 'trap "" TERM; kill -TERM 0' TERM
(
trap : TERM
{line}
) &
child=$!
while :; do
  wait "$child"
  code=$?
  kill -0 "$child" 2>/dev/null || break
done
exit "$code"
"""


def shell_command(job: TpuJob) -> list[str]:
    """The user's command line inside the SIGTERM-forwarding wrapper, run by POSIX sh so pipes and `&&` work;
    args are quoted, never interpreted. The line sits on lines of its own, so a trailing comment stays harmless.

    Not `exec`: the program would become the container's PID 1, and the kernel drops a signal PID 1 has no
    handler for, so a Python program without a SIGTERM handler would ignore preemption until SIGKILL. The subshell
    running the line catches TERM (`trap :`; its programs start with the default action) so that it waits for the
    whole line: dying at once, it would let the wrapper exit, and the kernel SIGKILL the rest of the container,
    while a program of a pipeline (`python train.py | tee log`) still saves its checkpoint.
    """
    line = " ".join([job.command, *(quote(a) for a in job.args)])
    return ["/bin/sh", "-c", _SIGTERM_WRAPPER.format(line=line)]


def retry_exit_codes(extra: list[int]) -> list[int]:
    """Sorted and unique, as the Job API requires for onExitCodes values."""
    return sorted(set(RETRY_EXIT_CODES) | set(extra))


def placement_policies(platform: BatchPlatform | None, job: TpuJob) -> list[str]:
    """The workload policies of the pools a tpu7/tpu7x multi-host job may land on: its pods select them, as
    GKE requires for slices placed by a workload policy. Empty without a stack (the policy names live there)."""
    if platform is None or not job.spec.needs_workload_policy:
        return []
    pools = serving_pools(platform, job.spec, job.capacity)
    return sorted(workload_policy_name(platform.cluster_name, pool.name) for pool in pools)


def slice_group(platform: BatchPlatform | None, job: TpuJob) -> str | None:
    """The one pool group a job's pods can land on (what the fleet dashboard charts them under); None when several
    groups of its shape and capacity serve it, or without a stack."""
    pools = serving_pools(platform, job.spec, job.capacity) if platform is not None else []
    return pools[0].name if len(pools) == 1 else None


def _pod_template(workload: TpuWorkloadSpec, job: TpuJob, labels: dict[str, str],
                  policies: list[str], mounts: PodMounts | None, group: str | None) -> dict[str, Any]:
    spec = job.spec
    user_env = [{"name": k, "value": v} for k, v in sorted(job.env.items())]
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "hostNetwork": True,  # DCN traffic between slices runs on the VM's network
        "dnsPolicy": "ClusterFirstWithHostNet",
        "priorityClassName": workload.priority,
        "terminationGracePeriodSeconds": workload.termination_grace_period_seconds,
        "nodeSelector": tpu_node_selector(spec, job.capacity),
        "tolerations": tpu_tolerations(job.capacity),
        "containers": [{
            "name": CONTAINER,
            "image": job.image,
            "command": shell_command(job),
            "env": multislice_env(spec, job.slices) + user_env,
            "ports": [{"name": "tpu-metrics", "containerPort": TPU_METRICS_PORT, "protocol": "TCP"}],
            "resources": tpu_resources(spec),
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
        }],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }
    if len(policies) == 1:
        pod["nodeSelector"] = dict(sorted({**pod["nodeSelector"], PLACEMENT_POLICY_LABEL: policies[0]}.items()))
    elif policies:  # several pool groups of the shape: any of their policies
        pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": PLACEMENT_POLICY_LABEL, "operator": "In", "values": policies}]}]}}}
    if workload.service_account:
        pod["serviceAccountName"] = workload.service_account
    metadata: dict[str, Any] = {"labels": {**labels, SLICE_GROUP_LABEL: group} if group else labels}
    pod, metadata = with_pod_mounts(pod, metadata, mounts, CONTAINER)
    return {"metadata": metadata, "spec": pod}


def _replicated_job(workload: TpuWorkloadSpec, job: TpuJob, labels: dict[str, str],
                    policies: list[str], mounts: PodMounts | None, group: str | None) -> dict[str, Any]:
    vms = job.spec.vms_per_slice
    return {
        "name": job.name,
        "replicas": job.slices,
        "template": {"spec": {
            "parallelism": vms,
            "completions": vms,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "podFailurePolicy": {"rules": [{
                "action": "FailJob",
                "onExitCodes": {"containerName": CONTAINER, "operator": "NotIn",
                                "values": retry_exit_codes(workload.restart_on_exit_codes)},
            }]},
            "template": _pod_template(workload, job, labels, policies, mounts, group),
        }},
    }


def max_run_duration_seconds(workload: TpuWorkloadSpec, platform: BatchPlatform | None) -> int | None:
    """For a workload with a queued (DWS) job: the shortest `maxRunDuration` of the pools it may land on, which
    GKE's ProvisioningRequest must not exceed. None without a stack, a queued job, or a limit."""
    if platform is None:
        return None
    limits = [int(pool.max_run_duration[:-1]) for job in workload.jobs if _provisioned(job.capacity)
              for pool in serving_pools(platform, job.spec, job.capacity) if pool.max_run_duration]
    return min(limits, default=None)


def render_tpu_jobset(spec: TpuWorkloadSpec, platform: BatchPlatform | None = None, *,
                      storage: TeamStorageSpec | None = None,
                      system_labels: dict[str, str] | None = None, mounts_at: str = MOUNTS) -> dict[str, Any]:
    """The JobSet for `kubectl apply --server-side -f -` or a Pulumi CustomResource. Raises ConfigError.

    `storage` is the stack's (`TeamStorageArgs`): mounts are checked against it (errors name `mounts_at`) and the
    pods run as their team's service account. `system_labels` are tpuplane's own (an experiment's and trial's),
    added after the user's labels are checked."""
    workload, mounts = resolve_workload(spec, platform, storage, mounts_at=mounts_at)
    if workload.pathways is not None:
        return render_pathways_workload(workload, platform, mounts=mounts, system_labels=system_labels or {})
    labels = {**workload.labels, **(system_labels or {}), WORKLOAD_LABEL: workload.name}
    # one child Job per node pool, i.e. each slice of the workload owns a whole node pool
    annotations = {EXCLUSIVE_TOPOLOGY_ANNOTATION: NODEPOOL_LABEL}
    if (seconds := max_run_duration_seconds(workload, platform)) is not None:
        annotations[MAX_RUN_DURATION_ANNOTATION] = str(seconds)
    jobset_spec: dict[str, Any] = {
        "replicatedJobs": [_replicated_job(workload, job, labels, placement_policies(platform, job), mounts,
                                           slice_group(platform, job)) for job in workload.jobs],
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "successPolicy": {"operator": "All"},
        "failurePolicy": {
            "maxRestarts": workload.max_restarts,
            "rules": [{"name": "FailOnNonRetryableExit", "action": "FailJobSet",
                       "onJobFailureReasons": ["PodFailurePolicy"]}],
        },
    }
    if workload.ttl_seconds_after_finished is not None:
        jobset_spec["ttlSecondsAfterFinished"] = workload.ttl_seconds_after_finished
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "labels": {**labels, QUEUE_LABEL: workload.queue, PRIORITY_LABEL: workload.priority},
            "annotations": annotations,
        },
        "spec": jobset_spec,
    }


def render_pathways_workload(workload: TpuWorkloadSpec, platform: BatchPlatform | None, *,
                             mounts: PodMounts | None, system_labels: dict[str, str]) -> dict[str, Any]:
    """The per-job Pathways JobSet of a resolved workload (`tpuplane.infra.pathways.job`): its one job's slices as
    workers, its program (the job's image and command, in the same SIGTERM wrapper) beside the head."""
    options, job = workload.pathways, workload.jobs[0]
    assert options is not None and options.gcs_scratch is not None  # checked by workload_problems
    user = None if options.headless else UserContainer(
        image=str(job.image), command=tuple(shell_command(job)), env=tuple(sorted(job.env.items())))
    group = slice_group(platform, job)
    policies = placement_policies(platform, job)
    return render_pathways_jobset(PathwaysJobSpec(
        name=workload.name, namespace=str(workload.namespace), spec=job.spec, slices=job.slices,
        capacity=job.capacity, server_image=options.server,
        gcs_scratch_location=parse_gcs_location(options.gcs_scratch),
        cpu_pool=platform.cpu_pool_name if platform is not None else CPU_POOL_NAME, user=user,
        sidecar_image=options.sidecar_image, placement_policy=policies[0] if policies else None,
        max_restarts=workload.max_restarts, ttl_seconds_after_finished=workload.ttl_seconds_after_finished,
        priority=workload.priority,
        termination_grace_period_seconds=workload.termination_grace_period_seconds,
        service_account=workload.service_account,
        labels={**workload.labels, **system_labels, WORKLOAD_LABEL: workload.name},
        jobset_labels={QUEUE_LABEL: str(workload.queue), PRIORITY_LABEL: str(workload.priority)},
        worker_labels={SLICE_GROUP_LABEL: group} if group else {}, mounts=mounts))


def parse_env_pairs(pairs: list[str]) -> dict[str, str]:
    """`K=V` strings (CLI --env) -> mapping; a pair without '=' is a ConfigError."""
    env = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError.at("--env", pair, "KEY=VALUE")
        env[key] = value
    return env

