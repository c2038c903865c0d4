"""Other Pulumi languages use tpuplane's components, for real: a Pulumi YAML program (the YAML language host built
from github.com/pulumi/pulumi-yaml v1.25.0, the newest the Go module proxy serves) declares tpuplane's BatchStack,
and the real engine previews and applies it against the sandbox through the components' plugin command
`pulumi-resource-tpuplane` (installed with tpuplane; it serves the components from that environment).

`pulumi package add` of the plugin reads the components' schema and generates the package's SDK; its last step,
linking the package into the program, asks the language host for `Link`, which pulumi-yaml v1.25.0 does not
implement. The program therefore names the package in its own Pulumi.yaml `packages:`, which is what that step
would write.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from kubernetes import client, config

from e2e.conftest import DEV
from tpuplane.sandbox.engine import Engine, Project

PLUGIN = Path(sys.executable).parent / "pulumi-resource-tpuplane"
LINK_GAP = "linking package: method Link not implemented"


def yaml_program(kubeconfig: str) -> Project:
    manifest = {
        "name": "yaml-batch", "runtime": "yaml",
        "packages": {"tpuplane": str(PLUGIN.parent)},
        "resources": {
            "sandbox": {"type": "pulumi:providers:kubernetes",
                        "properties": {"kubeconfig": Path(kubeconfig).read_text()}},
            "batch": {"type": "tpuplane:index:BatchStack",
                      "properties": {"pools": [{"name": "train", "tpuType": "v6e-16", "slices": 2,
                                                "capacity": "spot"}],
                                     "teams": [{"name": "research", "share": 0.5},
                                               {"name": "serving", "share": 0.5, "priority": "high"}],
                                     "installControllers": False},
                      "options": {"providers": ["${sandbox}"]}},
        },
        "outputs": {"localQueues": "${batch.localQueues}"},
    }
    return Project("yaml-batch", None, "dev", {}, manifest=manifest)


pytestmark = pytest.mark.sandbox(DEV, applied=False)  # its own BatchStack: the stack's would clash


@pytest.fixture
def engine_and_program(sandbox, tmp_path):
    state = sandbox
    program = yaml_program(state.kubeconfig)
    engine = Engine(tmp_path / "pulumi", Path(state.kubeconfig))
    yield engine, program, state
    engine.run(program, "destroy", "--yes", "--skip-preview", check=False)


def test_package_add_reads_the_components_schema_and_generates_the_sdk(engine_and_program):
    engine, program, _ = engine_and_program
    engine.prepare(program)
    added = engine.run(program, "package", "add", str(PLUGIN), check=False)
    output = added.stdout + added.stderr
    assert "Successfully generated an SDK for the tpuplane package" in output, output
    assert added.returncode == 0 or LINK_GAP in output, output  # see the module docstring
    shutil.rmtree(engine.project_dir(program) / "sdks", ignore_errors=True)


def test_a_yaml_program_previews_and_applies_batch_stack(engine_and_program):
    engine, program, state = engine_and_program
    engine.prepare(program)

    created = engine.preview(program)["changeSummary"]
    assert set(created) == {"create"}, created
    engine.up(program)
    assert engine.preview(program)["changeSummary"] == {"same": created["create"]}

    queues = client.CustomObjectsApi(config.new_client_from_config(state.kubeconfig)).list_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", "research", "localqueues")["items"]
    assert [q["spec"]["clusterQueue"] for q in queues] == ["research"]
