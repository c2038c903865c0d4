"""What the components register for storage, job identity, autoscaling, node auto-provisioning, per-job Pathways and
the dashboard. Pulumi's mocks stand in for GCP and Kubernetes (which cannot exist here): each test reads the
resources a program registered and their inputs, as `tpuplane plan` does."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pytest
from conftest import stack_file_config

from tpuplane.components import (
    BatchStack,
    FleetDashboard,
    TeamStorage,
    TpuCluster,
    TpuSlicePool,
    TpuWorkload,
)
from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.k8s_validation import validate_manifests
from tpuplane.infra.monitoring.dashboard import dashboard_errors
from tpuplane.infra.review.plan import Plan

STORAGE: dict[str, Any] = {
    "project": "acme-ml",
    "teams": [{"name": "research"}, {"name": "evals", "namespace": "eval-team"}],
    "volumes": [
        {"name": "datasets", "teams": ["research", "evals"], "read_only": True,
         "gcs": {"bucket": "gs://acme-data/imagenet"}},
        {"name": "ckpt", "teams": ["research"], "gcs": {"bucket": "gs://acme-ckpt"}},
        {"name": "shared", "teams": ["evals"],
         "filestore": {"location": "us-east5-b", "instance": "fs", "share": "vol1", "ip": "10.0.0.2", "size": "1Ti"}},
    ],
    "roles": {"research": ["roles/aiplatform.user"]},
}


def plan_of(build) -> Plan:
    return run_under_mocks(build, {})


def of_kind(plan: Plan, resource_type: str) -> dict[str, dict[str, Any]]:
    return {r.name: r.inputs for r in plan.resources if r.type == resource_type}


# ---- TeamStorage --------------------------------------------------------------------------------------------------


def test_every_team_gets_its_service_account_and_a_claim_per_storage_it_may_mount():
    plan = plan_of(lambda: TeamStorage("storage", STORAGE))

    accounts = of_kind(plan, "kubernetes:core/v1:ServiceAccount")
    claims = of_kind(plan, "kubernetes:core/v1:PersistentVolumeClaim")
    volumes = of_kind(plan, "kubernetes:core/v1:PersistentVolume")
    assert sorted((a["metadata"]["namespace"], a["metadata"]["name"]) for a in accounts.values()) == [
        ("eval-team", "tpuplane-workload"), ("research", "tpuplane-workload")]
    assert sorted((c["metadata"]["namespace"], c["metadata"]["name"]) for c in claims.values()) == [
        ("eval-team", "datasets"), ("eval-team", "shared"), ("research", "ckpt"), ("research", "datasets")]
    validate_manifests([*accounts.values(), *claims.values(), *volumes.values()])


def test_each_claim_waits_for_the_volume_it_binds():
    plan = plan_of(lambda: TeamStorage("storage", STORAGE))

    claim = plan.named("persistentvolumeclaim-research-ckpt")
    assert plan.named("persistentvolume-ckpt.research").urn in claim.depends_on


def test_grants_are_exactly_the_buckets_each_team_mounts_and_its_extra_roles():
    plan = plan_of(lambda: TeamStorage("storage", STORAGE))

    buckets = of_kind(plan, "gcp:storage/bucketIAMMember:BucketIAMMember")
    projects = of_kind(plan, "gcp:projects/iAMMember:IAMMember")
    assert sorted((g["bucket"], g["role"], g["member"]) for g in buckets.values()) == [
        ("acme-ckpt", "roles/storage.objectUser", "serviceAccount:acme-ml.svc.id.goog[research/tpuplane-workload]"),
        ("acme-data", "roles/storage.objectViewer", "serviceAccount:acme-ml.svc.id.goog[eval-team/tpuplane-workload]"),
        ("acme-data", "roles/storage.objectViewer", "serviceAccount:acme-ml.svc.id.goog[research/tpuplane-workload]"),
    ]
    assert [(g["project"], g["role"]) for g in projects.values()] == [("acme-ml", "roles/aiplatform.user")]


def test_with_the_project_number_grants_name_the_principal():
    plan = plan_of(lambda: TeamStorage("storage", {**STORAGE, "project_number": "123456789012"}))

    members = {g["member"] for g in of_kind(plan, "gcp:storage/bucketIAMMember:BucketIAMMember").values()}
    assert "principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/" \
           "acme-ml.svc.id.goog/subject/ns/research/sa/tpuplane-workload" in members


def test_without_grant_access_no_gcp_resource_is_registered():
    plan = plan_of(lambda: TeamStorage("storage", {**STORAGE, "grant_access": False}))

    assert not [r.type for r in plan.resources if r.type.startswith("gcp:")]
    assert of_kind(plan, "kubernetes:core/v1:PersistentVolumeClaim")


def test_the_args_it_exposes_read_back_as_the_same_storage():
    def program():
        storage = TeamStorage("storage", STORAGE)
        pulumi.export("args", storage.args)

    from tpuplane.infra.storage.args import read_team_storage

    assert read_team_storage(plan_of(program).outputs["args"]).storages == read_team_storage(STORAGE).storages


# ---- TpuWorkload on a stack's storage, and as a per-job Pathways cluster ----------------------------------------

BATCH = {"pools": [{"name": "train", "tpu_type": "v6e-16", "slices": 2, "capacity": "spot"}],
         "teams": [{"name": "research", "share": 0.5}, {"name": "evals", "namespace": "eval-team", "share": 0.5}]}
JOB = {"tpuType": "v6e-16", "capacity": "spot", "image": "img:1", "command": "python train.py"}


def jobset_of(workload: dict[str, Any]) -> dict[str, Any]:
    plan = plan_of(lambda: TpuWorkload("w", {"workload": workload, "batch": BATCH, "storage": STORAGE}))
    [jobset] = of_kind(plan, "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet").values()
    return jobset


def test_a_workload_mounts_its_teams_storage_and_runs_as_its_service_account():
    jobset = jobset_of({"name": "t", "namespace": "research", "queue": "research", "jobs": [JOB],
                        "mounts": ["datasets:/data:ro", "ckpt:/ckpt"]})

    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["spec"]["serviceAccountName"] == "tpuplane-workload"
    assert [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"][1:]] == ["datasets", "ckpt"]
    assert pod["metadata"]["annotations"]["gke-gcsfuse/volumes"] == "true"
    assert pod["metadata"]["labels"]["tpuplane.dev/slice-group"] == "train"


def test_a_workload_mounting_another_teams_storage_registers_nothing(registrations):
    from tpuplane.infra.errors import ConfigError

    with pytest.raises(ConfigError, match=r"TpuWorkloadArgs\.workload\.mounts\[0\]: got 'ckpt:/ckpt'"):
        jobset_of({"name": "t", "namespace": "eval-team", "queue": "evals", "jobs": [JOB], "mounts": ["ckpt:/ckpt"]})
    assert registrations == []


def test_a_pathways_workload_is_a_per_job_pathways_jobset():
    jobset = jobset_of({"name": "pw", "namespace": "research", "queue": "research", "jobs": [{**JOB, "slices": 2}],
                        "pathways": {"gcsScratch": "gs://acme-scratch/pw", "jaxVersion": "0.9.0"}})

    validate_manifests([jobset])
    assert [r["name"] for r in jobset["spec"]["replicatedJobs"]] == ["pathways-head", "worker"]
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"


# ---- TpuSlicePool and TpuCluster ---------------------------------------------------------------------------------

POOL = {"project": "acme-ml", "location": "us-east5", "zone": "us-east5-b", "cluster": "fleet", "tpu_type": "v6e-16",
        "capacity": "spot", "autoscaling": {"min_slices": 1, "max_slices": 3}}


def test_an_autoscaled_group_has_max_slices_pools_the_first_min_slices_held():
    plan = plan_of(lambda: TpuSlicePool("train", POOL))

    pools = of_kind(plan, "gcp:container/nodePool:NodePool")
    assert {name: (p.get("nodeCount"), p["initialNodeCount"], p["autoscaling"]) for name, p in pools.items()} == {
        "train-0": (None, 4, {"locationPolicy": "ANY", "maxNodeCount": 4, "minNodeCount": 4}),
        "train-1": (None, 0, {"locationPolicy": "ANY", "maxNodeCount": 4, "minNodeCount": 0}),
        "train-2": (None, 0, {"locationPolicy": "ANY", "maxNodeCount": 4, "minNodeCount": 0}),
    }


def test_the_kueue_pool_of_an_autoscaled_group_is_its_maximum():
    assert TpuSlicePool.describe("train", POOL)["slices"] == 3


CLUSTER = {"project": "acme-ml", "region": "us-east5", "name": "fleet", "zone": "us-east5-b"}


def test_the_cluster_turns_on_the_csi_drivers_nap_and_managed_prometheus_it_is_given():
    plan = plan_of(lambda: TpuCluster("fleet", {**CLUSTER, "csi_drivers": ["filestore", "lustre", "gcs"],
                                                "autoprovisioning": {"cpu": 1000, "memory_gb": 4000,
                                                                     "tpu_chips": {"v6e": 64}},
                                                "managed_prometheus": True}))

    cluster = plan.named("fleet").inputs
    assert sorted(cluster["addonsConfig"]) == ["gcpFilestoreCsiDriverConfig", "gcsFuseCsiDriverConfig",
                                               "lustreCsiDriverConfig"]
    nap = cluster["clusterAutoscaling"]
    assert nap["enabled"] is True and nap["autoProvisioningLocations"] == ["us-east5-b"]
    assert nap["resourceLimits"] == [{"maximum": 1000, "minimum": 0, "resourceType": "cpu"},
                                     {"maximum": 4000, "minimum": 0, "resourceType": "memory"},
                                     {"maximum": 64, "minimum": 0, "resourceType": "tpu-v6e-slice"}]
    assert nap["autoProvisioningDefaults"]["oauthScopes"] == ["https://www.googleapis.com/auth/cloud-platform"]
    assert cluster["monitoringConfig"] == {"managedPrometheus": {"enabled": True}}


def test_the_cluster_puts_lustres_driver_on_the_legacy_port_when_asked():
    """GKE's `enable_legacy_lustre_port`, for instances created with gke-support-enabled (or older nodes)."""
    cluster = plan_of(lambda: TpuCluster("fleet", {**CLUSTER, "csi_drivers": ["lustre"], "lustre_legacy_port": True})
                      ).named("fleet").inputs

    assert cluster["addonsConfig"]["lustreCsiDriverConfig"] == {"enabled": True, "enableLegacyLustrePort": True}


def test_a_cluster_without_them_keeps_only_cloud_storage_fuse():
    cluster = plan_of(lambda: TpuCluster("fleet", CLUSTER)).named("fleet").inputs

    assert cluster["addonsConfig"] == {"gcsFuseCsiDriverConfig": {"enabled": True}}
    assert "clusterAutoscaling" not in cluster and "monitoringConfig" not in cluster


# ---- FleetDashboard ------------------------------------------------------------------------------------------------


def test_the_dashboard_is_a_body_the_monitoring_api_takes_and_kueue_is_scraped_in_order():
    plan = plan_of(lambda: FleetDashboard("dashboard", {"project": "acme-ml", "cluster_name": "fleet",
                                                        "display_name": 'Fleet "<b>"', "scrape_interval": "1m"}))

    body = json.loads(plan.named("dashboard").inputs["dashboardJson"])
    assert dashboard_errors(body) == [] and body["displayName"] == 'Fleet "<b>"'
    monitoring = next(r for r in plan.resources if r.type.endswith(":PodMonitoring"))
    assert monitoring.inputs["spec"]["endpoints"][0]["interval"] == "1m"
    secret = next(r for r in plan.resources if r.type == "kubernetes:core/v1:Secret")
    account = next(r for r in plan.resources if r.type == "kubernetes:core/v1:ServiceAccount")
    assert account.urn in secret.depends_on  # the token Secret after its account


def test_the_stack_program_adds_storage_for_every_team_and_the_dashboard_of_the_stack(plan_stack):
    plan = plan_stack(stack_file_config("pathways"), "pathways")

    accounts = of_kind(plan, "kubernetes:core/v1:ServiceAccount")
    assert {a["metadata"]["namespace"] for a in accounts.values() if a["metadata"]["name"] == "tpuplane-workload"} \
        == {"research", "evals"}
    assert plan.outputs["service_accounts"] == {"evals": "evals/tpuplane-workload",
                                                "research": "research/tpuplane-workload"}
    assert of_kind(plan, "gcp:monitoring/dashboard:Dashboard")


def test_team_storage_waits_for_the_batch_stack_that_makes_the_teams_namespaces():
    def program():
        batch = BatchStack("batch", BATCH)
        TeamStorage("storage", STORAGE, opts=pulumi.ResourceOptions(depends_on=[batch]))

    plan = plan_of(program)
    namespaces = {r.urn for r in plan.resources if r.type == "kubernetes:core/v1:Namespace"}
    children = [r for r in plan.resources if r.custom and "tpuplane:index:TeamStorage$" in r.urn]
    assert len(namespaces) == 2 and children and all(namespaces <= set(r.depends_on) for r in children)
