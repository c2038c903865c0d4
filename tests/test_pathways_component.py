"""`SharedPathwaysService` under Pulumi's mocks: GCP and a Kubernetes API server cannot exist here, so the mocks
record what the component registers (bucket, IAM, namespace, NetworkPolicy, JobSet) instead of creating it."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from tpuplane.components.offline import Plan, run_under_mocks
from tpuplane.components.pathways import SharedPathwaysService
from tpuplane.infra.fleet.cluster import NODE_SERVICE_ACCOUNT_ROLES
from tpuplane.infra.config import load_stack_config

CONFIG: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b", "cpuPool": {"machineType": "n2-standard-32"}},
    "tpuplane:tpuPools": [{"name": "big", "tpuType": "v5p-128", "slices": 2}],
    "tpuplane:kueue": {"teams": [{"name": "research", "share": 1.0}]},
    "tpuplane:pathways": {"name": "pw", "tpuPool": "big", "jaxVersion": "0.10.0"},
}
NODE_SA = "fleet-nodes@acme-ml.iam.gserviceaccount.com"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
SIDECAR = "us-east5-docker.pkg.dev/acme-ml/tpuplane-sidecar/sidecar:ctx-0123"


def plan_service(config: dict[str, Any], **kwargs: Any) -> Plan:
    def program() -> None:
        cfg = load_stack_config(config)
        provider = k8s.Provider("k8s", kubeconfig="{}")
        controller = k8s.core.v1.Namespace("jobset-system", metadata={"name": "jobset-system"},
                                           opts=pulumi.ResourceOptions(provider=provider))
        service = SharedPathwaysService(
            "pathways", cfg, node_service_account_email=NODE_SA, cpu_pool_name="cpu",
            opts=pulumi.ResourceOptions(providers=[provider], depends_on=[controller]), **kwargs)
        pulumi.export("pathways_service", service.pathways_service)
        pulumi.export("proxy_image", service.proxy_image)
        pulumi.export("bucket", service.bucket)

    return run_under_mocks(program, config, project="tpuplane", stack="test")


@pytest.fixture
def config() -> dict[str, Any]:
    return copy.deepcopy(CONFIG)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_service(copy.deepcopy(CONFIG))


def jobset_spec(plan: Plan) -> dict[str, Any]:
    (jobset,) = plan.of_type(JOBSET)
    return jobset.inputs["spec"]


def test_service_exports_address_images_and_bucket(plan):
    assert plan.outputs == {
        "pathways_service": "pw-pathways-head-0-0.pw.pw.svc:29001",
        "proxy_image": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.10.0",
        "bucket": "acme-ml-fleet-pw-pathways",
    }


def test_service_creates_a_private_expiring_scratch_bucket(plan):
    (bucket,) = plan.of_type("gcp:storage/bucket:Bucket")
    inputs = bucket.inputs
    assert (inputs["name"], inputs["location"], inputs["project"]) == ("acme-ml-fleet-pw-pathways", "us-east5",
                                                                      "acme-ml")
    assert inputs["uniformBucketLevelAccess"] is True
    assert inputs["publicAccessPrevention"] == "enforced"
    (rule,) = inputs["lifecycleRules"]
    assert rule["action"]["type"] == "Delete" and rule["condition"]["age"] > 0


def test_service_grants_object_access_to_the_node_and_the_pods_using_the_bucket(plan):
    grants = plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")
    assert {g.inputs["role"] for g in grants} == {"roles/storage.objectAdmin"}
    assert {g.inputs["bucket"] for g in grants} == {"acme-ml-fleet-pw-pathways"}
    assert sorted(g.inputs["member"] for g in grants) == [
        "serviceAccount:acme-ml.svc.id.goog[pw/default]",
        "serviceAccount:acme-ml.svc.id.goog[research/default]",
        f"serviceAccount:{NODE_SA}",
    ]


def test_service_without_teams_admits_and_grants_proxies_in_default(config):
    """Without Kueue teams, `connect()` creates proxies in `default`: the policy and the bucket must let them in."""
    del config["tpuplane:kueue"]
    plan = plan_service(config)
    (policy,) = plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    _, clients = policy.inputs["spec"]["ingress"]
    assert clients["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["default"]
    members = {g.inputs["member"] for g in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    assert "serviceAccount:acme-ml.svc.id.goog[default/default]" in members


def test_service_grants_no_project_roles_the_cluster_already_grants(plan):
    assert not plan.of_type("gcp:projects/iAMMember:IAMMember")
    assert "roles/artifactregistry.reader" in NODE_SERVICE_ACCOUNT_ROLES  # image pulls rely on the cluster's grant


def test_service_uses_an_existing_bucket_without_creating_one(config):
    config["tpuplane:pathways"]["gcsBucket"] = "gs://team-scratch/pw"
    plan = plan_service(config)
    assert not plan.of_type("gcp:storage/bucket:Bucket")
    assert {g.inputs["bucket"] for g in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")} == {
        "team-scratch"}
    rm_args = jobset_spec(plan)["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--gcs_scratch_location=gs://team-scratch/pw" in rm_args


def test_service_registers_namespace_network_policy_and_jobset(plan):
    (namespace,) = [r for r in plan.of_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == "pw"]
    (policy,) = plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    (jobset,) = plan.of_type(JOBSET)
    assert policy.inputs["metadata"]["namespace"] == jobset.inputs["metadata"]["namespace"] == "pw"
    assert namespace.urn in policy.depends_on and namespace.urn in jobset.depends_on
    assert jobset.parent == policy.parent == namespace.parent


def test_jobset_waits_for_the_controller_and_the_bucket_grants(plan):
    (jobset,) = plan.of_type(JOBSET)
    controller = plan.named("jobset-system")
    assert controller.urn in jobset.depends_on
    for grant in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        assert grant.urn in jobset.depends_on


def test_jobset_runs_the_catalog_shape_of_the_pool(plan):
    head, worker = jobset_spec(plan)["replicatedJobs"]
    assert "--instance_type=tpuv5:4x4x4" in head["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert worker["replicas"] == 2 and worker["template"]["spec"]["parallelism"] == 16


def test_service_attaches_a_built_sidecar_image_output(config):
    config["tpuplane:pathways"]["sidecar"] = {"requirements": "sidecar/requirements.txt"}
    plan = plan_service(config, sidecar_image=pulumi.Output.from_input(SIDECAR))
    worker_pod = jobset_spec(plan)["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert worker_pod["initContainers"][0]["image"] == SIDECAR


def test_service_attaches_a_ready_sidecar_image_from_config(config):
    config["tpuplane:pathways"]["sidecar"] = {"image": SIDECAR}
    worker_pod = jobset_spec(plan_service(config))["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert worker_pod["initContainers"][0]["image"] == SIDECAR


def test_service_refuses_to_drop_a_sidecar_the_config_asks_to_build(config):
    config["tpuplane:pathways"]["sidecar"] = {"requirements": "sidecar/requirements.txt"}
    with pytest.raises(ValueError, match="sidecar_image"):
        plan_service(config)
