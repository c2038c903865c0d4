"""The schema other Pulumi languages get: Pulumi's own component analyzer and schema generator, run in process on
the components `pulumi package add` serves (components/__main__.py), exactly as the provider host does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from pulumi.provider.experimental.analyzer import Analyzer
from pulumi.provider.experimental.schema import generate_schema
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

import tpuplane.components as components
from tpuplane.components.__main__ import PACKAGE


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    result = Analyzer(PACKAGE).analyze(components.component_classes())
    return generate_schema(PACKAGE, "0.1.0", PACKAGE, result["component_definitions"], result["type_definitions"],
                           sorted(result["dependencies"], key=str)).to_json()


def properties(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(owner, name, definition) of every input, output and nested type property."""
    found = [(token, name, prop) for token, resource in schema["resources"].items()
             for kind in ("inputProperties", "properties") for name, prop in resource.get(kind, {}).items()]
    found += [(token, name, prop) for token, typ in schema["types"].items()
              for name, prop in typ.get("properties", {}).items()]
    return found


def test_schema_serves_every_public_component(schema):
    assert sorted(schema["resources"]) == sorted(f"tpuplane:index:{name}" for name in components.COMPONENTS)
    assert all(resource["isComponent"] for resource in schema["resources"].values())


def test_schema_documents_and_types_every_property(schema):
    undocumented = [(owner, name) for owner, name, prop in properties(schema) if not prop.get("description")]
    untyped = [(owner, name) for owner, name, prop in properties(schema) if not ("type" in prop or "$ref" in prop)]
    assert (undocumented, untyped) == ([], [])


def test_schema_declares_every_components_outputs(schema):
    assert all(resource.get("properties") for resource in schema["resources"].values())
    pool = schema["resources"]["tpuplane:index:TpuSlicePool"]["properties"]
    assert pool["nodePoolNames"]["type"] == "array"


def test_schema_plan_deciding_inputs_are_plain_and_resource_outputs_are_inputs(schema):
    """TPU type, slices and capacity decide the plan at preview: plain. The cluster's name and the node service
    account come from other resources: they accept Outputs."""
    pool = schema["resources"]["tpuplane:index:TpuSlicePool"]["inputProperties"]
    assert all(pool[name].get("plain") for name in ("tpuType", "slices", "capacity"))
    assert not any(pool[name].get("plain") for name in ("cluster", "serviceAccount"))
    service = schema["resources"]["tpuplane:index:SharedPathwaysService"]["inputProperties"]
    assert not any(service[name].get("plain") for name in ("nodeServiceAccount", "sidecarImage"))


def test_schema_required_inputs_are_the_args_without_defaults(schema):
    required = {token.rpartition(":")[2]: sorted(resource.get("requiredInputs", []))
                for token, resource in schema["resources"].items()}
    assert required["TpuSlicePool"] == ["cluster", "location", "project", "tpuType", "zone"]
    assert required["BatchStack"] == ["pools"]
    assert required["ProxyJanitor"] == ["image", "namespace"]


def test_schema_describes_pools_kueue_is_given_as_a_type(schema):
    pools = schema["resources"]["tpuplane:index:BatchStack"]["inputProperties"]["pools"]
    assert pools["items"]["$ref"] == "#/types/tpuplane:index:KueuePoolArgs"
    assert schema["types"]["tpuplane:index:KueuePoolArgs"]["required"] == ["name", "tpuType"]


def test_guide_yaml_program_uses_the_schema_as_generated(schema):
    """The Pulumi YAML example of the guide "your own program" names a served type, only its inputs, all the
    required ones, and an output it declares (the Pulumi CLI, which would run it, is not installed here)."""
    readme = (Path(__file__).resolve().parent.parent / "docs" / "guides" / "own-program.md").read_text()
    section = readme[readme.index("## From TypeScript, Go, C# or YAML"):]
    program = yaml.safe_load(section[section.index("```yaml") + len("```yaml"):section.index("```\n", 8)])
    [(name, resource)] = program["resources"].items()
    served = schema["resources"][resource["type"]]
    assert set(resource["properties"]) <= set(served["inputProperties"])
    assert set(served["requiredInputs"]) <= set(resource["properties"])
    [output] = program["outputs"].values()
    assert output.removeprefix("${").removesuffix("}").split(".") == [name, "nodePoolNames"]
    assert "nodePoolNames" in served["properties"]


def test_plugin_serves_the_schema_over_grpc_as_pulumi_package_add_asks_for_it(schema):
    """The plugin folder run as Pulumi runs a Python plugin (`python <folder> <engine address>`): a real gRPC
    server, asked for its schema by a real gRPC client. (The Pulumi CLI itself is not installed here.)"""
    folder = Path(components.__file__).resolve().parent
    server = subprocess.Popen([sys.executable, str(folder), "127.0.0.1:1"], stdout=subprocess.PIPE)
    try:
        port = int(server.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            reply = provider_pb2_grpc.ResourceProviderStub(channel).GetSchema(
                provider_pb2.GetSchemaRequest(version=0), timeout=60)
    finally:
        server.kill()
        server.wait()
    served = json.loads(reply.schema)
    assert served["name"] == PACKAGE
    assert served["resources"] == schema["resources"]
