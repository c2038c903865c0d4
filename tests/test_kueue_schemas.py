"""The project's own Kueue/JobSet schemas are strict, and the validator holds JobSet pod templates to Kubernetes'."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from tpuplane.infra.k8s_validation import InvalidManifest, manifest_errors, validate_manifests
from tpuplane.infra.batch.workload import TpuJob, TpuWorkloadSpec, render_tpu_jobset

CLUSTER_QUEUE = {
    "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
    "spec": {"resourceGroups": [{"coveredResources": ["google.com/tpu"], "flavors": [
        {"name": "f", "resources": [{"name": "google.com/tpu", "nominalQuota": 16}]}]}]},
}


def schema_files():
    return sorted(p.name for p in resources.files("tpuplane.infra.schemas").iterdir() if p.name.endswith(".json"))


def objects_in(schema):
    if isinstance(schema, dict):
        if schema.get("type") == "object" and "properties" in schema:
            yield schema
        for value in schema.values():
            yield from objects_in(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from objects_in(value)


@pytest.mark.parametrize("name", schema_files())
def test_schema_every_object_forbids_unknown_fields(name):
    schema = json.loads((resources.files("tpuplane.infra.schemas") / name).read_text())
    assert all(o.get("additionalProperties") is False for o in objects_in(schema))


def test_schema_accepts_a_minimal_cluster_queue():
    assert manifest_errors(CLUSTER_QUEUE) == []


def test_schema_rejects_v1beta1_top_level_admission_checks():
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"]["admissionChecks"] = ["dws-prov"]
    assert any("admissionChecks" in e for e in manifest_errors(cq))


def test_schema_rejects_v1beta1_cohort_field():
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"]["cohort"] = "fleet"
    assert manifest_errors(cq)


def test_schema_rejects_an_unknown_enum_value():
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"]["preemption"] = {"reclaimWithinCohort": "Sometimes"}
    assert any("Sometimes" in e for e in manifest_errors(cq))


def test_schema_rejects_a_bad_quantity():
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
    assert manifest_errors(cq)


def test_validator_checks_jobset_pod_templates_as_kubernetes_jobs():
    jobset = render_tpu_jobset(TpuWorkloadSpec(name="t", jobs=[TpuJob(tpu_type="v6e-16", image="i", command="c")]))
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["hostNetwrk"] = True
    with pytest.raises(InvalidManifest, match="hostNetwrk"):
        validate_manifests([jobset])


def test_validator_checks_core_kinds_strictly():
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}, "spec": {"finalizer": []}}
    assert manifest_errors(namespace)


def test_validator_refuses_a_kind_without_a_schema():
    with pytest.raises(InvalidManifest, match="no schema"):
        manifest_errors({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "t"}})


def cluster_queue(**spec) -> dict:
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"].update(spec)
    return cq


@pytest.mark.parametrize("strategy, message", [({}, "'admissionChecks' is a required property"),
                                               ({"admissionChecks": []}, "should be non-empty"),
                                               ({"admissionChecks": [{"name": "c", "onFlavors": ["f", "f"]}]},
                                                "non-unique")])
def test_schema_admission_checks_strategy_rules(strategy, message):
    assert any(message in e for e in manifest_errors(cluster_queue(admissionChecksStrategy=strategy)))


def test_schema_admission_check_parameters_name_is_a_dns_label():
    check = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "AdmissionCheck", "metadata": {"name": "c"},
             "spec": {"controllerName": "x", "parameters": {"apiGroup": "kueue.x-k8s.io",
                                                            "kind": "ProvisioningRequestConfig", "name": "a.b"}}}
    assert any("parameters.name" in e for e in manifest_errors(check))


def test_schema_provisioning_request_config_managed_resources_are_a_set():
    prc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ProvisioningRequestConfig", "metadata": {"name": "p"},
           "spec": {"provisioningClassName": "queued-provisioning.gke.io",
                    "managedResources": ["google.com/tpu", "google.com/tpu"]}}
    assert any("non-unique" in e for e in manifest_errors(prc))


def test_schema_workload_priority_class_description_is_limited():
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "w"},
           "value": 1, "description": "x" * 2049}
    assert any("description" in e for e in manifest_errors(wpc))


@pytest.mark.parametrize("name", ["a" * 64, "1train", "a.b"])
def test_schema_jobset_name_is_a_dns_1035_label(name):
    jobset = render_tpu_jobset(TpuWorkloadSpec(name="t", jobs=[TpuJob(tpu_type="v6e-16", image="i", command="c")]))
    jobset["metadata"]["name"] = name
    assert any("metadata.name" in e for e in manifest_errors(jobset))


@pytest.mark.parametrize("labels", [{"bad key!": "v"}, {"k": "bad value!"}, {"k": "v" * 64}, {"a/b/c": "v"}])
def test_schema_label_keys_and_values_follow_kubernetes_rules(labels):
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["metadata"]["labels"] = labels
    assert manifest_errors(cq)


def test_schema_accepts_prefixed_label_keys_and_empty_values():
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["metadata"]["labels"] = {"example.com/team": "", "app.kubernetes.io/name": "x_y.z-1"}
    assert manifest_errors(cq) == []


def test_rules_flavor_resources_must_match_covered_resources():
    cq = cluster_queue(resourceGroups=[{"coveredResources": ["cpu", "memory"], "flavors": [
        {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1}]}]}])
    assert any("same resources as coveredResources" in e for e in manifest_errors(cq))


def test_rules_borrowing_limit_needs_a_cohort():
    cq = copy.deepcopy(CLUSTER_QUEUE)
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 4
    assert any("borrowingLimit: must be nil when cohortName is empty" in e for e in manifest_errors(cq))
    cq["spec"]["cohortName"] = "fleet"
    assert manifest_errors(cq) == []


@pytest.mark.parametrize("lending, ok", [(16, True), (17, False), ("16", True), ("0.1k", False)])
def test_rules_lending_limit_at_most_nominal_quota(lending, ok):
    cq = cluster_queue(cohortName="fleet")
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = lending
    assert (manifest_errors(cq) == []) is ok
