"""The pure core stays pure: nothing under infra/ imports Pulumi, and its import graph has no cycle."""

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


def runtime_imports(path: Path) -> set[str]:
    """tpuplane.infra modules imported when `path` runs (imports under `if TYPE_CHECKING:` are for types only)."""
    tree = ast.parse(path.read_text())
    typing_only = {id(node) for block in ast.walk(tree) if isinstance(block, ast.If)
                   and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
                   for node in ast.walk(block)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tpuplane.infra"):
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("tpuplane.infra"))
    return found


def test_infra_modules_import_no_pulumi():
    modules = sorted(module_name(p) for p in INFRA.rglob("*.py"))
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(sorted(m for m in sys.modules if m.split('.')[0].startswith('pulumi')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    assert loaded.stdout.strip() == "[]"


def test_infra_import_graph_has_no_cycle():
    paths = {module_name(p): p for p in INFRA.rglob("*.py")}
    graph = {name: {m for m in runtime_imports(path) if m in paths and m != name} for name, path in paths.items()}
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
