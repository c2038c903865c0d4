"""The pure core stays pure: nothing under infra/ imports Pulumi, its import graph has no cycle (imports for type
checking count: a cycle hidden behind `TYPE_CHECKING` is still two modules that cannot be read apart), and the
bottom layer (redaction, visible text) imports nothing of tpuplane, so every layer uses it without reaching up."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conftest import REPO

INFRA = REPO / "infra"


def module_name(path: Path) -> str:
    parts = path.relative_to(INFRA).with_suffix("").parts
    return ".".join(("tpuplane", "infra", *(p for p in parts if p != "__init__")))


def imports(path: Path) -> set[str]:
    """tpuplane modules `path` names in any import: at the top, in a function, or under `if TYPE_CHECKING:`."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tpuplane."):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tpuplane."))
    return found


def test_infra_modules_import_no_pulumi():
    modules = sorted(module_name(p) for p in INFRA.rglob("*.py"))
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert loaded.stdout.strip() == "[]"


def test_infra_import_graph_has_no_cycle_even_for_type_checking():
    paths = {module_name(p): p for p in INFRA.rglob("*.py")}
    graph = {name: {m for m in imports(path) if m in paths and m != name} for name, path in paths.items()}
    assert sum(len(targets) for targets in graph.values()) > len(graph)  # the walk below sees the real edges
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for target in sorted(graph[name]):
            if state.get(target) == "open":
                raise AssertionError("import cycle: " + " -> ".join([*trail, name, target]))
            if target not in state:
                visit(target, [*trail, name])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])


def test_redaction_is_the_bottom_layer():
    assert imports(INFRA / "redaction.py") == imports(INFRA / "visible_text.py") == set()
    assert imports(INFRA / "errors.py") == {"tpuplane.infra.redaction", "tpuplane.infra.redaction.redact",
                                            "tpuplane.infra.redaction.redact_text", "tpuplane.infra.visible_text",
                                            "tpuplane.infra.visible_text.visible"}
