"""Per-job Pathways JobSets: the shape xpk's `workload create-pathways` and the PathwaysJob controller render."""

import pytest

from conftest import printed_by_two_processes

from tpuplane.infra.fleet.catalog import resolve_tpu_type
from tpuplane.infra.k8s_validation import validate_manifests
from tpuplane.infra.pathways.job import (
    PathwaysJobSpec,
    UserContainer,
    proxy_address,
    render_pathways_jobset,
)
from tpuplane.infra.pathways.service import server_image_for_jax

SERVER = server_image_for_jax("0.9.0")
USER = UserContainer("us-docker.pkg.dev/acme/train:1", ("python", "train.py"), (("STEPS", "10"),))


def job(**changes):
    fields = {"name": "llama", "namespace": "team-a", "spec": resolve_tpu_type("v6e-16"), "slices": 2,
              "capacity": "on-demand", "server_image": SERVER, "gcs_scratch_location": "gs://acme-scratch/llama",
              "cpu_pool": "cpu", "user": USER, "priority": "medium", "labels": {"tpuplane.dev/workload": "llama"},
              "jobset_labels": {"kueue.x-k8s.io/queue-name": "team-a"}, **changes}
    return PathwaysJobSpec(**fields)


def replicated(jobset, name):
    return next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == name)


def pod(jobset, name):
    return replicated(jobset, name)["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("changes", [{}, {"user": None}, {"sidecar_image": "us-docker.pkg.dev/acme/sidecar:1"},
                                     {"spec": resolve_tpu_type("tpu7x-16"), "placement_policy": "c-g-wp"}])
def test_the_jobset_passes_the_schemas_and_jobsets_webhook_rules(changes):
    validate_manifests([render_pathways_jobset(job(**changes))])


def test_jobset_level_fields_follow_xpk_and_pathways_job():
    spec = render_pathways_jobset(job())["spec"]

    assert spec["coordinator"] == {"jobIndex": 0, "podIndex": 0, "replicatedJob": "pathways-head"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "InOrder"}
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["pathways-head"]}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert [r["name"] for r in spec["replicatedJobs"]] == ["pathways-head", "worker"]


def test_a_headless_cluster_has_no_success_policy_and_runs_rm_and_proxy_as_plain_containers():
    jobset = render_pathways_jobset(job(user=None))
    head = pod(jobset, "pathways-head")

    assert "successPolicy" not in jobset["spec"]
    assert [c["name"] for c in head["containers"]] == ["pathways-rm", "pathways-proxy"]
    assert not any("restartPolicy" in c for c in head["containers"]) and "initContainers" not in head


def test_with_a_user_container_rm_and_proxy_are_native_sidecars_and_jax_reaches_the_proxy():
    head = pod(render_pathways_jobset(job()), "pathways-head")

    assert [(c["name"], c["restartPolicy"]) for c in head["initContainers"]] == [
        ("pathways-rm", "Always"), ("pathways-proxy", "Always")]
    [user] = head["containers"]
    assert user["name"] == "jax-tpu" and user["command"] == ["python", "train.py"]
    assert [e["name"] for e in user["env"]] == ["PATHWAYS_HEAD", "JAX_PLATFORMS", "XCLOUD_ENVIRONMENT",
                                                "JAX_BACKEND_TARGET", "STEPS"]
    assert user["env"][3]["value"] == "grpc://$(PATHWAYS_HEAD):29000"


def test_the_head_takes_a_cpu_node_of_its_own_on_the_host_network():
    jobset = render_pathways_jobset(job())
    head_job = replicated(jobset, "pathways-head")["template"]
    head = pod(jobset, "pathways-head")

    assert head_job["metadata"]["annotations"] == {"alpha.jobset.sigs.k8s.io/exclusive-topology":
                                                   "kubernetes.io/hostname"}
    assert head_job["spec"]["backoffLimit"] == 0
    assert (head["hostNetwork"], head["dnsPolicy"], head["restartPolicy"]) == (True, "ClusterFirstWithHostNet", "Never")
    assert head["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu"}


def test_head_flags_name_the_slices_and_point_the_proxy_at_the_jobs_own_resource_manager():
    head = pod(render_pathways_jobset(job()), "pathways-head")
    rm, proxy = head["initContainers"]

    assert "--instance_count=2" in rm["args"] and "--instance_type=tpuv6e:4x4" in rm["args"]
    assert proxy["args"] == ["--server_port=29000", "--resource_manager_address=$(PATHWAYS_HEAD):29001",
                             "--gcs_scratch_location=gs://acme-scratch/llama"]
    assert proxy["image"] == "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.9.0"


def test_workers_one_job_per_slice_one_pod_per_vm_on_the_groups_pools():
    jobset = render_pathways_jobset(job())
    worker_job = replicated(jobset, "worker")
    worker = pod(jobset, "worker")

    assert worker_job["replicas"] == 2
    assert worker_job["template"]["spec"] | {"template": None} == {
        "backoffLimit": 16, "completionMode": "Indexed", "completions": 4, "parallelism": 4, "template": None}
    assert worker_job["template"]["metadata"]["annotations"] == {
        "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"}
    [container] = worker["containers"]
    assert container["args"][1] == "--resource_manager_address=$(PATHWAYS_HEAD):29001"
    assert container["resources"]["limits"] == {"google.com/tpu": "4"}
    assert worker["nodeSelector"]["cloud.google.com/gke-tpu-topology"] == "4x4"
    assert (worker["hostNetwork"], worker["restartPolicy"], worker["priorityClassName"]) == (True, "OnFailure",
                                                                                             "medium")


def test_tpu7x_workers_select_their_pools_workload_policy():
    worker = pod(render_pathways_jobset(job(spec=resolve_tpu_type("tpu7x-16"), placement_policy="c-g-wp")), "worker")

    assert worker["nodeSelector"]["cloud.google.com/placement-policy-name"] == "c-g-wp"


def test_the_sidecar_joins_every_worker_and_the_proxy_is_told():
    jobset = render_pathways_jobset(job(sidecar_image="us-docker.pkg.dev/acme/sidecar:1"))

    assert [c["name"] for c in pod(jobset, "worker")["initContainers"]] == ["colocated-python-sidecar"]
    assert "--sidecar_name=external" in pod(jobset, "pathways-head")["initContainers"][1]["args"]


def test_queue_labels_go_on_the_jobset_only_and_workload_labels_everywhere():
    jobset = render_pathways_jobset(job())

    assert jobset["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team-a", "tpuplane.dev/workload": "llama"}
    head_labels = replicated(jobset, "pathways-head")["template"]["spec"]["template"]["metadata"]["labels"]
    assert head_labels == {"tpuplane.dev/workload": "llama"}


def test_the_rendering_is_the_same_in_every_process():
    first, second = printed_by_two_processes(
        "import json, test_pathways_job as t\nprint(json.dumps(t.render_pathways_jobset(t.job())))")
    assert first == second and "llama" in first


def test_the_proxy_address_is_the_head_pods_dns_name():
    assert proxy_address("llama", "team-a") == "grpc://llama-pathways-head-0-0.llama.team-a.svc:29000"


def test_a_server_image_not_named_server_has_no_proxy_to_pair_with():
    with pytest.raises(ValueError, match="no proxy_server image"):
        render_pathways_jobset(job(server_image="us-docker.pkg.dev/acme/custom:1"))


