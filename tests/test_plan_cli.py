"""Specification of `tpuplane plan`: the offline plan of a stack, as JSON, Markdown or a component tree.

The command runs the real program in stacks/ under Pulumi's mocks (GCP and Kubernetes cannot exist here).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import REPO, stack_file_config
from tpuplane.cli.main import app
from tpuplane.infra.review.plan_report import plain_text, render_table
from tpuplane.infra.review.plan import Plan, PlannedResource


def tpuplane(*args: str):
    """`tpuplane plan ...` against this repository, wherever pytest runs from."""
    return CliRunner().invoke(app, ["plan", "--project-dir", str(REPO), *args])


@pytest.fixture(scope="module")
def dev_json() -> str:
    result = tpuplane("--stack", "dev", "--format", "json")
    assert result.exit_code == 0, result.stderr
    return result.stdout


@pytest.fixture
def stack_file(tmp_path: Path):
    """Write a Pulumi.<name>.yaml outside the repository and return its path."""

    def write(name: str, config: dict) -> Path:
        path = tmp_path / f"Pulumi.{name}.yaml"
        path.write_text(yaml.safe_dump({"config": config}))
        return path

    return write


# --- JSON ------------------------------------------------------------------------------------------------


def test_plan_json_has_project_stack_and_resources(dev_json):
    doc = json.loads(dev_json)

    assert (sorted(doc), doc["project"], doc["stack"]) == (["project", "resources", "stack"], "tpuplane", "dev")
    assert {tuple(sorted(r)) for r in doc["resources"]} == {  # aliases: the URNs a resource had before
        ("dependsOn", "inputs", "name", "parent", "type", "urn"),
        ("aliases", "dependsOn", "inputs", "name", "parent", "type", "urn")}


def test_plan_json_lists_resources_by_type_token(dev_json):
    types = {r["type"] for r in json.loads(dev_json)["resources"]}

    assert {"tpuplane:index:TpuCluster", "tpuplane:index:TpuSlicePool", "gcp:container/cluster:Cluster",
            "gcp:container/nodePool:NodePool", "gcp:serviceaccount/account:Account"} <= types


def test_plan_json_keeps_integral_numbers_as_integers(dev_json):
    custom = {(r["type"], r["name"]): r["inputs"] for r in json.loads(dev_json)["resources"]}
    pool = custom["gcp:container/nodePool:NodePool", "train-0"]

    assert '"maxNodeCount": 4,' in dev_json  # dev's slices scale from zero
    assert [type(pool["autoscaling"]["maxNodeCount"]), type(pool["maxPodsPerNode"])] == [int, int]
    assert type(custom["gcp:container/cluster:Cluster", "fleet-dev"]["initialNodeCount"]) is int


def test_plan_json_is_the_same_on_every_run(dev_json):
    assert tpuplane("--stack", "dev", "--format", "json").stdout == dev_json


def test_plan_json_lists_resources_in_urn_order(dev_json):
    urns = [r["urn"] for r in json.loads(dev_json)["resources"]]

    assert urns == sorted(urns)


def test_plan_out_writes_the_plan_to_a_file_instead_of_stdout(tmp_path, dev_json):
    out = tmp_path / "plan.json"

    result = tpuplane("--stack", "dev", "--format", "json", "--out", str(out))

    assert (result.exit_code, result.stdout) == (0, "")
    assert out.read_text() == dev_json


# --- --config FILE -------------------------------------------------------------------------------------


def test_plan_config_file_names_the_stack_after_the_file(stack_file):
    path = stack_file("staging", stack_file_config("dev"))

    result = tpuplane("--config", str(path), "--format", "json")

    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["stack"] == "staging"
    assert sorted(r["name"] for r in doc["resources"] if r["type"] == "tpuplane:index:TpuSlicePool") == ["train"]


def test_plan_config_file_qualifies_project_keys_as_pulumi_does(stack_file):
    config = {k.removeprefix("tpuplane:"): v for k, v in stack_file_config("dev").items()}  # `cluster:` etc.
    path = stack_file("short", config)

    result = tpuplane("--config", str(path), "--format", "json")

    assert result.exit_code == 0, result.stderr
    assert "train-1" in {r["name"] for r in json.loads(result.stdout)["resources"]}


# --- bad input -----------------------------------------------------------------------------------------


def test_plan_refuses_a_key_given_bare_and_qualified_naming_both(stack_file):
    """Pulumi reads `cluster` and `tpuplane:cluster` as one key and silently keeps one of them."""
    config = {**stack_file_config("dev"), "cluster": {"name": "other", "zone": "us-east5-b"}}

    result = tpuplane("--config", str(stack_file("twice", config)))

    assert result.exit_code == 2
    assert all(f"`{key}`" in result.stderr for key in ("cluster", "tpuplane:cluster"))
    assert "are both tpuplane:cluster; keep one" in result.stderr
    assert result.stdout == ""


def test_plan_invalid_config_exits_2_with_the_problem_on_stderr(stack_file):
    config = stack_file_config("dev")
    config["tpuplane:tpuPools"][0]["slices"] = 0

    result = tpuplane("--config", str(stack_file("bad", config)))

    assert result.exit_code == 2
    assert "tpuplane:tpuPools[0].slices: got 0" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""


def test_plan_missing_stack_file_exits_2_naming_the_file():
    result = tpuplane("--stack", "no-such-stack")

    assert result.exit_code == 2
    assert "Pulumi.no-such-stack.yaml" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_stack_name_with_a_line_break_stays_on_the_error_line_in_the_hint_too():
    result = tpuplane("--stack", "evil\nerror: forged")

    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Pulumi.evil\\nerror: forged.yaml" in result.stderr


def test_plan_invalid_yaml_exits_2(tmp_path):
    path = tmp_path / "Pulumi.broken.yaml"
    path.write_text("config: [unclosed\n")

    result = tpuplane("--config", str(path))

    assert result.exit_code == 2
    assert "invalid YAML" in result.stderr


# --- Markdown and table ------------------------------------------------------------------------------------


def test_plan_markdown_lists_every_resource_and_its_inputs():
    result = tpuplane("--stack", "dev", "--format", "markdown")

    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("### Plan of `tpuplane/dev`\n")
    assert "| `train` | `NodePool` | `train-1` | machine type: ct6e-standard-4t; topology: 4x4;" in result.stdout
    assert "<code>NodePool</code> <b>train-1</b>" in result.stdout
    assert "consumeReservationType: NO_RESERVATION" in result.stdout


def test_plan_table_shows_the_component_tree():
    lines = tpuplane("--stack", "dev", "--details").stdout.splitlines()

    def depth(fragment: str) -> int:
        (line,) = [ln for ln in lines if ln.strip(" │├└─").startswith(fragment)]
        return line.index(fragment)

    assert lines[0].startswith("tpuplane/dev: ")
    assert depth("TpuCluster fleet-dev") < depth("TpuSlicePool train") < depth("NodePool train-0 ")
    assert any(ln.strip(" │├└─").startswith('placementPolicy.type = "COMPACT"') for ln in lines)


def _resource(type_: str, name: str, parent: PlannedResource | None, custom: bool) -> PlannedResource:
    """A registration as Pulumi's mock monitor names it: the parent's own type qualifies the child's."""
    qualifier = parent.urn.split("::")[2].split("$")[-1] if parent else "pulumi:pulumi:Stack"
    urn = f"urn:pulumi:dev::tpuplane::{qualifier}${type_}::{name}"
    return PlannedResource(urn=urn, type=type_, name=name, parent=parent.urn if parent else "", inputs={},
                           custom=custom)


def test_render_table_nests_children_whatever_the_type_names():
    cluster = _resource("tpuplane:index:TpuCluster", "fleet", None, custom=False)
    batch = _resource("tpuplane:index:Batch", "batch", cluster, custom=False)
    queue = _resource("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue", "team-a", batch, custom=True)
    plan = Plan(project="tpuplane", stack="dev", resources=sorted([cluster, batch, queue], key=lambda r: r.urn))

    tree = render_table(plan)

    assert [child.label.plain for child in tree.children] == ["TpuCluster fleet"]
    assert [grandchild.label.plain for grandchild in tree.children[0].children] == ["Batch batch"]


def test_plan_rejects_a_config_file_that_is_not_text(tmp_path):
    path = tmp_path / "Pulumi.bin.yaml"
    path.write_bytes(b"\xff\xfe\x00binary")

    result = tpuplane("--config", str(path))

    assert result.exit_code == 2
    assert "a UTF-8 text file" in result.stderr and "Traceback" not in result.stderr


def test_plan_reports_an_out_file_it_cannot_write(tmp_path):
    result = tpuplane("--stack", "dev", "--format", "json", "--out", str(tmp_path / "missing" / "plan.json"))

    assert result.exit_code == 2
    assert "--out: cannot write" in result.stderr


def test_plan_urns_qualify_children_by_every_ancestor_as_the_engine_does(dev_json):
    urns = {r["name"]: r["urn"] for r in json.loads(dev_json)["resources"]}

    assert urns["fleet-dev"] == "urn:pulumi:dev::tpuplane::tpuplane:index:TpuCluster::fleet-dev"
    assert urns["train-0"] == ("urn:pulumi:dev::tpuplane::tpuplane:index:TpuCluster$tpuplane:index:TpuSlicePool"
                               "$gcp:container/nodePool:NodePool::train-0")


# --- the fleet first ---------------------------------------------------------------------------------------


def test_plan_table_opens_with_the_fleet_summary():
    lines = tpuplane("--stack", "dev").stdout.splitlines()

    assert lines[2] == "TPU pool groups"
    assert lines[4].split()[:8] == ["train", "v6e-16", "ct6e-standard-4t", "spot", "-", "0-2", "0-8", "0-32"]
    assert any(line.startswith("Estimated at list prices of ") for line in lines[:12])


def test_plan_table_lists_kueues_priority_classes_as_resources():
    out = tpuplane("--stack", "dev").stdout

    assert "WorkloadPriorityClass workloadpriorityclass-high" in out


def test_plan_table_details_prints_every_property():
    brief, full = tpuplane("--stack", "dev").stdout, tpuplane("--stack", "dev", "--details").stdout

    assert "placementPolicy.type" not in brief and 'placementPolicy.type = "COMPACT"' in full


def test_plan_markdown_opens_with_the_summary_and_a_mermaid_diagram():
    out = tpuplane("--stack", "dev", "--format", "markdown").stdout

    assert out.index("#### TPU fleet") < out.index("```mermaid") < out.index("#### Resources by component")
    assert "| `train` | v6e-16 | ct6e-standard-4t | spot | - | 0-2 | 0-8 | 0-32 |" in out
    assert "| `batch` | `WorkloadPriorityClass` | `workloadpriorityclass-very-low` |" in out


def test_plan_stack_option_names_the_stack_of_a_config_file(stack_file):
    path = stack_file("edited", stack_file_config("dev"))

    result = tpuplane("--stack", "dev", "--config", str(path), "--format", "json")

    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["stack"] == "dev"


def test_plan_unknown_stack_lists_the_known_ones():
    result = tpuplane("--stack", "fleet")

    assert result.exit_code == 2
    assert "one of: dev, pathways, prod" in result.stderr


def test_plan_html_writes_one_page_to_out(tmp_path):
    out = tmp_path / "fleet.html"

    result = tpuplane("--stack", "dev", "--format", "html", "--out", str(out))

    assert result.exit_code == 0, result.stderr
    assert out.read_text().startswith("<!DOCTYPE html>") and result.stdout == ""


def test_plan_prices_file_changes_the_estimate_and_its_date(tmp_path):
    prices = tmp_path / "prices.yaml"
    prices.write_text("date: '2031-02-03'\nchip_hour: {v6e: {spot: 1.0}}\n")

    out = tpuplane("--stack", "dev", "--prices", str(prices)).stdout

    assert "$23,360" in out and "list prices of 2031-02-03" in out


def test_plan_table_is_coloured_on_a_terminal_and_plain_when_piped():
    coloured = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO)], env={"FORCE_COLOR": "1"}).stdout
    piped = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO)], env={"FORCE_COLOR": None}).stdout

    assert "\x1b[" in coloured and "TPU pool groups" in coloured
    assert "\x1b[" not in piped


def test_plan_table_wraps_long_values_instead_of_cutting_them():
    value = "q" * 300 + "END"
    res = PlannedResource(urn="urn:pulumi:dev::tpuplane::kubernetes:core/v1:ConfigMap::cm",
                          type="kubernetes:core/v1:ConfigMap", name="cm", parent="", inputs={"data": {"config.yaml": value}})

    text = plain_text(render_table(Plan(project="tpuplane", stack="dev", resources=[res]), details=True))

    assert max(len(line) for line in text.splitlines()) <= 160
    assert value in re.sub(r"\n[ │├└─]*", "", text)


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_plan_never_cuts_a_key_property_short(fmt):
    """A ClusterQueue's quotas run past one line: they wrap, whole (`memory=5327128Mi`, not `memory=532712…`)."""
    result = tpuplane("--stack", "dev", "--format", fmt)

    assert result.exit_code == 0, result.stderr
    assert "memory=5327128Mi" in result.stdout and "…" not in result.stdout
