"""The docs a newcomer reads: a short README that links to the rest, links that lead somewhere, and reference
pages that say what the code says (`docs/generate.py` writes them from it)."""

from __future__ import annotations

import importlib.util
import re

import pytest
from conftest import REPO

PAGES = sorted([REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "bench" / "README.md",
                *(REPO / "docs").rglob("*.md")])
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(#[^)\s]*)?\)")


def generator():
    spec = importlib.util.spec_from_file_location("generate", REPO / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", sorted(generator().PAGES))
def test_reference_page_is_what_the_code_says(page):
    """Stale after a change to a model, an Args docstring or a command: run `.venv/bin/python docs/generate.py`."""
    assert (REPO / "docs" / "reference" / page).read_text() == generator().PAGES[page]()


def test_readme_stays_short():
    assert len((REPO / "README.md").read_text().splitlines()) < 200


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_lead_to_a_file(page):
    missing = [target for target, _ in LINK.findall(page.read_text()) if not (page.parent / target).exists()]
    assert missing == []


def test_the_storage_guide_never_calls_a_required_key_optional():
    """The example's comments are what a newcomer copies: a key the model requires is never 'optional'."""
    from tpuplane.infra.storage.volumes import StorageEntry

    required = {field.alias or name for name, field in StorageEntry.model_fields.items() if field.is_required()}
    commented = [re.match(r"\s*-?\s*(\w+):.*#(.*)", line) for line in
                 (REPO / "docs" / "guides" / "storage.md").read_text().splitlines()]
    for key, comment in (m.groups() for m in commented if m and m[1] in required):
        assert not re.search(rf"optional|without {key}\b", comment), (key, comment)
