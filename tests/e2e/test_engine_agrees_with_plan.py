"""The offline plan agrees with the real engine: for the Kubernetes half of each example stack, the real Pulumi
engine (CLI, Python language host, Kubernetes provider built from the pinned modules) previews, applies, finds
nothing to change on a second preview, and destroys, against the sandbox's real API server with Kueue's and
JobSet's webhooks; and what it registered equals what `tpuplane plan` shows, URN for URN, input for input.

The sandbox applies the stack's Kubernetes half with Kueue and JobSet already installed (it runs them itself), so
the plan's Helm releases and the webhook gate that waits for them are the only resources of the half it does not
register. The fleet dashboard is no part of the half: it charts GKE's metrics and Managed Prometheus' collection,
whose PodMonitoring kind exists only on GKE, so the stack program adds it beside the half and the sandbox has none
of it. The Kubernetes provider sets no input of its own on these resources: the inputs must be equal, not close.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from conftest import REPO
from e2e.conftest import DEV, PATHWAYS, PROD
from tpuplane.components.offline import run_program_file
from tpuplane.sandbox.engine import Engine, Project, stack_project

EXAMPLE = REPO / "examples" / "existing_cluster"

# What `install_controllers=False` leaves out of BatchStack: the controllers' releases and the Job (with its
# ConfigMap, ServiceAccount and RBAC) that waits for Kueue's webhook after a Helm install.
CONTROLLER_INSTALLATION = {
    "kubernetes:helm.sh/v3:Release::kueue", "kubernetes:helm.sh/v3:Release::jobset",
    "kubernetes:batch/v1:Job::job-kueue-system-kueue-webhook-ready",
    "kubernetes:core/v1:ConfigMap::configmap-kueue-system-kueue-webhook-ready",
    "kubernetes:core/v1:ServiceAccount::serviceaccount-kueue-system-kueue-webhook-ready",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole::clusterrole-kueue-webhook-ready",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding::clusterrolebinding-kueue-webhook-ready",
}


GKE_ONLY = "tpuplane:index:FleetDashboard$"  # the type chain of the dashboard's children in their URNs


def offline_plan(stack: str) -> dict[str, dict]:
    """`tpuplane plan --format json` of the stack, by URN: its Kubernetes resources."""
    out = subprocess.run([str(Path(sys.executable).parent / "tpuplane"), "plan", "--stack", stack, "-f", "json"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return {r["urn"]: r for r in json.loads(out)["resources"] if r["type"].startswith("kubernetes:")}


def example_project() -> Project:
    """examples/existing_cluster as its README runs it, but on pools and controllers that exist (the sandbox's)."""
    name = yaml.safe_load((EXAMPLE / "Pulumi.yaml").read_text())["name"]
    config = yaml.safe_load((EXAMPLE / "Pulumi.example.yaml").read_text())["config"]
    return Project(name, EXAMPLE, "example", {**config, f"{name}:createNodePools": "false",
                                              f"{name}:installControllers": "false", f"{name}:grantAccess": "false"})


def example_offline_plan() -> dict[str, dict]:
    """The example's offline plan, with its example stack as it is (pools and controllers created)."""
    project = example_project()
    config = yaml.safe_load((EXAMPLE / "Pulumi.example.yaml").read_text())["config"]
    plan = run_program_file(EXAMPLE / "__main__.py", config, project=project.name, stack=project.stack)
    return {r["urn"]: r for r in plan.to_json()["resources"] if r["type"].startswith("kubernetes:")}


def engine_resources(deployment: dict) -> dict[str, dict]:
    """The engine's Kubernetes resources by URN (its own provider resource aside)."""
    return {r["urn"]: r for r in deployment["deployment"].get("resources", [])
            if r["type"].startswith("kubernetes:")}


def type_and_name(urn: str) -> str:
    qualified_type, name = urn.split("::")[2:4]
    return f"{qualified_type.rsplit('$', 1)[-1]}::{name}"


def on(stack_config: str, program: str) -> Any:
    return pytest.param(program, marks=pytest.mark.sandbox(stack_config, applied=False), id=program)


@pytest.fixture(params=[on(DEV, "dev"), on(PROD, "prod"), on(PATHWAYS, "pathways"),
                        on(DEV, "examples/existing_cluster")])
def program_on_sandbox(request, sandbox, sandboxes, tmp_path):
    """A sandbox of the stack (the example runs on the dev stack's) with nothing of it applied, the engine bound
    to it, the project to run and its offline plan."""
    example = request.param.startswith("examples/")
    project = example_project() if example else stack_project(sandbox)
    planned = example_offline_plan() if example else offline_plan(request.param)
    work = tmp_path / "pulumi" if example else Path(sandbox.directory) / "pulumi"
    yield sandbox, Engine(work, Path(sandbox.kubeconfig)), project, planned
    if not example:
        sandboxes.changed_half()  # the test applied and destroyed it with the sandbox's own engine state


def test_preview_up_preview_destroy_and_the_engine_registers_what_the_plan_shows(program_on_sandbox):
    state, engine, project, planned = program_on_sandbox
    engine.prepare(project)

    first = engine.preview(project)
    assert set(first["changeSummary"]) == {"create"}, first["changeSummary"]
    engine.up(project)
    second = engine.preview(project)
    assert set(second["changeSummary"]) == {"same"}, second["changeSummary"]

    registered = engine_resources(engine.export(project))
    on_gke_only = {u for u in planned if GKE_ONLY in u}
    assert {type_and_name(u) for u in set(planned) - set(registered) - on_gke_only} == CONTROLLER_INSTALLATION
    assert set(registered) - set(planned) == set()
    for urn, resource in registered.items():
        assert resource["inputs"] == planned[urn]["inputs"], urn

    engine.destroy(project)
    api = client.CustomObjectsApi(config.new_client_from_config(state.kubeconfig))
    assert api.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues")["items"] == []
    assert engine_resources(engine.export(project)) == {}
