"""A PR comment stays within GitHub's 65,536-character limit, whatever the size of the change: the summary, TPU
impact and cost always show; rows, the fleet and details are left out whole when they do not fit (never cut
mid-value), and a note at the top names what was folded. Sizes are asserted, never times (bench/ measures those)."""

from __future__ import annotations

import copy
import json
import re

import pytest
from markdown_it import MarkdownIt
from typer.testing import CliRunner

from plan_factory import cluster_queue, node_pool, plan
from tpuplane.cli.main import app
from tpuplane.infra.review.cost import load_prices
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.review.fold import GITHUB_COMMENT_MAX
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.plan_diff import diff_plans
from tpuplane.infra.review.plan_report import render_markdown as plan_markdown

POOLS = 800


def grown(pools: int, label: str) -> dict:
    """A plan of `pools` TPU node pools with 20 labels each, their values ending in `label`."""
    resources = [node_pool(f"train-{i}") for i in range(pools)]
    for pool in resources:
        pool["inputs"]["nodeConfig"]["labels"] = {f"label-{j}": f"{j}-{label}" for j in range(20)}
    return plan(*resources, cluster_queue())


@pytest.fixture(scope="module")
def big_diff():
    base, head = parse_plan(grown(POOLS, "before")), parse_plan(grown(POOLS, "after"))
    return diff_plans(base, head), diff_context(base, head, load_prices())


def comment(big_diff, **options) -> str:
    diff, context = big_diff
    return render(diff, "markdown", context, **options)


def test_a_diff_of_thousands_of_changes_stays_within_githubs_limit_and_says_what_it_folded(big_diff):
    text = comment(big_diff)

    assert len(text) <= GITHUB_COMMENT_MAX
    note = re.search(r"> Folded to stay within 65,536 characters \(GitHub takes a comment of at most 65,536\): "
                     r"(.*) not shown", text)
    assert note and "resource rows" in note[1] and "property details (800)" in note[1]
    assert text.index("> [!NOTE]") < text.index("#### TPU impact")  # read before anything else


@pytest.mark.parametrize("limit", [10_000, 30_000])
def test_a_diff_given_a_share_of_the_comment_keeps_to_it(big_diff, limit):
    assert len(comment(big_diff, max_length=limit)) <= limit


def test_a_folded_comment_is_still_well_formed_markdown(big_diff):
    """Parts are left out whole: every table row has its cells, every details block is closed."""
    text = comment(big_diff, max_length=20_000)
    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(text)

    assert html.count("<details>") == html.count("</details>")
    assert all(line.count(" | ") >= 3 for line in text.splitlines() if line.startswith("| `"))


def test_a_row_too_long_for_the_comment_is_left_out_whole_not_cut():
    huge = "x" * 70_000
    base, head = parse_plan(plan()), parse_plan(plan(node_pool(f"train-{huge}")))

    text = render(diff_plans(base, head), max_length=GITHUB_COMMENT_MAX)

    assert huge[:1000] not in text and "resource rows (1)" in text


def test_a_plan_page_of_thousands_of_resources_stays_within_githubs_limit():
    page = plan_markdown(parse_plan(grown(POOLS, "v")), load_prices())

    assert len(page) <= GITHUB_COMMENT_MAX and "resources' inputs" in page


def test_diff_command_max_length_bounds_the_comment(tmp_path):
    paths = [tmp_path / "base.json", tmp_path / "head.json"]
    for path, label in zip(paths, ("before", "after")):
        path.write_text(json.dumps(grown(300, label)))

    result = CliRunner().invoke(app, ["diff", *map(str, paths), "--max-length", "12000"])

    assert result.exit_code == 1 and len(result.stdout) <= 12_000 and "> [!NOTE]" in result.stdout


def test_a_small_diff_folds_nothing():
    base = plan(node_pool("train-0"))
    head = copy.deepcopy(base)
    head["resources"][0]["inputs"]["nodeConfig"]["labels"] = {"team": "a"}

    assert "[!NOTE]" not in render(diff_plans(parse_plan(base), parse_plan(head)))



@pytest.mark.parametrize("kind", ["add", "remove", "change"])
@pytest.mark.parametrize("count", [0, 1, 1000])
def test_a_details_part_is_never_smaller_than_the_room_it_is_said_to_need(kind, count):
    """The diff skips rendering a resource's details when less room is left than they need at the least: that
    least is never more than the smallest details there can be (empty names, paths and values), so skipping never
    leaves out a part that would have fit."""
    from tpuplane.infra.review.diff_report import _DETAILS_LEAST, _DETAILS_ROW_LEAST, _md_details
    from tpuplane.infra.review.plan_diff import Action, PropertyChange, ResourceChange

    smallest = PropertyChange(path="", kind=kind, before=None if kind == "add" else "",
                              after=None if kind == "remove" else "")
    change = ResourceChange(urn="", type="", name="", action=Action.UPDATE, properties=(smallest,) * count)

    rendered = sum(len(line) + 1 for line in _md_details(change))

    assert rendered >= _DETAILS_LEAST + _DETAILS_ROW_LEAST * count
