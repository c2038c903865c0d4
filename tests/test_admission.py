"""What the API server stores for a workload: the JobSet CRD's and webhooks' defaults, Kueue's, then validation.

The defaults follow JobSet v0.12's `jobSetWebhook.Default` and CRD and Kueue v0.19's JobSet webhook (read in
their sources); no JobSet or Kueue controller runs here, so each test states the behaviour it pins."""

from __future__ import annotations

import copy

import pytest
import yaml

from tpuplane.infra.batch.admission import admitted
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.k8s_validation import manifest_errors
from workload_cases import WORKLOADS

QUEUE = "kueue.x-k8s.io/queue-name"


@pytest.fixture
def xpk_jobset() -> dict:
    """A JobSet as xpk writes it: one unnamed failure-policy rule, no namespace."""
    return yaml.safe_load((WORKLOADS / "xpk_v4_16.yaml").read_text())


def rules(obj: dict) -> list[dict]:
    return obj["spec"]["failurePolicy"]["rules"]


def test_unnamed_failure_policy_rule_is_named_by_its_index(xpk_jobset):
    rules(xpk_jobset).insert(0, {"name": "RestartOnPreemption", "action": "RestartJobSet"})
    rules(xpk_jobset).append({"action": "FailJobSet", "name": ""})

    stored = admitted(xpk_jobset)

    assert [r["name"] for r in rules(stored)] == ["RestartOnPreemption", "failurePolicyRule1", "failurePolicyRule2"]


def test_a_default_name_that_collides_with_a_given_one_is_refused_as_the_webhook_does(xpk_jobset):
    rules(xpk_jobset).insert(0, {"name": "failurePolicyRule1", "action": "RestartJobSet"})

    with pytest.raises(ConfigError) as exc:
        admitted(xpk_jobset)

    assert "spec.failurePolicy.rules.0.name: rule names are not unique, rules with indices [0, 1]" in str(exc.value)


def test_jobset_webhook_and_crd_defaults_fill_only_what_is_unset(xpk_jobset):
    xpk_jobset["spec"]["network"] = {"enableDNSHostnames": False}

    stored = admitted(xpk_jobset)
    spec, rjob = stored["spec"], stored["spec"]["replicatedJobs"][0]

    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": False, "publishNotReadyAddresses": True}
    assert spec["failurePolicy"]["restartStrategy"] == "Recreate"
    assert (rjob["groupName"], rjob["template"]["spec"]["completionMode"]) == ("default", "Indexed")
    assert rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"  # xpk's, kept


def test_replicas_and_pod_restart_policy_get_their_defaults_when_unset(xpk_jobset):
    rjob = xpk_jobset["spec"]["replicatedJobs"][0]
    del rjob["replicas"]
    del rjob["template"]["spec"]["template"]["spec"]["restartPolicy"]

    stored = admitted(xpk_jobset)["spec"]["replicatedJobs"][0]

    assert (stored["replicas"], stored["template"]["spec"]["template"]["spec"]["restartPolicy"]) == (1, "OnFailure")


def test_the_given_manifest_is_left_unchanged(xpk_jobset):
    before = copy.deepcopy(xpk_jobset)
    admitted(xpk_jobset)
    assert xpk_jobset == before


def test_object_without_namespace_lands_in_default(xpk_jobset):
    assert admitted(xpk_jobset)["metadata"]["namespace"] == "default"


def test_kueue_suspends_a_queued_workload_whatever_it_said(xpk_jobset):
    xpk_jobset["spec"]["suspend"] = False
    assert admitted(xpk_jobset)["spec"]["suspend"] is True


def test_kueue_gives_an_unqueued_workload_its_namespaces_default_local_queue(xpk_jobset):
    del xpk_jobset["metadata"]["labels"][QUEUE]

    assert QUEUE not in admitted(xpk_jobset, {("default", "multislice-queue")})["metadata"]["labels"]
    stored = admitted(xpk_jobset, {("default", "default")})
    assert (stored["metadata"]["labels"][QUEUE], stored["spec"]["suspend"]) == ("default", True)


def test_what_the_api_server_refuses_stays_refused_with_its_path(xpk_jobset):
    rules(xpk_jobset)[0]["action"] = "Explode"

    with pytest.raises(ConfigError) as exc:
        admitted(xpk_jobset)

    assert "spec.failurePolicy.rules.0.action: 'Explode' is not one of" in str(exc.value)


@pytest.mark.parametrize("metadata", [None, {}, {"name": ""}, {"name": 7}, "x"])
def test_workload_without_a_name_is_refused(xpk_jobset, metadata):
    xpk_jobset["metadata"] = metadata
    with pytest.raises(ConfigError) as exc:
        admitted(xpk_jobset)
    assert exc.value.problems[0].path == "metadata.name"


@pytest.mark.parametrize("spec", [{"replicatedJobs": "x"}, {"replicatedJobs": [5]}, {"replicatedJobs": [
    {"name": "a", "template": {"spec": {"template": {"spec": {"containers": []}}}}}], "failurePolicy": {"rules": 3}},
    {"network": None, "successPolicy": None, "replicatedJobs": [{"name": "a", "replicas": None, "template": None}]}])
def test_malformed_jobset_is_refused_never_crashes(xpk_jobset, spec):
    xpk_jobset["spec"] = spec
    with pytest.raises(ConfigError):
        admitted(xpk_jobset)


def test_kind_other_than_jobset_or_job_is_refused(xpk_jobset):
    with pytest.raises(ConfigError) as exc:
        admitted(xpk_jobset | {"kind": "Deployment"})
    assert exc.value.problems[0].path == "kind"


# The JobSet webhook's create rules beyond the schema, on stored (defaulted) JobSets.


def test_jobset_whose_child_job_names_exceed_63_characters_is_refused(xpk_jobset):
    xpk_jobset["metadata"]["name"] = "x" * 52  # x...-slice-job-0 is 64 characters
    assert "job names generated for this JobSet will exceed 63 characters" in str(
        pytest.raises(ConfigError, admitted, xpk_jobset).value)


def test_failure_policy_rule_naming_an_unknown_replicated_job_is_refused(xpk_jobset):
    rules(xpk_jobset)[0]["targetReplicatedJobs"] = ["workers"]
    assert "invalid replicatedJob name 'workers' in failure policy" in str(
        pytest.raises(ConfigError, admitted, xpk_jobset).value)


def test_depends_on_of_the_first_replicated_job_is_refused():
    stored = admitted(yaml.safe_load((WORKLOADS / "xpk_v4_16.yaml").read_text()))
    stored["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "x", "status": "Ready"}]
    assert any("DependsOn can't be set for the first ReplicatedJob" in e for e in manifest_errors(stored))


def test_jobset_of_more_pods_than_an_int32_counts_is_refused(xpk_jobset):
    xpk_jobset["spec"]["replicatedJobs"][0]["replicas"] = 2
    xpk_jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 2**30
    assert "the product of replicas and parallelism must not exceed 2147483647" in str(
        pytest.raises(ConfigError, admitted, xpk_jobset).value)


def test_a_refused_name_with_a_newline_is_quoted_on_one_line(xpk_jobset):
    xpk_jobset["metadata"]["name"] = "<b>x</b>\nnext"
    assert pytest.raises(ConfigError, admitted, xpk_jobset).value.problems[0].path == "JobSet '<b>x</b>\\nnext'"


# What the check reads before the schemas: the kind's version and metadata of the shape the API server takes.


@pytest.mark.parametrize("change, path", [
    ({"apiVersion": "jobset.x-k8s.io/v9"}, "apiVersion"),
    ({"apiVersion": "foo/v9"}, "apiVersion"),
    ({"apiVersion": [1]}, "apiVersion"),
    ({"apiVersion": None}, "apiVersion"),
    ({"metadata": {"name": "x", "labels": ["x"]}}, "metadata.labels"),
    ({"metadata": {"name": "x", "annotations": {"a": 1}}}, "metadata.annotations.a"),
    ({"metadata": {"name": "x", "namespace": 5}}, "metadata.namespace"),
    ({"spec": [1]}, "spec"),
])
def test_a_workload_envelope_of_the_wrong_shape_is_refused_by_path(xpk_jobset, change, path):
    xpk_jobset.update(change)
    if change.get("apiVersion", "") is None:
        del xpk_jobset["apiVersion"]

    with pytest.raises(ConfigError) as refused:
        admitted(xpk_jobset)

    assert [p.path for p in refused.value.problems] == [path]


# The API server's pod rules beyond the schema, on every pod template.


def pod(obj: dict) -> dict:
    return obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


@pytest.mark.parametrize("resources, message", [
    ({"requests": {"google.com/tpu": 4}, "limits": {"google.com/tpu": 8}},
     "must be equal to google.com/tpu limit of 8"),
    ({"requests": {"google.com/tpu": 4}}, "Limit must be set for non overcommitable resources"),
    ({"requests": {"cpu": "2", "google.com/tpu": 4}, "limits": {"cpu": "1", "google.com/tpu": 4}},
     "must be less than or equal to cpu limit of 1"),
    ({"requests": {"memory": "2Gi", "google.com/tpu": 4}, "limits": {"memory": "1Gi", "google.com/tpu": 4}},
     "must be less than or equal to memory limit of 1Gi"),
])
def test_a_container_the_api_server_refuses_for_its_resources_is_refused(xpk_jobset, resources, message):
    pod(xpk_jobset)["containers"][0]["resources"] = resources

    with pytest.raises(ConfigError) as refused:
        admitted(xpk_jobset)

    assert message in str(refused.value)


def test_a_pod_without_containers_is_refused(xpk_jobset):
    pod(xpk_jobset)["containers"] = []

    assert "a pod has at least one container" in str(pytest.raises(ConfigError, admitted, xpk_jobset).value)


def test_an_extended_resource_given_as_a_limit_alone_is_its_request_too(xpk_jobset):
    pod(xpk_jobset)["containers"][0]["resources"] = {"limits": {"google.com/tpu": 4, "cpu": "2"},
                                                      "requests": {"cpu": "1"}}

    assert admitted(xpk_jobset)
