"""The project's own Kueue/JobSet schemas are strict, and the validator holds JobSet pod templates to Kubernetes'."""

from __future__ import annotations

import copy
import json
from importlib import resources

import pytest

from tpuplane.infra.k8s_validation import InvalidManifest, manifest_errors, validate_manifests
from tpuplane.infra.workload import TpuJob, TpuWorkloadSpec, render_tpu_jobset

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
