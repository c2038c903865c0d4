"""The guide "Use the components in your own program": examples/existing_cluster/__main__.py, run as `pulumi up`
would run it, under Pulumi's mocks (GCP and the existing cluster cannot exist here), with its example stack."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tpuplane.components.offline import run_program_file
from tpuplane.infra.review.plan import Plan

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "existing_cluster"
GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guides" / "own-program.md"


@pytest.fixture(scope="module")
def plan() -> Plan:
    project = yaml.safe_load((EXAMPLE / "Pulumi.yaml").read_text())["name"]
    config = yaml.safe_load((EXAMPLE / "Pulumi.example.yaml").read_text())["config"]
    return run_program_file(EXAMPLE / "__main__.py", config, project=project, stack="example")


def test_example_adds_two_slice_groups_to_the_existing_cluster(plan):
    pools = plan.of_type("gcp:container/nodePool:NodePool")
    assert sorted(p.name for p in pools) == ["serve-0", "serve-1", "train-0", "train-1", "train-2", "train-3"]
    assert {(p.inputs["cluster"], p.inputs["location"]) for p in pools} == {("ml-prod", "us-east5")}
    assert {p.inputs["nodeConfig"]["serviceAccount"] for p in pools} == {"ml-nodes@acme-ml.iam.gserviceaccount.com"}


def test_example_creates_no_cluster_and_no_node_identity(plan):
    assert not plan.of_type("gcp:container/cluster:Cluster")
    assert not plan.of_type("gcp:serviceaccount/account:Account")


def test_example_queues_split_each_groups_slices_between_the_teams(plan):
    quotas = {}
    for cq in plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"):
        for flavor in cq.inputs["spec"]["resourceGroups"][0]["flavors"]:
            tpu = next(r for r in flavor["resources"] if r["name"] == "google.com/tpu")
            quotas[(cq.inputs["metadata"]["name"], flavor["name"])] = tpu["nominalQuota"]
    assert quotas[("research", "tpu-v6e-slice-4x4-spot")] == quotas[("serving", "tpu-v6e-slice-4x4-spot")] == "32"
    assert quotas[("research", "tpu-v6e-slice-2x4")] == quotas[("serving", "tpu-v6e-slice-2x4")] == "8"
    assert plan.outputs["local_queues"] == {"research": "research", "serving": "serving"}


def test_example_controllers_run_on_the_clusters_own_cpu_pool(plan):
    selector = {"cloud.google.com/gke-nodepool": "system"}
    assert plan.named("kueue").inputs["values"]["controllerManager"]["nodeSelector"] == selector
    assert plan.named("resourceflavor-cpu").inputs["spec"]["nodeLabels"] == selector


def test_the_guide_shows_the_example_program_as_it_runs():
    program = (EXAMPLE / "__main__.py").read_text()
    body = program[program.index("import pulumi"):]
    assert body in GUIDE.read_text()
