"""Per-job Pathways: one JobSet that brings its own resource manager and IFRT proxy, the shape
`xpk workload create-pathways` and the PathwaysJob controller (google/pathways-job v0.1.4) both render.

- `pathways-head`, one pod on the CPU pool: the resource manager (`pathways-rm`) and the proxy (`pathways-proxy`).
  With a user container (`jax-tpu`, xpk's name) they are native sidecars (init containers with `restartPolicy:
  Always`) beside it, and the user's program reaches the proxy through `JAX_BACKEND_TARGET=grpc://$(PATHWAYS_HEAD):
  29000`, with `JAX_PLATFORMS=proxy`. Headless, they are the pod's containers and clients port-forward 29000; they
  carry no container-level `restartPolicy`, which Kubernetes forbids on regular containers (xpk's headless
  template sets it; PathwaysJob does not).
- `worker`, one Job per slice, one pod per TPU VM: the Pathways server with every chip of its VM, optionally the
  colocated-Python sidecar, registered with the head at `$(PATHWAYS_HEAD):29001`.
- Both pods use the host network (DCN between slices; the head's ports are reached by pod DNS name), so the head
  takes a node of its own (`exclusive-topology: kubernetes.io/hostname`) and each slice a node pool.
- JobSet: coordinator `pathways-head` 0/0, DNS hostnames, workers start after the head (`InOrder`), the JobSet
  succeeds when the head does (with a user container; a headless cluster runs until deleted), failures recreate the
  JobSet up to `maxRestarts`.

Sources: https://github.com/AI-Hypercomputer/xpk/blob/367c838253/src/xpk/templates/pathways_workload_create.yaml.j2,
https://github.com/google/pathways-job/blob/c0cc7594c9/internal/controller/pathwaysjob_controller.go.

Differences from both, and why: tpuplane's TPU selectors, tolerations and capacity labels (the pools' own, so the
workers land on the group Kueue admitted them to); Kueue's queue and priority labels as on every tpuplane workload; the
resource manager is told `--enable_gcs_olm=false` (the team's service account holds object roles, not storage.admin);
the sidecar exchanges arrays through a RAM-backed emptyDir instead of a hostPath `/tmp` (as the shared service does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from tpuplane.infra.args import Source
from tpuplane.infra.errors import Problem, problems_of
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.fleet.scheduling import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    NODEPOOL_LABEL,
    tpu_node_selector,
    tpu_tolerations,
)
from tpuplane.infra.model import ConfigModel, Hint
from tpuplane.infra.pathways.config import ServiceSpec, plan_service, server_image_problems
from tpuplane.infra.pathways.images import pull_policy
from tpuplane.infra.pathways.proxy import (
    IMAGE_REFERENCE,
    PROXY_CONTAINER,
    PROXY_PORT,
    PROXY_RESOURCES,
    matching_proxy_image,
    parse_gcs_location,
)
from tpuplane.infra.pathways.service import (
    HEAD_JOB,
    RM_PORT,
    attach_colocated_sidecar,
    pathways_head_host,
    rm_container,
    server_image_for_jax,
    worker_container,
)
from tpuplane.infra.pathways.sidecar_image import DEFAULT_JAX_VERSION
from tpuplane.infra.storage.volumes import PodMounts, with_pod_mounts

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
WORKER_JOB = "worker"  # xpk's and PathwaysJob's name (the shared service's is pathways-worker)
USER_CONTAINER = "jax-tpu"
HOSTNAME_LABEL = "kubernetes.io/hostname"
WORKER_RESTARTS_PER_VM = 4  # xpk and PathwaysJob: a worker Job tolerates 4 pod failures per VM
PATHWAYS_HEAD = "$(PATHWAYS_HEAD)"
_COORDINATOR_LABEL = "jobset.sigs.k8s.io/coordinator"


class PathwaysJobOptions(ConfigModel):
    """A workload's `pathways`: run it as a per-job Pathways cluster, its one job the TPU workers, its program (the
    job's image and command) beside the head's resource manager and proxy, or none (`headless`)."""

    headless: bool = False
    jax_version: str | None = None
    server_image: str | None = None
    sidecar_image: str | None = None
    gcs_scratch: Annotated[str | None, Hint("the scratch location of the job's resource manager and workers; on a "
                                            "stack with tpuplane:pathways, its scratch bucket is the default")] = None

    @property
    def server(self) -> str:
        """The server image: given, or the public one of `jax_version` (default: tpuplane's JAX)."""
        return self.server_image or server_image_for_jax(self.jax_version or DEFAULT_JAX_VERSION)


def service_defaults(options: PathwaysJobOptions, service: ServiceSpec | None, job_name: str) -> PathwaysJobOptions:
    """A stack's Shared Pathways Service lends a per-job cluster what the options leave out: its server image (and
    so its proxy's) when neither image nor JAX version is given, and a folder of its scratch bucket, which the
    nodes (whose identity hostNetwork pods use) may already write."""
    if service is None:
        return options
    update: dict[str, str] = {}
    if options.server_image is None and options.jax_version is None:
        update["server_image"] = service.server_image_ref
    if options.gcs_scratch is None:
        update["gcs_scratch"] = f"{plan_service(service).gcs_scratch_location}/jobs/{job_name}"
    return options.model_copy(update=update)


def pathways_options_problems(options: PathwaysJobOptions, source: Source) -> list[Problem]:
    """The options' own rules: images (at most one of `serverImage`, `jaxVersion`), a scratch location, a sidecar
    image reference."""
    problems = server_image_problems(options.server_image, options.jax_version, source, required=False)
    scratch = source.path("gcs_scratch")
    if options.gcs_scratch is None:
        problems.append(Problem(scratch, None, "gs://<bucket>[/<folder>]", "the resource manager and the workers "
                                "keep compilation state there; a stack with tpuplane:pathways gives its own bucket"))
    else:
        problems += problems_of(lambda: parse_gcs_location(options.gcs_scratch, path=scratch))
    if options.sidecar_image is not None and not IMAGE_REFERENCE.match(options.sidecar_image):
        problems.append(Problem(source.path("sidecar_image"), options.sidecar_image, "an image reference",
                                "a colocated-Python sidecar image, e.g. from `tpuplane sidecar build`"))
    return problems


@dataclass(frozen=True)
class UserContainer:
    """The program that drives the Pathways cluster from the head pod. `command` is the exec form, ready to run."""

    image: str
    command: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    resources: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass(frozen=True)
class PathwaysJobSpec:
    """Everything one per-job Pathways JobSet depends on, checked beforehand (names, queue, images, TPU type)."""

    name: str
    namespace: str
    spec: TpuSpec
    slices: int
    capacity: str
    server_image: str
    gcs_scratch_location: str
    cpu_pool: str
    user: UserContainer | None = None  # None: headless
    sidecar_image: str | None = None
    placement_policy: str | None = None  # the workload policy of tpu7/tpu7x multi-host pools
    max_restarts: int = 0
    ttl_seconds_after_finished: int | None = None  # None: the JobSet stays until deleted
    priority: str | None = None
    termination_grace_period_seconds: int = 30
    service_account: str | None = None
    labels: dict[str, str] = field(default_factory=dict)  # on the JobSet and its pods
    jobset_labels: dict[str, str] = field(default_factory=dict)  # on the JobSet only: Kueue's queue and priority
    worker_labels: dict[str, str] = field(default_factory=dict)  # on the workers' pods only: their slice group
    mounts: PodMounts | None = None  # storage in the user container and every worker

    @property
    def proxy_image(self) -> str:
        """Built with the server image, tag for tag: client and server must speak the same protocol."""
        image = matching_proxy_image(self.server_image)
        if image is None:
            raise ValueError(f"no proxy_server image follows from {self.server_image}")
        return image


def _from_coordinator(name: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{_COORDINATOR_LABEL}']"}}}


def proxy_container(job: PathwaysJobSpec) -> dict[str, Any]:
    args = [f"--server_port={PROXY_PORT}", f"--resource_manager_address={PATHWAYS_HEAD}:{RM_PORT}",
            f"--gcs_scratch_location={job.gcs_scratch_location}"]
    if job.sidecar_image is not None:
        args.append("--sidecar_name=external")  # the workers run a colocated-Python sidecar
    return {
        "name": PROXY_CONTAINER,
        "image": job.proxy_image,
        "imagePullPolicy": pull_policy(job.proxy_image),
        "args": args,
        "env": [_from_coordinator("PATHWAYS_HEAD")],
        "ports": [{"containerPort": PROXY_PORT, "protocol": "TCP"}],
        "readinessProbe": {"periodSeconds": 5, "tcpSocket": {"port": PROXY_PORT}},
        "resources": {"limits": dict(PROXY_RESOURCES), "requests": dict(PROXY_RESOURCES)},
    }


def _user_container(user: UserContainer) -> dict[str, Any]:
    env = [
        _from_coordinator("PATHWAYS_HEAD"),
        {"name": "JAX_PLATFORMS", "value": "proxy"},
        {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
        {"name": "JAX_BACKEND_TARGET", "value": f"grpc://{PATHWAYS_HEAD}:{PROXY_PORT}"},
        *({"name": k, "value": v} for k, v in user.env),
    ]
    container = {"name": USER_CONTAINER, "image": user.image, "imagePullPolicy": pull_policy(user.image),
                 "command": list(user.command), "env": env}
    if user.resources:
        container["resources"] = user.resources
    return container


def _pod_basics(job: PathwaysJobSpec) -> dict[str, Any]:
    pod: dict[str, Any] = {"dnsPolicy": "ClusterFirstWithHostNet", "hostNetwork": True,
                           "terminationGracePeriodSeconds": job.termination_grace_period_seconds}
    if job.priority:
        pod["priorityClassName"] = job.priority
    if job.service_account:
        pod["serviceAccountName"] = job.service_account
    return pod


def _head_job(job: PathwaysJobSpec) -> dict[str, Any]:
    rm = rm_container(image=job.server_image, spec=job.spec, slices=job.slices,
                      gcs_scratch_location=job.gcs_scratch_location)
    head = [rm, proxy_container(job)]
    pod = _pod_basics(job) | {"nodeSelector": {NODEPOOL_LABEL: job.cpu_pool}, "restartPolicy": "Never"}
    if job.user is None:
        pod["containers"] = head
    else:
        pod["initContainers"] = [{**c, "restartPolicy": "Always"} for c in head]
        pod["containers"] = [_user_container(job.user)]
    pod, metadata = with_pod_mounts(pod, {"labels": dict(job.labels)}, job.mounts, USER_CONTAINER)
    exclusive = {EXCLUSIVE_TOPOLOGY_ANNOTATION: HOSTNAME_LABEL}  # host ports 29000-29002: one head per node
    return {
        "name": HEAD_JOB,
        "replicas": 1,
        "template": {
            "metadata": {"annotations": dict(exclusive)},
            "spec": {
                "backoffLimit": 0,
                "completionMode": "Indexed",
                "completions": 1,
                "parallelism": 1,
                "template": {"metadata": metadata, "spec": dict(sorted(pod.items()))},
            },
        },
    }


def _worker_job(job: PathwaysJobSpec) -> dict[str, Any]:
    vms = job.spec.vms_per_slice
    container = worker_container(image=job.server_image, spec=job.spec, resource_manager=f"{PATHWAYS_HEAD}:{RM_PORT}",
                                 gcs_scratch_location=job.gcs_scratch_location)
    pod = _pod_basics(job) | {
        "containers": [container],
        "nodeSelector": tpu_node_selector(job.spec, job.capacity, job.placement_policy),
        "restartPolicy": "OnFailure",
        "tolerations": tpu_tolerations(job.capacity),
    }
    if job.sidecar_image is not None:
        pod = attach_colocated_sidecar(pod, job.sidecar_image)
    pod, metadata = with_pod_mounts(pod, {"labels": {**job.labels, **job.worker_labels}}, job.mounts,
                                    container["name"])
    return {
        "name": WORKER_JOB,
        "replicas": job.slices,
        "template": {
            # one child Job per node pool: each slice owns a whole pool
            "metadata": {"annotations": {EXCLUSIVE_TOPOLOGY_ANNOTATION: NODEPOOL_LABEL}},
            "spec": {
                "backoffLimit": WORKER_RESTARTS_PER_VM * vms,
                "completionMode": "Indexed",
                "completions": vms,
                "parallelism": vms,
                "template": {"metadata": metadata, "spec": dict(sorted(pod.items()))},
            },
        },
    }


def render_pathways_jobset(job: PathwaysJobSpec) -> dict[str, Any]:
    """The JobSet for `kubectl apply --server-side -f -` or a Pulumi CustomResource."""
    spec: dict[str, Any] = {
        "coordinator": {"jobIndex": 0, "podIndex": 0, "replicatedJob": HEAD_JOB},
        "failurePolicy": {"maxRestarts": job.max_restarts, "restartStrategy": "Recreate"},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
        "replicatedJobs": [_head_job(job), _worker_job(job)],
        "startupPolicy": {"startupPolicyOrder": "InOrder"},
    }
    if job.user is not None:  # the job is done when the user's program is; a headless cluster serves until deleted
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": [HEAD_JOB]}
    if job.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = job.ttl_seconds_after_finished
    return {"apiVersion": JOBSET_API, "kind": "JobSet",
            "metadata": {"labels": {**job.labels, **job.jobset_labels}, "name": job.name, "namespace": job.namespace},
            "spec": spec}


def proxy_address(name: str, namespace: str) -> str:
    """Where a client reaches the proxy of the job `name` from any namespace (xpk prints the short form for
    `create-pathways`): the head pod's DNS name under the JobSet's subdomain, qualified with `<namespace>.svc`."""
    return f"grpc://{pathways_head_host(name)}.{namespace}.svc:{PROXY_PORT}"
