"""A secret planted anywhere never comes out: in any field of a plan, in every format of the plan and of the diff, and
in the error any command prints for input that holds one. The secret comes in every shape redaction knows (header
schemes, multi-word values, URL userinfo with and without a scheme, flags, env entries, tokens), always whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import REPO, STACKS
from plan_factory import cluster_queue, node_pool, plan
from tpuplane.cli.main import app
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.cost import load_prices
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.plan_diff import diff_plans
from tpuplane.infra.review.plan_report import render_plan
from tpuplane.infra.review.report_format import DIFF_FORMATS, PLAN_FORMATS

MARK = "Zq9SECRETPARTx7"
SHAPES = [
    f"Authorization: Bearer {MARK}", f"Authorization: Basic {MARK}", f"Proxy-Authorization: token {MARK}",
    f'curl -H "Authorization: Bearer {MARK}" https://x.invalid', f"Bearer {MARK}",
    f"passphrase: correct horse {MARK}", f"password = '{MARK} and more'",
    f"https://user:{MARK}@host.invalid/simple", f"//user:{MARK}@host.invalid/simple",
    f"user:{MARK}@pypi.example.com/simple", f"https://host.invalid/x?token={MARK}&a=1",
    f"--password={MARK}", f"DB_PASSWORD={MARK}", f"ghp_{MARK}abcdefghij0123456789",
    f"{{'name': 'API_TOKEN', 'value': '{MARK} x'}}",
    f"user:{MARK}@host/p", f"--proxy user:{MARK}@proxy:3128", f"admin:{MARK}@host.com",
    f"Cookie: session={MARK}", f"Set-Cookie: session={MARK}; Path=/", f"secret: |\n  line\n  {MARK}",
]
shapes = st.sampled_from(SHAPES)


def leaf_paths(value: Any, at: tuple = ()) -> list[tuple]:
    """Every place holding text (a value), and every mapping (where a key can be planted)."""
    if isinstance(value, dict):
        return [at, *(p for k, v in value.items() for p in leaf_paths(v, (*at, k)))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in leaf_paths(v, (*at, i))]
    return [at] if isinstance(value, str) else []


def planted(doc: dict, at: tuple, secret: str) -> dict:
    """`doc` with `secret` added to the text at `at`, or as a new key of the mapping there."""
    out = json.loads(json.dumps(doc))
    parent = out
    for key in at[:-1]:
        parent = parent[key]
    target = parent[at[-1]] if at else out
    if isinstance(target, dict):
        target[secret] = "x"
    else:
        parent[at[-1]] = f"{target} {secret}"
    return out


BASE = plan(node_pool("train-0"), node_pool("train-1"), cluster_queue())


@pytest.fixture(scope="module")
def pathways_plan() -> dict:
    """The pathways stack's plan: pools, Kueue objects, the Pathways service and its sidecar image."""
    from tpuplane.components.offline import run_program_file
    from conftest import stack_file_config

    return run_program_file(REPO / "stacks" / "__main__.py", stack_file_config("pathways"), project="tpuplane",
                            stack="pathways").to_json()


def every_report(base_doc: dict, head_doc: dict) -> str:
    """Every plan and diff format of the two documents, or the error reading them gives."""
    try:
        base, head = parse_plan(base_doc, "base plan"), parse_plan(head_doc, "head plan")
    except ConfigError as error:
        return str(error)
    redacted = base.redacted(), head.redacted()
    prices = load_prices()
    context = diff_context(*redacted, prices)
    diff = diff_plans(base, head, redacted)
    return "".join([*(render(diff, f, context) for f in DIFF_FORMATS),
                    *(render_plan(redacted[1], f, prices, details=True) for f in PLAN_FORMATS)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), secret=shapes)
def test_a_secret_planted_in_any_field_of_a_plan_never_shows_in_any_format(pathways_plan, data, secret):
    at = data.draw(st.sampled_from(leaf_paths(pathways_plan)))

    assert MARK not in every_report(pathways_plan, planted(pathways_plan, at, secret))


# Error paths: each command given input whose bad value holds the secret. `{s}` is where it goes.
JOB = "jobs:\n- tpuType: v6e-16\n  image: img:1\n  command: python train.py\n"
ERROR_CASES: dict[str, tuple[dict[str, str], list[str]]] = {
    "plan file wrong type": ({"a.json": json.dumps(BASE), "b.json": json.dumps(BASE).replace(
        '"nodeCount": 4', '"nodeCount": "{s}"', 1)}, ["diff", "{f}/a.json", "{f}/b.json"]),
    "plan file bad shape": ({"a.json": '{"project": "{s}", "stack": 1, "resources": []}', "b.json": "{}"},
                            ["diff", "{f}/a.json", "{f}/b.json"]),
    "workload name": ({"w.yaml": 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: "{s}"}\nspec: {}\n'},
                      ["workload", "check", "--project-dir", str(REPO), "{f}/w.yaml"]),
    "workload labels": ({"w.yaml": 'apiVersion: batch/v1\nkind: Job\nmetadata: {name: x, labels: {a: ["{s}"]}}\n'
                                   "spec: {}\n"}, ["workload", "check", "--project-dir", str(REPO), "{f}/w.yaml"]),
    "experiment job": ({"e.yaml": 'name: s\njobs:\n  tpuType: v6e-16\n  image: img:1\n  command: "{s}"\n'},
                       ["experiment", "render", "{f}/e.yaml"]),
    "experiment grid value": ({"e.yaml": 'name: s\ngrid:\n  lr: [{x: "{s}"}]\n' + JOB},
                              ["experiment", "render", "{f}/e.yaml"]),
    "price file rate": ({"p.yaml": 'chip_hour: {v6e: {spot: "{s}"}}\n'}, ["diff", "{f}/p.yaml", "{f}/p.yaml",
                                                                          "--prices", "{f}/p.yaml"]),
    "price file generation": ({"a.json": json.dumps(BASE), "p.yaml": 'chip_hour: {"{s}": {spot: 1.0}}\n'},
                              ["diff", "{f}/a.json", "{f}/a.json", "--prices", "{f}/p.yaml"]),
    "sidecar run import": ({"tpuplane_secret_raises.py": "raise RuntimeError('''{s}''')\n"},
                           ["sidecar", "run", "tpuplane_secret_raises:f"]),
    "workload render namespace": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1",
                                       "--command", "x", "--namespace", "{s}"]),
}


def run_with_secret(folder: Path, files: dict[str, str], argv: list[str], secret: str):
    json_safe = json.dumps(secret)[1:-1]  # inside JSON and double-quoted YAML strings
    for name, text in files.items():
        (folder / name).write_text(text.replace("{s}", json_safe))
    args = [arg.replace("{f}", str(folder)).replace("{s}", secret) for arg in argv]
    return CliRunner().invoke(app, args)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(sorted(ERROR_CASES)), secret=shapes)
def test_a_secret_in_bad_input_never_shows_in_the_error(tmp_path, monkeypatch, case, secret):
    monkeypatch.chdir(tmp_path)
    result = run_with_secret(tmp_path, *ERROR_CASES[case], secret)

    assert result.exit_code == 2, (case, result.output)
    assert MARK not in result.output


@pytest.mark.parametrize("secret", SHAPES[:4])
def test_a_secret_in_a_stack_configs_bad_value_never_shows_in_the_plan_error(tmp_path, secret):
    config = tmp_path / "Pulumi.s.yaml"
    stack = (STACKS / "Pulumi.dev.yaml").read_text()
    config.write_text(stack.replace("maxSlices: 2", f"maxSlices: {json.dumps(secret)}"))

    result = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO), "--config", str(config)])

    assert result.exit_code == 2 and MARK not in result.output
