"""Specification of the stack program: the example stacks compose the whole platform, and its parts agree.

The program runs under Pulumi's mocks (GCP and Kubernetes cannot exist here), as `tpuplane plan` runs it.
"""

from __future__ import annotations

import pytest
from kubernetes.utils import parse_quantity
from conftest import STACKS as STACK_DIR
from conftest import stack_file_config

from tpuplane.infra.k8s_validation import manifest_errors
from tpuplane.infra.review.policies import check_plan

CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
NODE_POOL = "gcp:container/nodePool:NodePool"
STACKS = ("dev", "prod", "pathways")


@pytest.fixture(scope="module")
def plans():
    """Each example stack planned once for the module."""
    from tpuplane.components.offline import run_program_file

    return {name: run_program_file(STACK_DIR / "__main__.py", stack_file_config(name), project="tpuplane", stack=name)
            for name in STACKS}


def tpu_quota_by_flavor(plan) -> dict[str, int]:
    quota: dict[str, int] = {}
    for queue in plan.of_type(CLUSTER_QUEUE):
        for group in queue.inputs["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                for resource in flavor["resources"]:
                    chips = int(parse_quantity(resource["nominalQuota"]))
                    if resource["name"] == "google.com/tpu" and chips:
                        quota[flavor["name"]] = quota.get(flavor["name"], 0) + chips
    return quota


def test_prod_stack_plans_the_whole_batch_stack(plans):
    types = {r.type for r in plans["prod"].resources}

    assert {"kubernetes:helm.sh/v3:Release", "kubernetes:batch/v1:Job", FLAVOR, CLUSTER_QUEUE,
            "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue", "kubernetes:scheduling.k8s.io/v1:PriorityClass",
            "kubernetes:kueue.x-k8s.io/v1beta2:WorkloadPriorityClass"} <= types
    assert sorted(r.inputs["chart"] for r in plans["prod"].of_type("kubernetes:helm.sh/v3:Release")) == [
        "oci://registry.k8s.io/jobset/charts/jobset", "oci://registry.k8s.io/kueue/charts/kueue"]


def test_prod_stack_tpu_quota_equals_pool_capacity_for_every_flavor(plans):
    # 4 x v5p-128 (16 VMs x 4 chips) on the reservation; 2 x v6e-8 on one 8-chip VM each, flex-start.
    assert tpu_quota_by_flavor(plans["prod"]) == {"tpu-v5p-slice-4x4x4-reservation": 256,
                                                  "tpu-v6e-slice-2x4-flex-start": 16}


def test_kueue_objects_wait_for_the_webhook_gate(plans):
    plan = plans["prod"]
    gate = plan.named("job-kueue-system-kueue-webhook-ready").urn

    for queue_object in plan.of_type(FLAVOR) + plan.of_type(CLUSTER_QUEUE):
        assert gate in queue_object.depends_on, queue_object.name


def test_pathways_stack_dedicates_the_service_slices_outside_kueue(plans):
    plan = plans["pathways"]
    serve = [r.inputs for r in plan.of_type(NODE_POOL) if r.inputs["name"].startswith("serve-")]
    batch = [r.inputs for r in plan.of_type(NODE_POOL) if r.inputs["name"].startswith("batch-")]

    assert all(p["nodeConfig"]["labels"]["tpuplane.dev/dedicated"] == "pw" for p in serve)
    assert all({"key": "tpuplane.dev/dedicated", "value": "pw", "effect": "NO_SCHEDULE"} in p["nodeConfig"]["taints"]
               for p in serve)
    assert not any("tpuplane.dev/dedicated" in p["nodeConfig"]["labels"] for p in batch)
    # Only the spot batch pool is Kueue's: 4 slices x 16 chips, split 0.75 / 0.25 between the teams.
    assert tpu_quota_by_flavor(plan) == {"tpu-v6e-slice-4x4-spot": 64}
    quotas = {q.inputs["metadata"]["name"]: q.inputs["spec"]["resourceGroups"][0]["flavors"][1]["resources"][0]
              ["nominalQuota"] for q in plan.of_type(CLUSTER_QUEUE)}
    assert quotas == {"research": "48", "evals": "16"}


def test_pathways_stack_workers_tolerate_their_dedicated_pools(plans):
    [jobset] = plans["pathways"].of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    worker = next(j for j in jobset.inputs["spec"]["replicatedJobs"] if j["name"] == "pathways-worker")
    pod = worker["template"]["spec"]["template"]["spec"]

    assert {"key": "tpuplane.dev/dedicated", "operator": "Equal", "value": "pw", "effect": "NoSchedule"} \
        in pod["tolerations"]
    assert worker["replicas"] == 2


def test_pathways_stack_waits_for_the_jobset_controller_and_builds_its_sidecar(plans):
    plan = plans["pathways"]
    [jobset] = plan.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    release = next(r for r in plan.of_type("kubernetes:helm.sh/v3:Release") if r.name == "jobset")

    assert release.urn in jobset.depends_on
    assert len(plan.of_type("docker-build:index:Image")) == 1
    assert plan.outputs["pathways_service"] == "pw-pathways-head-0-0.pw.pw.svc:29001"
    assert plan.outputs["pathways_instance_type"] == "tpuv6e:4x4"


@pytest.mark.parametrize("stack", STACKS)
def test_example_stack_manifests_are_valid(plans, stack):
    errors = [e for m in plans[stack].kubernetes_manifests() for e in manifest_errors(m)]
    assert errors == []


@pytest.mark.parametrize("stack", STACKS)
def test_example_stack_keeps_every_policy(plans, stack):
    assert check_plan(plans[stack]) == []


def test_pathways_stack_reaps_leaked_proxies_in_every_client_namespace(plans):
    cron_jobs = plans["pathways"].of_type("kubernetes:batch/v1:CronJob")

    assert sorted(c.inputs["metadata"]["namespace"] for c in cron_jobs) == ["evals", "research"]
