"""Specification of `tpuplane plan --format html`, checked in a real browser: headless Chromium (Debian's
`chromium` package) opens the page from disk with networking off, runs its script, and we read back the DOM
it rendered and the console messages it logged.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import REPO
from tpuplane.cli.main import app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium: apt-get install -y chromium")


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """The dev stack's report, written as a user would write it."""
    path = tmp_path_factory.mktemp("html") / "fleet.html"
    result = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO), "--stack", "dev", "--format", "html",
                                      "--out", str(path)])
    assert result.exit_code == 0, result.stderr
    return path


def browse(path: Path, tmp_path: Path, fragment: str = "", width: int = 1280) -> tuple[str, str]:
    """(DOM after scripts ran, browser log) of `path` opened in headless Chromium without network access, in a
    window `width` pixels wide."""
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         f"--window-size={width},900",
         "--no-first-run", "--disable-extensions", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
         "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",  # any network request would fail
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom",
         f"{path.as_uri()}{fragment}"],
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


class _Elements(HTMLParser):
    """Tags with their attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))


def elements(dom: str, tag: str, **attrs: str) -> list[dict[str, str | None]]:
    parser = _Elements()
    parser.feed(dom)
    return [a for t, a in parser.found if t == tag and all(a.get(k) == v for k, v in attrs.items())]


def console_messages(log: str) -> list[str]:
    return [line for line in log.splitlines() if re.search(r"CONSOLE|Uncaught|SyntaxError|TypeError", line)]


def test_html_report_is_self_contained(page):
    text = page.read_text()

    assert not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    assert "<link" not in text and "@import" not in text


@needs_chromium
def test_html_report_draws_one_block_per_slice_sized_by_chips_and_coloured_by_capacity(page, tmp_path):
    dom, _ = browse(page, tmp_path)

    slices = elements(dom, "rect", **{"class": "slice"})
    groups = elements(dom, "g", **{"class": "pool-group"})
    assert [(g["data-group"], g["data-chips"], g["data-capacity"], g["data-slices"]) for g in groups] == [
        ("train", "32", "spot", "0-2")]
    # dev's slices scale from zero: drawn faint
    assert [(r["data-chips"], r["fill"], r["data-held"]) for r in slices] == [("16", "#ef6c00", "false")] * 2


@needs_chromium
def test_html_report_shows_queues_costs_and_every_resource(page, tmp_path):
    dom, _ = browse(page, tmp_path)

    assert elements(dom, "section", id="queues") and "cluster-queue" in dom
    assert elements(dom, "table", id="costs") and "Estimated at list prices of" in dom
    assert len(elements(dom, "tr", **{"class": "resource"})) == 45
    assert "workloadpriorityclass-high" in dom


@needs_chromium
def test_html_report_shows_the_teams_storage_and_every_iam_grant(page, tmp_path):
    dom, _ = browse(page, tmp_path)

    assert elements(dom, "table", id="storage") and "gs://acme-ml-datasets/imagenet" in dom
    assert elements(dom, "table", id="grants") and "roles/storage.objectViewer" in dom
    assert "dashboard <code>TPU fleet fleet-dev</code>" in dom


def test_html_report_draws_a_quota_the_api_server_writes_with_a_suffix(tmp_path):
    config = {"config": {"gcp:project": "acme-ml", "gcp:region": "us-east5",
                         "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
                         "tpuplane:tpuPools": [{"name": "train", "tpuType": "tpu7x-16000", "capacity": "spot"}]}}
    stack = tmp_path / "Pulumi.big.yaml"
    stack.write_text(yaml.safe_dump(config))
    path = tmp_path / "fleet.html"
    result = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO), "--config", str(stack), "--format", "html",
                                      "--out", str(path)])
    assert result.exit_code == 0, result.stderr

    assert '<span class="bar" title="8000 of 8000 chips">' in path.read_text()  # the quota is stored as 8k


@needs_chromium
def test_html_report_logs_no_console_errors(page, tmp_path):
    _, log = browse(page, tmp_path)

    assert console_messages(log) == []


@needs_chromium
def test_html_report_filters_resources_from_the_url_fragment(page, tmp_path):
    dom, _ = browse(page, tmp_path, "#train-")

    rows = elements(dom, "tr", **{"class": "resource"})
    assert [row["data-type"] for row in rows if "hidden" not in row] == ["NodePool", "NodePool"]
    assert len(rows) == 45
    assert '<span id="shown">2</span>' in dom


@needs_chromium
def test_html_report_filter_takes_a_fragment_that_is_not_valid_percent_encoding_as_it_is(page, tmp_path):
    dom, log = browse(page, tmp_path, "#%E0%A4%A")

    assert console_messages(log) == []
    assert '<span id="shown">0</span>' in dom


# Appended to a copy of the report: lists the type names the layout wraps (an inline element on two lines has two
# client rectangles), in the body's data-wrapped attribute.
_WRAPPED_TYPES = """<script>
document.body.dataset.wrapped = Array.from(document.querySelectorAll('#resources td:nth-child(2) code'))
  .filter(function (code) { return code.getClientRects().length > 1; })
  .map(function (code) { return code.textContent; }).join(',') || 'none';
</script>"""


@needs_chromium
def test_html_report_never_breaks_a_type_name_in_a_narrow_window(page, tmp_path):
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", _WRAPPED_TYPES + "</body>"))

    dom, _ = browse(probe, tmp_path, width=480)

    assert 'data-wrapped="none"' in dom
