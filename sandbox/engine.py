"""The real Pulumi engine against a sandbox: `pulumi preview`, `up`, `destroy` and `stack export` with the CLI,
the Python language host and the Kubernetes provider built from the pinned modules (`toolchain`).

Everything the engine keeps lives in the sandbox's folder: a local file backend (`pulumi login file://...`), an
empty passphrase, its own PULUMI_HOME. The plugins are found on PATH, ahead of Pulumi's plugin cache, and
automatic plugin downloads are off: nothing is fetched. The Python language host (the newest one whose source the
Go module proxy serves, from SDK v3.68.0) runs programs with the first `python3` on PATH, so this process's own
interpreter (the one tpuplane is installed in) comes first there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import yaml

from tpuplane.sandbox.processes import go_gc
from tpuplane.sandbox.toolchain import binary, binary_dirs

if TYPE_CHECKING:
    from tpuplane.sandbox.layout import SandboxState

ENGINE_TIMEOUT = 900.0  # seconds for one engine command: a preview or an update of a stack's Kubernetes half


class EngineFailed(RuntimeError):
    """A Pulumi command failed: the message names it and quotes the end of its output."""


@dataclass(frozen=True)
class Project:
    """A Pulumi project the sandbox runs: its name (URNs carry it), the folder of its `__main__.py`, the stack
    config (`config:` of a Pulumi.<stack>.yaml), and the environment its program reads."""

    name: str
    program: Path | None
    stack: str
    config: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    manifest: dict[str, Any] | None = None  # a whole Pulumi.yaml instead (a YAML program holds its resources)


class Engine:
    """The Pulumi CLI bound to one sandbox folder and kubeconfig."""

    def __init__(self, work: Path, kubeconfig: Path):
        self.work = work
        self.kubeconfig = kubeconfig

    def env(self, project: Project) -> dict[str, str]:
        python_bin = str(Path(sys.executable).parent)
        return {
            **os.environ,
            **go_gc(),  # the Pulumi CLI and the Kubernetes provider are Go programs too
            **project.env,
            "PATH": os.pathsep.join([*binary_dirs(), python_bin, os.environ.get("PATH", "")]),
            "PULUMI_HOME": str(self.work / "home"),
            "PULUMI_BACKEND_URL": f"file://{self.work / 'state'}",
            "PULUMI_CONFIG_PASSPHRASE": "",
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            "KUBECONFIG": str(self.kubeconfig),
        }

    def project_dir(self, project: Project) -> Path:
        return self.work / "projects" / project.name

    def prepare(self, project: Project) -> Path:
        """Write the project's Pulumi.yaml and stack file, and select (or create) its stack."""
        directory = self.project_dir(project)
        directory.mkdir(parents=True, exist_ok=True)
        (self.work / "state").mkdir(parents=True, exist_ok=True)
        manifest = project.manifest or {"name": project.name, "runtime": "python", "main": str(project.program)}
        (directory / "Pulumi.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
        stack_file = {"config": {k: v if isinstance(v, str) else json.dumps(v) if k.startswith(f"{project.name}:")
                                 else v for k, v in project.config.items()}}
        (directory / f"Pulumi.{project.stack}.yaml").write_text(yaml.safe_dump(stack_file, sort_keys=True))
        self.run(project, "stack", "select", "--create", project.stack)
        return directory

    def run(self, project: Project, *args: str, check: bool = True,
            output: Callable[[str], None] | None = None) -> subprocess.CompletedProcess[str]:
        """`pulumi <args>` in the project's folder, non-interactive; EngineFailed when it fails and `check`."""
        command = [str(binary("pulumi")), *args, "--non-interactive"]
        result = subprocess.run(command, cwd=self.project_dir(project), env=self.env(project), capture_output=True,
                                text=True, timeout=ENGINE_TIMEOUT, stdin=subprocess.DEVNULL)
        if output:
            output(result.stdout)
        if check and result.returncode:
            tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-40:])
            raise EngineFailed(f"`pulumi {' '.join(args)}` failed (exit {result.returncode}):\n{tail}")
        return result

    def up(self, project: Project) -> None:
        self.run(project, "up", "--yes", "--skip-preview", "--diff")

    def preview(self, project: Project) -> dict[str, Any]:
        """The preview's JSON document (`steps`, `changeSummary`)."""
        result = self.run(project, "preview", "--json", check=False)
        try:
            document = json.loads(result.stdout)
        except ValueError:
            raise EngineFailed(f"`pulumi preview` failed (exit {result.returncode}):\n"
                               f"{(result.stdout + result.stderr)[-4000:]}") from None
        if result.returncode:
            raise EngineFailed(f"`pulumi preview` failed (exit {result.returncode}): "
                               f"{json.dumps(document.get('diagnostics', []))[-4000:]}")
        return document

    def destroy(self, project: Project) -> None:
        self.run(project, "destroy", "--yes", "--skip-preview")

    def export(self, project: Project) -> dict[str, Any]:
        """The stack's deployment: every resource the engine registered, with its URN, type and inputs."""
        return json.loads(self.run(project, "stack", "export").stdout)


# --------------------------------------------------------------------------------------------------------------
# The stack's Kubernetes half

PROGRAM = Path(__file__).parent / "program"  # the stack's composition, with its GCP side given as existing


def stack_project(state: "SandboxState") -> Project:
    """The sandbox's Pulumi project for a stack: the stack project's name and stack name (so URNs are the ones
    `pulumi up` of the stack registers), its config file, and the sandbox's program."""
    from tpuplane.cli.plan import read_stack_file

    return Project(name=state.project, program=PROGRAM, stack=state.stack,
                   config=read_stack_file(Path(state.config_file), state.project),
                   env={"TPUPLANE_PROJECT_DIR": state.project_dir})


def apply_kubernetes_half(state: "SandboxState", progress: Callable[[str], None]) -> None:
    """`pulumi up` of the stack's Kubernetes half against the sandbox."""
    engine = Engine(Path(state.directory) / "pulumi", Path(state.kubeconfig))
    project = stack_project(state)
    progress(f"the stack's Kubernetes half (pulumi up of {project.name}/{project.stack})")
    engine.prepare(project)
    engine.up(project)
