"""The table of tests/workloads/cases.yaml, for every test that judges those workloads: each workload file, the
stack it is judged against, and what must happen to it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "tests" / "workloads"


@dataclass(frozen=True)
class WorkloadCase:
    file: str
    stack: str
    admission: str  # accepted | refused: by the API server, after JobSet's and Kueue's webhook defaults
    check: str | None = None  # can run | cannot run: `tpuplane workload check` (None when refused)
    says: str | None = None  # text of the refusal or the problem
    kueue: dict[str, Any] | None = None  # what real Kueue does with it (see cases.yaml)
    render: list[str] | None = None  # the `tpuplane` arguments that write a tpuplane-rendered file

    @property
    def path(self) -> Path:
        return WORKLOADS / self.file

    @property
    def stack_path(self) -> Path:
        return REPO / self.stack

    @property
    def exit_code(self) -> int:
        """`tpuplane workload check`'s: 0 can run, 1 cannot run, 2 refused (bad input)."""
        return {"can run": 0, "cannot run": 1}.get(self.check or "", 2)

    def manifest(self) -> dict[str, Any]:
        return yaml.safe_load(self.path.read_text())

    def documents(self) -> list[dict[str, Any]]:
        """Every workload of the file (an experiment writes several)."""
        return [doc for doc in yaml.safe_load_all(self.path.read_text()) if doc]


def workload_cases() -> list[WorkloadCase]:
    return [WorkloadCase(**row) for row in yaml.safe_load((WORKLOADS / "cases.yaml").read_text())]
