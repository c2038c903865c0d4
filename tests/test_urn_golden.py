"""The example stacks' URNs are a public contract: a rename or re-parent replaces resources (a TPU node pool is a
slice torn down), unless it ships with `aliases`. This golden file makes every URN change visible in review.

After an intended change (with its aliases), regenerate: `TPUPLANE_UPDATE_GOLDEN=1 .venv/bin/pytest
tests/test_urn_golden.py`, and say in the commit why each URN changed.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import STACKS, stack_file_config

from tpuplane.components.offline import run_program_file

GOLDEN = Path(__file__).resolve().parent / "golden" / "urns.txt"
STACK_NAMES = ("dev", "prod", "pathways")


def planned_urns() -> str:
    lines = []
    for stack in STACK_NAMES:
        plan = run_program_file(STACKS / "__main__.py", stack_file_config(stack), project="tpuplane", stack=stack)
        lines += sorted(r.urn for r in plan.resources)
    return "\n".join(lines) + "\n"


def test_example_stacks_urns_match_the_golden_file():
    urns = planned_urns()
    if os.environ.get("TPUPLANE_UPDATE_GOLDEN"):
        GOLDEN.write_text(urns)
    golden = GOLDEN.read_text()
    missing = sorted(set(golden.splitlines()) - set(urns.splitlines()))
    added = sorted(set(urns.splitlines()) - set(golden.splitlines()))
    assert not missing and not added, (
        f"URNs changed: {len(missing)} gone (replaced unless aliased), {len(added)} new.\n"
        + "\n".join([*(f"- {u}" for u in missing[:20]), *(f"+ {u}" for u in added[:20])]))


@pytest.mark.parametrize("kind", ["gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster",
                                  "gcp:compute/reservation:Reservation"])
def test_golden_file_holds_the_resources_a_rename_would_destroy(kind):
    assert any(kind in line for line in GOLDEN.read_text().splitlines())
