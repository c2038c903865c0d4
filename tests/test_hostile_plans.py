"""A plan file is untrusted input (a PR writes it): whatever any field of it holds, every report of it renders, or
reading it refuses it with a ConfigError naming the field. Never a traceback, never exit status 1 for bad input
(which CI would read as "changes")."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.cost import load_prices
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.plan_diff import diff_plans
from tpuplane.infra.review.plan_report import render_plan
from tpuplane.infra.review.report_format import DIFF_FORMATS, PLAN_FORMATS

Path = tuple[str | int, ...]


@pytest.fixture(scope="module")
def dev_plan() -> dict[str, Any]:
    from tpuplane.components.offline import run_program_file
    from conftest import stack_file_config

    return run_program_file(REPO / "stacks" / "__main__.py", stack_file_config("dev"), project="tpuplane",
                            stack="dev").to_json()


def paths(value: Any, at: Path = ()) -> list[Path]:
    """Every place in a JSON document that holds a value."""
    found = [at] if at else []
    if isinstance(value, dict):
        found += [p for k, v in value.items() for p in paths(v, (*at, k))]
    elif isinstance(value, list):
        found += [p for i, v in enumerate(value) for p in paths(v, (*at, i))]
    return found


def replaced(doc: Any, at: Path, value: Any) -> Any:
    out = copy.deepcopy(doc)
    target = out
    for key in at[:-1]:
        target = target[key]
    target[at[-1]] = value
    return out


def review(base_doc: Any, head_doc: Any) -> list[str]:
    """What `tpuplane diff` and the plan reports do with two plan files: every format rendered."""
    base, head = parse_plan(base_doc, "base plan"), parse_plan(head_doc, "head plan")
    diff = diff_plans(base, head)
    prices = load_prices()
    context = diff_context(base.redacted(), head.redacted(), prices)
    return ([render(diff, f, context) for f in DIFF_FORMATS]
            + [render_plan(head.redacted(), f, prices) for f in PLAN_FORMATS])


HOSTILE_VALUES = st.sampled_from([None, True, 0, -1, 1.5, 10**30, 2**63, -(2**63) - 1, "", "x", "[secret]", [], [1],
                                  {}, {"a": 1}, [{}], {"4dabf18193072939515e22adb298388d": 1, "value": "x"}])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), value=HOSTILE_VALUES)
def test_any_value_anywhere_in_a_plan_file_renders_or_is_refused_by_path(dev_plan, data, value):
    at = data.draw(st.sampled_from(paths(dev_plan)))
    head = replaced(dev_plan, at, value)

    try:
        review(dev_plan, json.loads(json.dumps(head)))
    except ConfigError as error:
        assert all(p.path.startswith("head plan:") for p in error.problems), str(error)


@pytest.mark.parametrize("at, value, path", [
    (("nodeConfig",), "x", "nodeConfig"),
    (("autoscaling",), [1], "autoscaling"),
    (("nodeConfig", "labels"), ["x"], "nodeConfig.labels"),
    (("nodeCount",), 10**30, "nodeCount"),
    (("nodeCount",), True, "nodeCount"),
    (("nodeConfig", "machineType"), 5, "nodeConfig.machineType"),
    (("nodeConfig", "taints"), {"key": "x"}, "nodeConfig.taints"),
])
def test_a_node_pool_input_of_the_wrong_type_is_named_by_its_path(dev_plan, at, value, path):
    index, pool = next((i, r) for i, r in enumerate(dev_plan["resources"])
                       if r["type"] == "gcp:container/nodePool:NodePool" and "autoscaling" in r["inputs"])
    head = replaced(dev_plan, ("resources", index, "inputs", *at), value)

    with pytest.raises(ConfigError) as refused:
        review(dev_plan, head)

    assert [p.path for p in refused.value.problems] == [f"head plan: resources[{index}].inputs.{path}"]


def test_a_cluster_queue_spec_that_is_not_a_mapping_is_named_by_its_path(dev_plan):
    index = next(i for i, r in enumerate(dev_plan["resources"]) if r["type"].endswith(":ClusterQueue"))

    with pytest.raises(ConfigError) as refused:
        review(dev_plan, replaced(dev_plan, ("resources", index, "inputs", "spec"), [1]))

    [problem] = refused.value.problems
    assert (problem.path, problem.allowed) == (f"head plan: resources[{index}].inputs.spec", "a mapping")


@pytest.mark.parametrize("value", [[1], {"a": 1}, True, 2**63, -(2**63), 1e19, float("nan")])
def test_a_quota_that_is_not_a_quantity_is_one_problem_at_its_field_in_our_words(dev_plan, value):
    """A quantity may be text or a number: a wrong one is one problem, not one per member of that union of types."""
    index = next(i for i, r in enumerate(dev_plan["resources"]) if r["type"].endswith(":ClusterQueue"))
    at = ("resources", index, "inputs", "spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota")

    with pytest.raises(ConfigError) as refused:
        review(dev_plan, replaced(dev_plan, at, value))

    [problem] = refused.value.problems
    assert problem.path == (f"head plan: resources[{index}].inputs.spec.resourceGroups[0].flavors[0].resources[0]"
                            ".nominalQuota")
    assert problem.allowed == "a Kubernetes quantity such as 4, 500m or 16Gi, below 2^63 (8Ei)"


def test_a_redacted_value_where_a_mapping_is_read_reads_as_absent(dev_plan):
    """A plan file holds `[secret]` where the engine marked a value secret, whatever its shape."""
    index = next(i for i, r in enumerate(dev_plan["resources"]) if r["type"] == "gcp:container/nodePool:NodePool")

    reports = review(dev_plan, replaced(dev_plan, ("resources", index, "inputs", "nodeConfig"), "[secret]"))

    assert all(reports)


def test_resources_that_are_their_own_ancestors_are_refused(dev_plan):
    """A parent loop would walk the component tree forever. Only the loop's members are named: the resources below
    it are not their own ancestors."""
    head = copy.deepcopy(dev_plan)
    resources = head["resources"]
    parents = {r.get("parent") for r in resources}
    a = next(i for i, r in enumerate(resources) if r["urn"] in parents and r.get("parent"))  # a component
    b = next(i for i, r in enumerate(resources) if r["urn"] not in parents)  # a leaf
    resources[a]["parent"], resources[b]["parent"] = resources[b]["urn"], resources[a]["urn"]

    with pytest.raises(ConfigError) as refused:
        review(dev_plan, head)

    paths = {p.path for p in refused.value.problems}
    assert paths == {f"head plan: resources[{a}].parent", f"head plan: resources[{b}].parent"}


def test_a_secret_entry_of_a_list_the_summary_reads_is_left_out(dev_plan):
    """The engine marks one quota entry secret: the redacted plan holds `[secret]` where a mapping was."""
    index = next(i for i, r in enumerate(dev_plan["resources"]) if r["type"].endswith(":ClusterQueue"))
    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": {"name": "cpu"}}
    head = replaced(dev_plan, ("resources", index, "inputs", "spec", "resourceGroups", 0, "flavors", 0, "resources",
                               0), secret)

    assert all(review(dev_plan, head))
