"""The Shared Pathways Service's manifests: the JobSet (head + workers), the sidecar attachment, the namespace and
the NetworkPolicy, with every TPU-specific value derived from the catalog and `tpuplane.infra.fleet.scheduling`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import pod_spec, printed_by_two_processes

from tpuplane.infra.fleet.catalog import TpuSpec, resolve_tpu_type
from tpuplane.infra.pathways.images import jax_version_of_tag, pull_policy
from tpuplane.infra.k8s_validation import InvalidManifest, validate_manifests
from tpuplane.infra.naming import workload_policy_name
from tpuplane.infra.pathways.service import (
    DEFAULT_SHM_DIR,
    attach_colocated_sidecar,
    pathways_head_host,
    pathways_service_address,
    render_pathways_namespace,
    render_pathways_network_policy,
    render_pathways_service_jobset,
    server_image_for_jax,
)
from tpuplane.infra.fleet.scheduling import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    NODEPOOL_LABEL,
    PLACEMENT_POLICY_LABEL,
    dedicated_toleration,
    tpu_node_selector,
    tpu_resources,
    tpu_tolerations,
)

SERVER = server_image_for_jax("0.9.0")
SIDECAR = "us-east5-docker.pkg.dev/acme-ml/tpuplane-sidecar/sidecar:ctx-0123456789abcdef0123"


def render(spec: TpuSpec, slices: int = 2, *, capacity: str = "on-demand", placement_policy: str | None = None,
           sidecar_image: str | None = None, name: str = "pw") -> dict[str, Any]:
    return render_pathways_service_jobset(
        name, spec=spec, slices=slices, capacity=capacity, server_image=SERVER, gcs_scratch_location="gs://scratch",
        cpu_pool="cpu", node_pools=[f"grp-{i}" for i in range(slices)], placement_policy=placement_policy,
        sidecar_image=sidecar_image)


def replicated(jobset: dict[str, Any], name: str) -> dict[str, Any]:
    return next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == name)


def container(jobset: dict[str, Any], job: str, name: str) -> dict[str, Any]:
    return next(c for c in pod_spec(jobset, job)["containers"] if c["name"] == name)


V6E_8 = resolve_tpu_type("v6e-8", machine_type="ct6e-standard-8t")
V5P_128 = resolve_tpu_type("v5p-128")
TPU7X_8 = resolve_tpu_type("tpu7x-8")
TPU7X_16 = resolve_tpu_type("tpu7x-16")


# ---- the JobSet -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sidecar_image", [None, SIDECAR], ids=["plain", "sidecar"])
@pytest.mark.parametrize("spec", [V6E_8, V5P_128, TPU7X_8, TPU7X_16], ids=lambda s: s.name)
def test_render_pathways_service_jobset_is_valid(spec, sidecar_image):
    """The project's strict JobSet schema, and every Job template against Kubernetes batch/v1."""
    jobset = render(spec, placement_policy="p" if spec.needs_workload_policy else None, sidecar_image=sidecar_image)
    validate_manifests([jobset])


def test_jobset_validation_catches_a_misplaced_field():
    """The check above can fail: a pod field at the Job level is rejected."""
    jobset = render(V5P_128, sidecar_image=SIDECAR)
    replicated(jobset, "pathways-worker")["template"]["spec"]["restartPolicy"] = "OnFailure"
    with pytest.raises(InvalidManifest, match="pathways-worker"):
        validate_manifests([jobset])


def test_render_pathways_service_jobset_is_the_same_in_every_process():
    first, second = printed_by_two_processes(
        "import json, test_pathways_render as t\n"
        "print(json.dumps(t.render(t.V5P_128, sidecar_image=t.SIDECAR), sort_keys=False))")
    assert first == second and "pathways-worker" in first


def test_head_runs_the_resource_manager_with_the_catalog_instance_type():
    rm = container(render(V6E_8, slices=3), "pathways-head", "pathways-rm")
    assert rm["args"][:4] == ["--server_port=29001", "--node_type=resource_manager", "--instance_count=3",
                              "--instance_type=tpuv6e1t:2x4"]
    assert "--gcs_scratch_location=gs://scratch" in rm["args"]
    assert rm["image"] == SERVER
    assert [p["containerPort"] for p in rm["ports"]][0] == 29001


def test_head_runs_on_the_cpu_pool_with_guaranteed_resources():
    jobset = render(V5P_128)
    pod = pod_spec(jobset, "pathways-head")
    assert pod["nodeSelector"] == {NODEPOOL_LABEL: "cpu"}
    rm = container(jobset, "pathways-head", "pathways-rm")
    assert rm["resources"]["requests"] == rm["resources"]["limits"] == {"cpu": "8", "memory": "32G"}
    assert "tolerations" not in pod


def test_no_pod_uses_host_network_so_the_network_policy_applies():
    jobset = render(V5P_128)
    for job in ("pathways-head", "pathways-worker"):
        assert not pod_spec(jobset, job).get("hostNetwork", False)


def test_head_is_the_coordinator_and_workers_wait_for_it_to_be_ready():
    jobset = render(V5P_128)
    assert jobset["spec"]["coordinator"] == {"jobIndex": 0, "podIndex": 0, "replicatedJob": "pathways-head"}
    assert replicated(jobset, "pathways-worker")["dependsOn"] == [{"name": "pathways-head", "status": "Ready"}]
    assert container(jobset, "pathways-head", "pathways-rm")["readinessProbe"]["tcpSocket"]["port"] == 29001
    assert jobset["spec"]["network"]["enableDNSHostnames"] is True


def test_service_never_succeeds_and_survives_failures():
    spec = render(V5P_128)["spec"]
    assert "successPolicy" not in spec
    assert spec["failurePolicy"]["maxRestarts"] >= 30
    assert pod_spec(render(V5P_128), "pathways-worker")["restartPolicy"] == "OnFailure"


def test_head_evictions_restart_the_service_without_counting():
    jobset = render(V5P_128)
    head_job = replicated(jobset, "pathways-head")["template"]["spec"]
    (rule,) = head_job["podFailurePolicy"]["rules"]
    assert (rule["action"], rule["onPodConditions"][0]["type"]) == ("FailJob", "DisruptionTarget")
    (restart,) = jobset["spec"]["failurePolicy"]["rules"]
    assert restart["onJobFailureReasons"] == ["PodFailurePolicy"]
    assert restart["action"] == "RestartJobSetAndIgnoreMaxRestarts"


@pytest.mark.parametrize("spec, slices", [(V6E_8, 2), (V5P_128, 3), (TPU7X_16, 2)], ids=lambda v: str(v))
def test_workers_run_one_job_per_slice_and_one_pod_per_vm(spec, slices):
    worker = replicated(render(spec, slices), "pathways-worker")
    job = worker["template"]["spec"]
    assert worker["replicas"] == slices
    assert job["parallelism"] == job["completions"] == spec.vms_per_slice
    assert job["backoffLimit"] >= spec.vms_per_slice * 1000


def test_worker_backoff_limit_fits_int32_on_the_largest_slices():
    largest = resolve_tpu_type("tpu7x-16x24x24")
    job = replicated(render(largest, 1), "pathways-worker")["template"]["spec"]
    assert job["backoffLimit"] <= 2**31 - 1


def test_workers_place_one_slice_per_node_pool_exclusively():
    worker = replicated(render(V5P_128, 2), "pathways-worker")
    assert worker["template"]["metadata"]["annotations"] == {EXCLUSIVE_TOPOLOGY_ANNOTATION: NODEPOOL_LABEL}
    terms = pod_spec(render(V5P_128, 2), "pathways-worker")["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": NODEPOOL_LABEL, "operator": "In", "values": ["grp-0", "grp-1"]}]}]


@pytest.mark.parametrize("spec, capacity", [(V6E_8, "on-demand"), (V5P_128, "spot")], ids=lambda v: str(v)[:12])
def test_workers_select_tolerate_and_claim_tpus_from_scheduling(spec, capacity):
    jobset = render(spec, capacity=capacity)
    pod = pod_spec(jobset, "pathways-worker")
    assert pod["nodeSelector"] == tpu_node_selector(spec, capacity)
    assert pod["tolerations"] == tpu_tolerations(capacity) + [dedicated_toleration(jobset["metadata"]["name"])]
    assert container(jobset, "pathways-worker", "pathways-worker")["resources"] == tpu_resources(spec)


def test_v6e_single_host_workers_claim_all_eight_chips():
    resources = container(render(V6E_8), "pathways-worker", "pathways-worker")["resources"]
    assert resources["limits"] == {"google.com/tpu": "8"}


def test_tpu7x_multi_host_workers_select_the_workload_policy():
    policy = workload_policy_name("fleet", "ir")
    selector = pod_spec(render(TPU7X_16, placement_policy=policy), "pathways-worker")["nodeSelector"]
    assert selector[PLACEMENT_POLICY_LABEL] == "fleet-ir-wp"
    assert selector["cloud.google.com/gke-tpu-topology"] == "2x2x2"


def test_workers_reach_the_resource_manager_and_learn_their_slice():
    worker = container(render(V5P_128), "pathways-worker", "pathways-worker")
    assert worker["args"] == ["--server_port=29005", f"--resource_manager_address={pathways_service_address('pw')}",
                              "--gcs_scratch_location=gs://scratch"]
    env = {e["name"]: e.get("value") or e["valueFrom"]["fieldRef"]["fieldPath"] for e in worker["env"]}
    assert env["MEGASCALE_SLICE_ID"] == "metadata.labels['jobset.sigs.k8s.io/job-index']"
    assert env["MEGASCALE_NUM_SLICES"] == "metadata.labels['jobset.sigs.k8s.io/replicatedjob-replicas']"
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "metadata.labels['jobset.sigs.k8s.io/coordinator']"
    assert 29005 in [p["containerPort"] for p in worker["ports"]]


def test_pathways_service_address_is_qualified_with_the_namespace():
    assert pathways_head_host("pw") == "pw-pathways-head-0-0.pw"
    assert pathways_service_address("pw") == "pw-pathways-head-0-0.pw.pw.svc:29001"


@pytest.mark.parametrize("image, policy", [
    (SERVER, "IfNotPresent"),
    ("reg:5000/pathways/server@sha256:" + "a" * 64, "IfNotPresent"),
    ("reg:5000/pathways/server:latest", "Always"),
    ("reg:5000/pathways/server", "Always"),
])
def test_images_are_pulled_again_only_when_their_tag_moves(image, policy):
    assert pull_policy(image) == policy


@pytest.mark.parametrize("image, version", [
    (SERVER, "0.9.0"),
    ("r/server:jax-0.8.0@sha256:" + "b" * 64, "0.8.0"),
    ("reg:5000/server:nightly", None),
    ("reg:5000/server@sha256:" + "b" * 64, None),
])
def test_jax_version_of_tag_reads_the_public_server_tag_scheme(image, version):
    assert jax_version_of_tag(image) == version


# ---- the sidecar -------------------------------------------------------------------------------------------------


def test_attach_colocated_sidecar_adds_a_native_sidecar_sharing_memory():
    worker_pod = pod_spec(render(V5P_128), "pathways-worker")
    pod = attach_colocated_sidecar(worker_pod, SIDECAR)
    (sidecar,) = pod["initContainers"]
    assert (sidecar["name"], sidecar["image"], sidecar["restartPolicy"]) == (
        "colocated-python-sidecar", SIDECAR, "Always")
    assert {"name": "GRPC_SERVER_ADDRESS", "value": "0.0.0.0:50051"} in sidecar["env"]
    assert [p["containerPort"] for p in sidecar["ports"]] == [50051]
    (volume,) = pod["volumes"]
    assert volume["emptyDir"] == {"medium": "Memory"}
    worker = next(c for c in pod["containers"] if c["name"] == "pathways-worker")
    for c in (sidecar, worker):
        assert {"mountPath": DEFAULT_SHM_DIR, "name": volume["name"]} in c["volumeMounts"]
    assert worker["args"][-1] == f"--cloud_pathways_sidecar_shm_directory={DEFAULT_SHM_DIR}"


def test_attach_colocated_sidecar_tells_worker_and_sidecar_the_shm_directory():
    pod = attach_colocated_sidecar(pod_spec(render(V5P_128), "pathways-worker"), SIDECAR, shm_dir="/dev/shm/pw")
    worker = next(c for c in pod["containers"] if c["name"] == "pathways-worker")
    for c in (pod["initContainers"][0], worker):
        assert {"name": "CLOUD_PATHWAYS_SIDECAR_SHM_DIRECTORY", "value": "/dev/shm/pw"} in c["env"]


def test_attach_colocated_sidecar_starts_the_worker_once_the_sidecar_listens():
    """Kubernetes starts a pod's main containers after a native sidecar's startupProbe succeeds."""
    (sidecar,) = attach_colocated_sidecar(pod_spec(render(V5P_128), "pathways-worker"), SIDECAR)["initContainers"]
    probe = sidecar["startupProbe"]
    assert probe["tcpSocket"] == {"port": 50051}
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 300


def test_attach_colocated_sidecar_leaves_its_input_untouched():
    worker_pod = pod_spec(render(V5P_128), "pathways-worker")
    before = json.dumps(worker_pod)
    attach_colocated_sidecar(worker_pod, SIDECAR, shm_dir="/dev/shm/pw")
    assert json.dumps(worker_pod) == before


def test_attach_colocated_sidecar_needs_a_pathways_worker():
    with pytest.raises(ValueError, match="pathways-worker"):
        attach_colocated_sidecar({"containers": [{"name": "main", "image": "x"}]}, SIDECAR)


def test_render_with_sidecar_attaches_it_to_workers_only():
    jobset = render(V5P_128, sidecar_image=SIDECAR)
    assert pod_spec(jobset, "pathways-worker")["initContainers"][0]["image"] == SIDECAR
    assert "initContainers" not in pod_spec(jobset, "pathways-head")


# ---- namespace and network policy ---------------------------------------------------------------------------------


def test_render_pathways_namespace_enforces_baseline_pod_security():
    namespace = render_pathways_namespace("pw")
    validate_manifests([namespace])
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_network_policy_admits_team_namespaces_to_the_rm_port_only():
    policy = render_pathways_network_policy("pw", ["research", "prod-ml", "research"])
    validate_manifests([policy])
    own, teams = policy["spec"]["ingress"]
    assert own == {"from": [{"podSelector": {}}]}
    assert teams["ports"] == [{"port": 29001, "protocol": "TCP"}]
    assert teams["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["prod-ml", "research"]


def test_network_policy_selects_the_head_pods_by_jobset_labels():
    selector = render_pathways_network_policy("pw", [])["spec"]["podSelector"]["matchLabels"]
    assert selector == {"jobset.sigs.k8s.io/jobset-name": "pw",
                        "jobset.sigs.k8s.io/replicatedjob-name": "pathways-head"}


def test_network_policy_without_teams_admits_only_the_service_itself():
    assert render_pathways_network_policy("pw", [])["spec"]["ingress"] == [{"from": [{"podSelector": {}}]}]
