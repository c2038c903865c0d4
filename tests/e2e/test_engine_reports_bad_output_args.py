"""Under the real engine (the Pulumi CLI and Python language host the toolchain builds), an Args field given as another
resource's output that resolves to a bad value stops `pulumi preview` with the one ConfigError the offline plan
gives: the field, what it resolved to (a secret shown as `[secret]`), no traceback. No cloud is needed: nothing that
takes the value is ever registered."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuplane.sandbox.engine import Engine, Project

PROGRAM = """\
import os
import pulumi
from tpuplane.components import TpuSlicePool

pool = {"project": "acme-ml", "location": "us-east5", "zone": "us-east5-b", "cluster": "fleet", "tpu_type": "v6e-16"}
if os.environ["TPUPLANE_CASE"] == "cluster":
    pool["cluster"] = pulumi.Output.from_input("Not_A_Cluster")
else:
    pool.update(capacity="reservation", reservation=pulumi.Output.secret("Bad SECRETPART Name"))
TpuSlicePool("train", pool)
"""


@pytest.mark.parametrize("case, says", [
    ("cluster", "TpuSlicePoolArgs.cluster: got 'Not_A_Cluster'; allowed: a GKE cluster name"),
    ("secret", "TpuSlicePoolArgs.reservation: got '[secret]'; allowed: NAME or projects/P/reservations/R"),
])
def test_preview_stops_with_one_config_error_naming_the_field(tmp_path: Path, case: str, says: str):
    program = tmp_path / "program"
    program.mkdir()
    (program / "__main__.py").write_text(PROGRAM)
    engine = Engine(tmp_path / "work", tmp_path / "kubeconfig")
    project = Project(name="outputs", program=program, stack="test", config={}, env={"TPUPLANE_CASE": case})
    engine.prepare(project)

    result = engine.run(project, "preview", check=False)
    output = result.stdout + result.stderr

    assert result.returncode != 0
    assert f"error: invalid TpuSlicePoolArgs:\n    {says}" in output
    assert "Traceback" not in output and "SECRETPART" not in output
