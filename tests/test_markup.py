"""No value adds structure to a report: a plan and a diff whose every string holds a hostile payload render, in every
format, with the structure of the same plan and diff holding a benign one. Markdown is read back with markdown-it-py
(CommonMark with GFM tables and strikethrough, raw HTML on, as GitHub reads a PR comment): the token stream and the
HTML it renders have the same shape. The Mermaid diagrams are parsed by Mermaid's own parser (the npm package, in
headless Chromium): they parse, with the same nodes and edges."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from conftest import REPO, stack_file_config
from tpuplane.infra.review.cost import load_prices
from tpuplane.infra.review.diff_report import render as render_diff
from tpuplane.infra.review.impact import diff_context
from tpuplane.infra.review.markup import html_text, md_code, md_fence, md_text, mermaid_text, visible
from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.plan_diff import diff_plans
from tpuplane.infra.review.plan_report import render_plan
from tpuplane.infra.review.report_format import DIFF_FORMATS, PLAN_FORMATS, ReportFormat

# What an attacker puts in a value: each breaks one context if it is not escaped for it.
PAYLOADS = {
    "fence and heading": "US\n```\n# HEADING\n<!--",
    "summary and details": "</summary></details><!--",
    "table row": "| a | b |\n|---|---|\n| c | d |",
    "html": "<script>alert(1)</script><img src=x onerror=alert(1)><b>bold</b>&amp;",
    "inline markup": "**b** _i_ ~~s~~ [l](https://x.invalid) ![i](x.png) `c` $x$ \\[e] #1 @someone",
    "long backtick runs": "````` ``` ` ~~~",
    "mermaid": '"] --> evil["x"]\n  click evil "https://x.invalid"\n%%{init: {"theme": "dark"}}%%\nend\n  subgraph',
    "controls": "a\r\nb\u2028c\u2029d\x1b[31me\u202ef\x00g\tz",
    "blank lines": "x\n\n\n# H\n\n- item\n\n> quote",
}


def benign(payload: str) -> str:
    """A harmless value as long as the payload shows, with its spaces (terminal tables wrap the same) and the
    separators that readers split names on (`:` of a type token, `/` of a path, `=` of an argument)."""
    return re.sub(r"[^\s:/=,.]", "x", visible(payload))


def suffixes(payload: str) -> tuple[str, str]:
    """(benign, hostile) suffixes; both start with a letter, so names sort the same way (a diff lists resources
    in URN order)."""
    return "z" + benign(payload), "z" + payload


UNBOUNDED = 10**9  # no folding: the structure compared is the whole report's (folding is tested on its own)
# Input keys whose values the summary reads as catalog facts or enums: kept in the "semantic" variant, so the pool
# groups, flavors and queues it draws are there to hold the hostile names around them.
PARSED_KEYS = {"type", "machineType", "tpuTopology", "consumeReservationType", "apiVersion", "kind", "nodeLabels"}


def with_suffix(value: Any, suffix: str, *, keys: bool, keep: frozenset[str] = frozenset(), key: str = "",
                inputs: bool = False) -> Any:
    """`value` with `suffix` added to every string (and, with `keys`, every key of the resources' inputs) outside
    `keep`. The same string always becomes the same string, so URNs, parents and names still refer to each other."""
    if key in keep:
        return value
    if isinstance(value, dict):
        return {(k + suffix if keys and inputs else k):
                with_suffix(v, suffix, keys=keys, keep=keep, key=k, inputs=inputs or k == "inputs")
                for k, v in value.items()}
    if isinstance(value, list):
        return [with_suffix(v, suffix, keys=keys, keep=keep, key=key, inputs=inputs) for v in value]
    return value + suffix if isinstance(value, str) else value


VARIANTS: dict[str, Callable[[Any, str], Any]] = {
    "every string and key": lambda doc, suffix: with_suffix(doc, suffix, keys=True),
    "every name, label and value": lambda doc, suffix: with_suffix(doc, suffix, keys=False,
                                                                   keep=frozenset(PARSED_KEYS)),
}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pathways stack's plan (pools, queues, a Pathways service, a sidecar image) and a head that adds a pool,
    changes labels and a machine type (a replacement) and drops a resource."""
    from tpuplane.components.offline import run_program_file

    base = run_program_file(REPO / "stacks" / "__main__.py", stack_file_config("pathways"), project="tpuplane",
                            stack="pathways").to_json()
    head = json.loads(json.dumps(base))
    pools = [r for r in head["resources"] if r["type"] == "gcp:container/nodePool:NodePool"]
    pools[0]["inputs"]["nodeConfig"].setdefault("labels", {})["team"] = "research"
    pools[-1]["inputs"]["nodeConfig"]["machineType"] = "ct6e-standard-8t"
    extra = json.loads(json.dumps(pools[0]))
    extra["urn"], extra["name"] = extra["urn"] + "-extra", extra["name"] + "-extra"
    head["resources"] = [r for r in head["resources"] if r["type"] != "kubernetes:core/v1:ConfigMap"] + [extra]
    return base, head


def reports(plans, variant: str, suffix: str) -> dict[str, str]:
    """Every format of the plan and of the diff, with `suffix` added to the strings of `variant`."""
    base_doc, head_doc = (VARIANTS[variant](doc, suffix) for doc in plans)
    base, head = parse_plan(base_doc), parse_plan(head_doc)
    prices = load_prices()
    context = diff_context(base.redacted(), head.redacted(), prices)
    diff = diff_plans(base, head)
    out = {f"plan {f.value}": render_plan(head.redacted(), f, prices, max_length=UNBOUNDED) for f in PLAN_FORMATS}
    out.update({f"diff {f.value}": render_diff(diff, f, context, max_length=UNBOUNDED) for f in DIFF_FORMATS})
    return out


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(f"<{tag} {sorted(name for name, _ in attrs)}>")

    def handle_endtag(self, tag):
        self.tags.append(f"</{tag}>")

    def handle_comment(self, data):
        self.tags.append("<!---->")


def html_shape(text: str) -> list[str]:
    parser = _Tags()
    parser.feed(text)
    parser.close()
    return parser.tags


GITHUB = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


def markdown_shape(text: str) -> tuple[list[tuple], list[str]]:
    """The token stream without its text, and the tags of the HTML it renders."""
    tokens = GITHUB.parse(text)
    stream = [(t.type, t.tag, t.nesting, t.level, t.info,
               tuple((c.type, c.tag, c.nesting) for c in t.children or ())) for t in tokens]
    return stream, html_shape(GITHUB.render(text))


def shape(name: str, text: str) -> object:
    if name.endswith("markdown"):
        return markdown_shape(text)
    if name.endswith("html"):
        return html_shape(text)
    if name.endswith("json"):
        return _json_shape(json.loads(text))
    return len(text.splitlines())  # table and text: one line per row, whatever the values hold


def _json_shape(value: Any) -> object:
    if isinstance(value, dict):
        return {"keys": len(value), "values": [_json_shape(v) for v in value.values()]}
    if isinstance(value, list):
        return [_json_shape(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("payload", PAYLOADS)
def test_every_report_keeps_its_structure_whatever_the_values_hold(plans, variant, payload):
    harmless, attack = suffixes(PAYLOADS[payload])
    benign_reports, hostile = reports(plans, variant, harmless), reports(plans, variant, attack)

    for name, report in benign_reports.items():
        assert shape(name, hostile[name]) == shape(name, report), name


def test_the_semantic_variant_keeps_the_fleet_the_hostile_names_sit_in(plans):
    """Coverage of the test above: the pool groups, queues and Pathways service are drawn, named by the payload."""
    markdown = reports(plans, "every name, label and value", PAYLOADS["html"])["plan markdown"]

    assert "#### Queues" in markdown and "#### Pathways" in markdown and "| `batch" in markdown
    assert "\\<script>alert(1)\\</script>" in markdown and "&lt;script&gt;" in markdown


def mermaid_blocks(markdown: str) -> list[str]:
    return [t.content for t in GITHUB.parse(markdown) if t.type == "fence" and t.info == "mermaid"]


MERMAID = REPO / "tests" / "mermaid" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_PARSE_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><script src="{mermaid}"></script></head><body>
<pre id="out">pending</pre><script type="application/json" id="diagrams">{diagrams}</script><script>
(async function () {{
  mermaid.initialize({{startOnLoad: false}});
  const results = [];
  for (const text of JSON.parse(document.getElementById('diagrams').textContent)) {{
    try {{
      const db = (await mermaid.mermaidAPI.getDiagramFromText(text)).db;
      results.push({{vertices: Array.from(db.getVertices().keys()).sort(),
                     edges: db.getEdges().map(function (e) {{ return e.start + ' -> ' + e.end; }}).sort()}});
    }} catch (error) {{ results.push({{error: String(error).slice(0, 500)}}); }}
  }}
  document.getElementById('out').textContent = JSON.stringify(results);
}})();
</script></body></html>"""


def parse_with_mermaid(diagrams: list[str], tmp_path: Path) -> list[dict[str, Any]]:
    """Each diagram as Mermaid's parser reads it: its node ids and edges, or its parse error."""
    page = tmp_path / "parse.html"
    page.write_text(_PARSE_PAGE.format(mermaid=MERMAID.as_uri(),
                                       diagrams=json.dumps(diagrams).replace("</", "<\\/")))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp_path / 'profile'}",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--allow-file-access-from-files",
         "--virtual-time-budget=20000", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300, check=False)
    found = re.search(r'<pre id="out">(.*?)</pre>', proc.stdout, re.DOTALL)
    assert found and found[1] != "pending", proc.stderr[-2000:]
    return json.loads(html.unescape(found[1]))


@pytest.mark.skipif(CHROMIUM is None or not MERMAID.is_file(),
                    reason="needs Debian's chromium and Mermaid from npm: `make test` installs both")
def test_mermaid_parses_every_diagram_with_the_nodes_and_edges_of_the_benign_one(plans, tmp_path):
    pairs = []
    for variant in VARIANTS:
        for payload in PAYLOADS.values():
            harmless, attack = suffixes(payload)
            benign_reports, hostile = reports(plans, variant, harmless), reports(plans, variant, attack)
            for name in ("plan markdown", "diff markdown"):
                pairs += zip(mermaid_blocks(benign_reports[name]), mermaid_blocks(hostile[name]), strict=True)
    parsed = parse_with_mermaid([text for pair in pairs for text in pair], tmp_path)

    assert pairs and all("error" not in result for result in parsed), [r for r in parsed if "error" in r][:1]
    for harmless, hostile in zip(parsed[::2], parsed[1::2]):
        assert (len(hostile["vertices"]), len(hostile["edges"])) == (len(harmless["vertices"]), len(harmless["edges"]))


# --- the escaping functions themselves


@pytest.mark.parametrize("value, shown", [
    ("a\nb", "a\\nb"), ("a\r\nb", "a\\r\\nb"), ("x\u2028y", "x\\u2028y"), ("\x1b[31m", "\\u001b[31m"),
    ("abc\u202edef", "abc\\u202edef"), ("plain text: 1.0", "plain text: 1.0"),
])
def test_visible_writes_line_breaks_and_invisible_characters_as_escapes(value, shown):
    assert visible(value) == shown


@pytest.mark.parametrize("value", ["a`b", "``x``", "`", "a ` b", " lead", "trail`", "x|y"])
def test_md_code_fence_is_longer_than_any_backtick_run_and_shows_the_value(value):
    [paragraph] = [t for t in GITHUB.parse(md_code(value)) if t.type == "inline"]

    assert [(c.type, c.content) for c in paragraph.children] == [("code_inline", value)]


def test_md_fence_cannot_be_closed_by_its_body():
    body = "a\n```\n````\n# heading"

    tokens = GITHUB.parse("\n".join(md_fence(body, "yaml")))

    assert [(t.type, t.content) for t in tokens] == [("fence", body + "\n")]


def test_md_text_renders_as_the_text_itself():
    value = "**b** _i_ [l](u) <b>x</b> &amp; | ~~s~~ #1 $x$ \\ `c`"

    assert GITHUB.renderInline(md_text(value)) == html_text(value).replace("&#x27;", "'")


def test_mermaid_text_leaves_no_character_that_ends_a_label_or_starts_a_directive():
    assert not set(mermaid_text('"[](){}|<>&#%;`\\\n')) & set('"[](){}|<>&%`\\\n')
