"""`SharedPathwaysService` under Pulumi's mocks: GCP and a Kubernetes API server cannot exist here, so the mocks
record what the component registers (bucket, IAM, namespace, NetworkPolicy, JobSet) instead of creating it."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest

from tpuplane.components import SharedPathwaysService, SharedPathwaysServiceArgs
from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.review.plan import Plan
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.cluster import NODE_SERVICE_ACCOUNT_ROLES

# A cluster this program did not create: the service is described by its Args alone.
ARGS = SharedPathwaysServiceArgs(
    project="acme-ml", region="us-east5", cluster_name="fleet", service_name="pw", jax_version="0.10.0",
    pool={"name": "big", "tpu_type": "v5p-128", "slices": 2}, client_namespaces=["research"],
    node_service_account="fleet-nodes@acme-ml.iam.gserviceaccount.com", cpu_machine_type="n2-standard-32")
NODE_SA = ARGS["node_service_account"]
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
SIDECAR = "us-east5-docker.pkg.dev/acme-ml/tpuplane-sidecar/sidecar:ctx-0123"


def plan_service(args: SharedPathwaysServiceArgs) -> Plan:
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        controller = k8s.core.v1.Namespace("jobset-system", metadata={"name": "jobset-system"},
                                           opts=pulumi.ResourceOptions(provider=provider))
        service = SharedPathwaysService(
            "pathways", args, opts=pulumi.ResourceOptions(providers=[provider], depends_on=[controller]))
        pulumi.export("pathways_service", service.pathways_service)
        pulumi.export("proxy_image", service.proxy_image)
        pulumi.export("bucket", service.bucket)

    return run_under_mocks(program, {}, project="tpuplane", stack="test")


@pytest.fixture
def config() -> dict[str, Any]:
    return copy.deepcopy(dict(ARGS))


@pytest.fixture(scope="module")
def plan() -> Plan:
    return plan_service(copy.deepcopy(ARGS))


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
    del config["client_namespaces"]
    plan = plan_service(config)
    (policy,) = plan.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    _, clients = policy.inputs["spec"]["ingress"]
    assert clients["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"] == ["default"]
    members = {g.inputs["member"] for g in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    assert "serviceAccount:acme-ml.svc.id.goog[default/default]" in members


def test_service_grants_name_the_pods_accounts_in_the_principal_form_given_the_project_number(config):
    """Like the teams' grants (`workload_member`): the service's and the proxies' pods run as `default`."""
    plan = plan_service({**config, "project_number": "123456789012"})
    members = sorted(g.inputs["member"] for g in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"))
    pool = "principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/acme-ml.svc.id.goog"
    assert members == [f"{pool}/subject/ns/pw/sa/default", f"{pool}/subject/ns/research/sa/default",
                       f"serviceAccount:{NODE_SA}"]


def test_service_grants_no_project_roles_the_cluster_already_grants(plan):
    assert not plan.of_type("gcp:projects/iAMMember:IAMMember")
    assert "roles/artifactregistry.reader" in NODE_SERVICE_ACCOUNT_ROLES  # image pulls rely on the cluster's grant


def test_service_uses_an_existing_bucket_without_creating_one(config):
    config["gcs_bucket"] = "gs://team-scratch/pw"
    plan = plan_service(config)
    assert not plan.of_type("gcp:storage/bucket:Bucket")
    assert {g.inputs["bucket"] for g in plan.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")} == {
        "team-scratch"}
    rm_args = jobset_spec(plan)["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--gcs_scratch_location=gs://team-scratch/pw" in rm_args


def test_service_on_an_existing_bucket_without_grants_creates_no_gcp_resource(config):
    """`grant_bucket_access=False`: a program with only a Kubernetes provider applies the service."""
    plan = plan_service({**config, "gcs_bucket": "gs://team-scratch/pw", "grant_bucket_access": False})
    assert [r.type for r in plan.resources if r.type.startswith("gcp:")] == []
    assert {r.type for r in plan.resources if r.custom} == {
        "pulumi:providers:kubernetes", "kubernetes:core/v1:Namespace", "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        JOBSET}


def test_service_without_grants_needs_an_existing_bucket(config):
    with pytest.raises(ConfigError) as raised:
        plan_service({**config, "grant_bucket_access": False})
    assert [p.path for p in raised.value.problems] == ["SharedPathwaysServiceArgs.gcs_bucket"]


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
    plan = plan_service({**config, "sidecar_image": pulumi.Output.from_input(SIDECAR)})
    worker_pod = jobset_spec(plan)["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]
    assert worker_pod["initContainers"][0]["image"] == SIDECAR


def test_service_attaches_a_ready_sidecar_image(config):
    worker_pod = jobset_spec(plan_service({**config, "sidecar_image": SIDECAR}))["replicatedJobs"][1]["template"][
        "spec"]["template"]["spec"]
    assert worker_pod["initContainers"][0]["image"] == SIDECAR


@pytest.mark.parametrize("changes, path", [
    ({"slices": 3}, "SharedPathwaysServiceArgs.slices"),
    ({"pool": {"name": "big", "tpu_type": "v5p-128", "capacity": "queued"}}, "SharedPathwaysServiceArgs.pool"),
    ({"pool": {"name": "big", "tpu_type": "v5p-129"}}, "SharedPathwaysServiceArgs.pool.tpu_type"),
    ({"service_name": "kube-pw"}, "SharedPathwaysServiceArgs.service_name"),
    ({"service_name": "research"}, "SharedPathwaysServiceArgs.service_name"),
    ({"cpu_machine_type": "n2-standard-4"}, "SharedPathwaysServiceArgs.cpu_machine_type"),
    ({"server_image": "us-docker.pkg.dev/p/server:jax-0.10.0"}, "SharedPathwaysServiceArgs"),
    ({"gcs_bucket": "s3://elsewhere"}, "SharedPathwaysServiceArgs.gcs_bucket"),
    ({"node_service_account": None}, "SharedPathwaysServiceArgs.node_service_account"),
    ({"node_service_account": 123}, "SharedPathwaysServiceArgs.node_service_account"),
    ({"sidecar_image": 5}, "SharedPathwaysServiceArgs.sidecar_image"),
    ({"cpu_pool_name": "Bad Name"}, "SharedPathwaysServiceArgs.cpu_pool_name"),
    ({"cpu_machine_type": ["n2"]}, "SharedPathwaysServiceArgs.cpu_machine_type"),
    ({"client_namespaces": ["Bad NS"]}, "SharedPathwaysServiceArgs.client_namespaces[0]"),
    ({"client_namespaces": "research"}, "SharedPathwaysServiceArgs.client_namespaces"),
    ({"pool": {"name": "big", "tpu_type": "v5p-128", "slices": 2, "dedicated_slices": 1}},
     "SharedPathwaysServiceArgs.pool.dedicated_slices"),
    ({"pool": ["big"]}, "SharedPathwaysServiceArgs.pool"),
    ({"project": ""}, "SharedPathwaysServiceArgs.project"),
    ({"project_number": "acme-ml"}, "SharedPathwaysServiceArgs.project_number"),
])
def test_service_bad_args_name_the_field_and_register_nothing(config, changes, path, registrations):
    with pytest.raises(ConfigError) as raised:
        plan_service({**config, **changes})
    assert path in [p.path for p in raised.value.problems]
    assert registrations == ["pulumi:providers:kubernetes::k8s", "kubernetes:core/v1:Namespace::jobset-system"]
