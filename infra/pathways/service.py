"""The Shared Pathways Service: its names, images, CPU needs and the Kubernetes objects that run it.

One long-lived JobSet per service: a `pathways-head` job (the resource manager, on the CPU pool) and a
`pathways-worker` job with one Job per TPU slice (one pod per TPU VM, one node pool per slice). Clients never join
the JobSet: each client's own IFRT proxy (`tpuplane.infra.pathways.proxy`) asks the resource manager for virtual slices.

Decisions that differ from the public service, and why:
- Its own namespace and a NetworkPolicy on the resource manager port. No pod uses hostNetwork: a NetworkPolicy does
  not apply to a hostNetwork pod, and traffic from one carries the node's identity, not its namespace's, so the
  policy could neither protect the head nor admit the workers.
- Multi-host and multi-slice: one Job per slice with parallelism = VMs per slice, exclusive placement per node pool
  and the MEGASCALE_* variables from JobSet's labels. The public generator stops at single-host slices.
- A service never succeeds: no successPolicy (the default "all jobs complete" never happens, workers never exit 0).
  A worker restarts in place (restartPolicy OnFailure, large backoffLimit); a head failure recreates the whole
  JobSet, after the old pods are gone (BlockingRecreate), because workers must re-register with a fresh head.
  Head evictions (node upgrades, preemption) do not count against `maxRestarts`; crashes do, so a broken image or
  flag ends as Failed instead of thrashing TPUs forever.
- Workers wait for the head to be Ready (`dependsOn`, JobSet's successor to the deprecated startupPolicy).

Every function is pure: the same input renders byte-identical manifests.
"""

from __future__ import annotations

import copy
import hashlib
import math
from typing import Any

from tpuplane.infra.fleet.machines import Allocatable
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.naming import INT32_MAX
from tpuplane.infra.pathways.images import pull_policy
from tpuplane.infra.pathways.proxy import PROXY_RESOURCES
from tpuplane.infra.quantity import parse_quantity
from tpuplane.infra.fleet.scheduling import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    NODEPOOL_LABEL,
    SLICE_GROUP_LABEL,
    dedicated_toleration,
    tpu_node_selector,
    tpu_resources,
    tpu_tolerations,
)

# ---- images -----------------------------------------------------------------------------------------------------

SERVER_REPOSITORY = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server"


def server_image_for_jax(jax_version: str) -> str:
    """The public server image built for one JAX release; its proxy image carries the same tag."""
    return f"{SERVER_REPOSITORY}:jax-{jax_version}"


# ---- names and addresses ----------------------------------------------------------------------------------------

HEAD_JOB = "pathways-head"
WORKER_JOB = "pathways-worker"
RM_CONTAINER = "pathways-rm"
WORKER_CONTAINER = "pathways-worker"
SIDECAR_CONTAINER = "colocated-python-sidecar"

RM_PORT = 29001
RM_PORTS = (RM_PORT, 29002)  # the second port's role is undocumented; workers may use it, clients never do
WORKER_PORT = 29005
WORKER_PORTS = (WORKER_PORT, 29006, 8471, 8080)
SIDECAR_PORT = 50051

# Generations the public Pathways images serve (the service's --tpu_type choices).
PATHWAYS_GENERATIONS = ("v5e", "v5p", "v6e", "tpu7x")

# JobSet's labels and annotations on every child pod, read through the downward API.
_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
_REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
_REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
_COORDINATOR = "jobset.sigs.k8s.io/coordinator"

MANAGED_BY_LABELS = {"app.kubernetes.io/managed-by": "tpuplane", "app.kubernetes.io/name": "pathways"}


def pathways_head_host(name: str) -> str:
    """The head pod's hostname within its JobSet's subdomain; JobSet also stores it as a label value (<= 63)."""
    return f"{name}-{HEAD_JOB}-0-0.{name}"


def pathways_service_address(name: str) -> str:
    """`host:port` of the resource manager, resolvable from every namespace.

    The service lives in namespace `name` and clients in their teams' namespaces, so the short pod name
    `<host>.<subdomain>` (enough inside one namespace) is qualified with `<namespace>.svc`.
    """
    return f"{pathways_head_host(name)}.{name}.svc:{RM_PORT}"


def scratch_bucket_name(project: str, cluster: str, name: str) -> str:
    """A globally unique, stable bucket name for one service; shortened with a hash when the parts are too long."""
    full = f"{project}-{cluster}-{name}-pathways"
    if len(full) <= 63:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[:54].rstrip('-._')}-{digest}"


# ---- the CPU pool ----------------------------------------------------------------------------------------------

RM_RESOURCES = {"cpu": "8", "memory": "32G"}  # requests == limits: the head is never squeezed or evicted first


def pathways_cpu_requirements() -> Allocatable:
    """What a CPU-pool node must leave to pods to hold any one Pathways CPU pod: the head or a client's proxy.

    Pods are placed one by one (the pool autoscales), so a node's allocatable cpu and memory must hold the
    largest pod's requests. The proxy (16 vCPU, 100 GB) dominates: n2-standard-32 holds it, n2-standard-16 does not.
    """
    pods = [RM_RESOURCES, PROXY_RESOURCES]
    return Allocatable(millicores=max(math.ceil(parse_quantity(pod["cpu"]) * 1000) for pod in pods),
                       memory_mib=max(math.ceil(parse_quantity(pod["memory"]) / 2**20) for pod in pods))


# ---- the JobSet ------------------------------------------------------------------------------------------------

SERVICE_MAX_RESTARTS = 100  # crashes that recreate the JobSet before it is declared Failed (evictions are free)
WORKER_RESTARTS_PER_VM = 1_000_000  # in-place worker restarts are how the service heals; never run out
DEFAULT_SHM_DIR = "/tmp/shared-memory"  # worker <-> sidecar shared memory (RAM-backed emptyDir)
SHM_DIRECTORY_ENV = "CLOUD_PATHWAYS_SIDECAR_SHM_DIRECTORY"
SIDECAR_PROBE_PERIOD_SECONDS = 2
SIDECAR_STARTUP_SECONDS = 600  # a large user image imports slowly; the worker waits for it rather than racing it


def _from_field(name: str, kind: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.{kind}['{key}']"}}}


def _ports(numbers: tuple[int, ...]) -> list[dict[str, Any]]:
    return [{"containerPort": number, "protocol": "TCP"} for number in numbers]


def rm_args(*, instance_type: str, slices: int, gcs_scratch_location: str) -> list[str]:
    return [
        f"--server_port={RM_PORT}",
        "--node_type=resource_manager",
        f"--instance_count={slices}",
        f"--instance_type={instance_type}",
        f"--gcs_scratch_location={gcs_scratch_location}",
        # The stack owns the bucket's lifecycle rules; the RM would need storage.admin to write its own.
        "--enable_gcs_olm=false",
    ]


def worker_args(*, resource_manager: str, gcs_scratch_location: str) -> list[str]:
    return [
        f"--server_port={WORKER_PORT}",
        f"--resource_manager_address={resource_manager}",
        f"--gcs_scratch_location={gcs_scratch_location}",
    ]


def rm_container(*, image: str, spec: TpuSpec, slices: int, gcs_scratch_location: str) -> dict[str, Any]:
    """The resource manager: one per Pathways cluster, shared service or per-job head."""
    return {
        "name": RM_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy(image),
        "args": rm_args(instance_type=spec.pathways_instance_type, slices=slices,
                        gcs_scratch_location=gcs_scratch_location),
        "env": [
            _from_field("HOST_ADDRESS", "labels", _COORDINATOR),
            _from_field("JOBSET_NAME", "annotations", _JOBSET_NAME),
            _from_field("REPLICATED_JOB_NAME", "annotations", _REPLICATED_JOB_NAME),
            {"name": "TPU_SKIP_MDS_QUERY", "value": "true"},
        ],
        "ports": _ports(RM_PORTS),
        # Ready = the RM accepts connections: what the service's workers wait for (dependsOn Ready).
        "readinessProbe": {"periodSeconds": 5, "tcpSocket": {"port": RM_PORT}},
        "resources": {"limits": dict(RM_RESOURCES), "requests": dict(RM_RESOURCES)},
    }


def worker_container(*, image: str, spec: TpuSpec, resource_manager: str, gcs_scratch_location: str) -> dict[str, Any]:
    """A Pathways worker: one per TPU VM, every chip of it, registered with the resource manager at
    `resource_manager` (host:port)."""
    return {
        "name": WORKER_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy(image),
        "args": worker_args(resource_manager=resource_manager, gcs_scratch_location=gcs_scratch_location),
        "env": [
            _from_field("JOBSET_NAME", "annotations", _JOBSET_NAME),
            {"name": "MEGASCALE_GRPC_ENABLE_XOR_TRACER", "value": "false"},
            _from_field("MEGASCALE_COORDINATOR_ADDRESS", "labels", _COORDINATOR),
            _from_field("MEGASCALE_NUM_SLICES", "labels", _REPLICATED_JOB_REPLICAS),
            _from_field("MEGASCALE_SLICE_ID", "labels", _JOB_INDEX),
            _from_field("PATHWAYS_HEAD", "labels", _COORDINATOR),
            _from_field("REPLICATED_JOB_NAME", "annotations", _REPLICATED_JOB_NAME),
            {"name": "TF_CPP_MIN_LOG_LEVEL", "value": "0"},
            {"name": "TPU_MIN_LOG_LEVEL", "value": "0"},
            {"name": "XCLOUD_ENVIRONMENT", "value": "GCP"},
        ],
        "ports": _ports(WORKER_PORTS),
        "resources": tpu_resources(spec),
    }


def _head_job(name: str, *, spec: TpuSpec, slices: int, server_image: str, gcs_scratch_location: str,
              cpu_pool: str) -> dict[str, Any]:
    container = rm_container(image=server_image, spec=spec, slices=slices, gcs_scratch_location=gcs_scratch_location)
    return {
        "name": HEAD_JOB,
        "replicas": 1,
        "template": {"spec": {
            "backoffLimit": 0,
            "completionMode": "Indexed",
            "completions": 1,
            "parallelism": 1,
            # Evictions fail the Job with reason PodFailurePolicy, which the JobSet restarts without counting.
            "podFailurePolicy": {"rules": [{"action": "FailJob",
                                            "onPodConditions": [{"status": "True", "type": "DisruptionTarget"}]}]},
            "template": {"spec": {
                "automountServiceAccountToken": False,
                "containers": [container],
                "nodeSelector": {NODEPOOL_LABEL: cpu_pool},
                "restartPolicy": "Never",
            }},
        }},
    }


def _worker_job(name: str, *, spec: TpuSpec, slices: int, capacity: str, server_image: str,
                gcs_scratch_location: str, node_pools: list[str], placement_policy: str | None,
                slice_group: str | None) -> dict[str, Any]:
    container = worker_container(image=server_image, spec=spec, resource_manager=pathways_service_address(name),
                                 gcs_scratch_location=gcs_scratch_location)
    # Only this group's node pools: another group of the same TPU type (a batch pool under Kueue) is not ours.
    own_pools = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": NODEPOOL_LABEL, "operator": "In", "values": sorted(node_pools)}]}]}}}
    pod: dict[str, Any] = {"spec": {
        "affinity": own_pools,
        "automountServiceAccountToken": False,
        "containers": [container],
        "nodeSelector": tpu_node_selector(spec, capacity, placement_policy),
        "restartPolicy": "OnFailure",
        "tolerations": tpu_tolerations(capacity) + [dedicated_toleration(name)],
    }}
    if slice_group:
        pod["metadata"] = {"labels": {SLICE_GROUP_LABEL: slice_group}}
    vms = spec.vms_per_slice
    return {
        "name": WORKER_JOB,
        "replicas": slices,
        "dependsOn": [{"name": HEAD_JOB, "status": "Ready"}],
        "template": {
            # One slice per node pool, and no other slice's pods on it.
            "metadata": {"annotations": {EXCLUSIVE_TOPOLOGY_ANNOTATION: NODEPOOL_LABEL}},
            "spec": {
                "backoffLimit": min(vms * WORKER_RESTARTS_PER_VM, INT32_MAX),
                "completionMode": "Indexed",
                "completions": vms,
                "parallelism": vms,
                "template": pod,
            },
        },
    }


def render_pathways_service_jobset(
    name: str,
    *,
    spec: TpuSpec,
    slices: int,
    capacity: str,
    server_image: str,
    gcs_scratch_location: str,
    cpu_pool: str,
    node_pools: list[str],
    placement_policy: str | None = None,
    sidecar_image: str | None = None,
    shm_dir: str = DEFAULT_SHM_DIR,
    slice_group: str | None = None,
) -> dict[str, Any]:
    """The service's JobSet in namespace `name`. `node_pools` are the TPU group's pools (one per slice);
    `placement_policy` is the workload policy tpu7/tpu7x multi-host pools carry; `sidecar_image` adds the
    colocated-Python sidecar to every worker; `slice_group` (the pool group's name) labels the workers, as every
    TPU pod of the fleet is labelled for the dashboard."""
    worker = _worker_job(name, spec=spec, slices=slices, capacity=capacity, server_image=server_image,
                         gcs_scratch_location=gcs_scratch_location, node_pools=node_pools,
                         placement_policy=placement_policy, slice_group=slice_group)
    if sidecar_image is not None:
        pod = worker["template"]["spec"]["template"]
        pod["spec"] = attach_colocated_sidecar(pod["spec"], sidecar_image, shm_dir=shm_dir)
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"labels": dict(MANAGED_BY_LABELS), "name": name, "namespace": name},
        "spec": {
            "coordinator": {"jobIndex": 0, "podIndex": 0, "replicatedJob": HEAD_JOB},
            "failurePolicy": {
                "maxRestarts": SERVICE_MAX_RESTARTS,
                "restartStrategy": "BlockingRecreate",
                "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts", "name": "RestartAfterEviction",
                           "onJobFailureReasons": ["PodFailurePolicy"]}],
            },
            "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
            "replicatedJobs": [
                _head_job(name, spec=spec, slices=slices, server_image=server_image,
                          gcs_scratch_location=gcs_scratch_location, cpu_pool=cpu_pool),
                worker,
            ],
        },
    }


def attach_colocated_sidecar(pod_spec: dict[str, Any], image: str, *, shm_dir: str = DEFAULT_SHM_DIR) -> dict[str, Any]:
    """A copy of a worker pod spec with the colocated-Python sidecar attached.

    A native sidecar (an init container with restartPolicy Always) lives as long as the pod, and the kubelet starts
    the worker only once the sidecar's startupProbe passes: the worker never dials a sidecar that is not listening
    yet. Worker and sidecar exchange arrays through a RAM-backed emptyDir; the worker's flag turns that path on
    (without it, shared-memory transfer is off) and both get the directory in their environment, as pathwaysutils
    sets it.
    """
    pod = copy.deepcopy(pod_spec)
    worker = next((c for c in pod.get("containers", []) if c["name"] == WORKER_CONTAINER), None)
    if worker is None:
        raise ValueError(f"the pod spec has no '{WORKER_CONTAINER}' container to attach a sidecar to")
    volume = "sidecar-shared-memory"
    mount = {"mountPath": shm_dir, "name": volume}
    shm_env = {"name": SHM_DIRECTORY_ENV, "value": shm_dir}
    worker["args"] = [*worker.get("args", []), f"--cloud_pathways_sidecar_shm_directory={shm_dir}"]
    worker["env"] = [*worker.get("env", []), shm_env]
    worker["volumeMounts"] = [*worker.get("volumeMounts", []), mount]
    sidecar = {
        "name": SIDECAR_CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy(image),
        "env": [
            shm_env,
            {"name": "GRPC_SERVER_ADDRESS", "value": f"0.0.0.0:{SIDECAR_PORT}"},
            {"name": "PYTHONUNBUFFERED", "value": "1"},
        ],
        "ports": _ports((SIDECAR_PORT,)),
        "restartPolicy": "Always",
        # Up to SIDECAR_STARTUP_SECONDS for the interpreter and the user's imports before the kubelet restarts it.
        "startupProbe": {"failureThreshold": SIDECAR_STARTUP_SECONDS // SIDECAR_PROBE_PERIOD_SECONDS,
                         "periodSeconds": SIDECAR_PROBE_PERIOD_SECONDS, "tcpSocket": {"port": SIDECAR_PORT}},
        "volumeMounts": [mount],
    }
    pod["initContainers"] = [*pod.get("initContainers", []), sidecar]
    pod["volumes"] = [*pod.get("volumes", []), {"emptyDir": {"medium": "Memory"}, "name": volume}]
    return pod


# ---- namespace and network policy -------------------------------------------------------------------------------


def render_pathways_namespace(name: str) -> dict[str, Any]:
    """The service's own namespace. Baseline pod security: nothing here needs hostNetwork, hostPath or privilege."""
    labels = {**MANAGED_BY_LABELS, "pod-security.kubernetes.io/enforce": "baseline"}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"labels": dict(sorted(labels.items())),
                                                                    "name": name}}


def render_pathways_network_policy(name: str, client_namespaces: list[str]) -> dict[str, Any]:
    """Who reaches the resource manager: the service's own pods on any port, client namespaces on 29001 only.

    Only the head is selected: clients' proxies also talk to workers, which stay open inside the cluster.
    """
    ingress: list[dict[str, Any]] = [{"from": [{"podSelector": {}}]}]
    clients = sorted(set(client_namespaces) - {name})
    if clients:
        ingress.append({
            "from": [{"namespaceSelector": {"matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": clients}]}}],
            "ports": [{"port": RM_PORT, "protocol": "TCP"}],
        })
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"labels": dict(MANAGED_BY_LABELS), "name": f"{name}-resource-manager", "namespace": name},
        "spec": {
            "ingress": ingress,
            "podSelector": {"matchLabels": {_JOBSET_NAME: name, _REPLICATED_JOB_NAME: HEAD_JOB}},
            "policyTypes": ["Ingress"],
        },
    }
