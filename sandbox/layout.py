"""Where a sandbox keeps its files, and the state file `status` and `down` read.

One folder holds everything a sandbox has: keys, the kubeconfig, etcd's data, each process's log, the Pulumi
state. `sandbox down` removes the folder whole. Default: `$TPUPLANE_SANDBOX_DIR`, else
`$XDG_STATE_HOME/tpuplane/sandbox`, else `~/.local/state/tpuplane/sandbox`.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from tpuplane.sandbox.processes import Started

STATE_FILE = "state.json"


def default_dir() -> Path:
    if explicit := os.environ.get("TPUPLANE_SANDBOX_DIR"):
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "tpuplane" / "sandbox"


class Ports(BaseModel):
    """Every port the sandbox listens on, all on 127.0.0.1."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kueue_webhook: int
    kueue_metrics: int
    kueue_health: int
    kueue_visibility: int
    jobset_webhook: int
    jobset_metrics: int
    jobset_health: int
    kwok: int

    def all(self) -> list[int]:
        return list(self.model_dump().values())


class ProcessRecord(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    pid: int
    start_time: int
    log: str

    def started(self) -> Started:
        return Started(self.name, self.pid, self.start_time, self.log)


class SandboxState(BaseModel):
    """What `sandbox up` recorded: enough for `status` and `down` to find everything it started."""

    model_config = ConfigDict(extra="forbid")

    directory: str
    project: str
    stack: str
    config_file: str
    project_dir: str
    kubeconfig: str
    ports: Ports
    processes: list[ProcessRecord] = []
    nodes: int = 0
    applied: bool = False  # the stack's Kubernetes half went through `pulumi up`

    def save(self) -> None:
        path = Path(self.directory) / STATE_FILE
        temporary = path.with_suffix(".tmp")
        temporary.write_text(self.model_dump_json(indent=2) + "\n")
        temporary.replace(path)

    @classmethod
    def load(cls, directory: Path) -> "SandboxState | None":
        """The state in `directory`, None if it holds none; UnreadableState if its state file is not one."""
        path = directory / STATE_FILE
        if not path.is_file():
            return None
        try:
            return cls.model_validate_json(path.read_bytes())
        except (ValidationError, OSError) as exc:
            raise UnreadableState(f"{path} is not a sandbox's state ({type(exc).__name__}); `tpuplane sandbox "
                                  "down` stops the processes that carry this folder's marker and removes it") from None


class UnreadableState(ValueError):
    """A state file that is not one (edited, truncated): one line for the user, never a traceback."""


class Paths:
    """The files of one sandbox folder."""

    def __init__(self, root: Path):
        self.root = root
        self.pki = root / "pki"
        self.etcd_data = root / "etcd"
        self.logs = root / "logs"
        self.kubeconfig = root / "kubeconfig"
        self.token_file = self.pki / "tokens.csv"
        self.pulumi = root / "pulumi"
        self.controllers = root / "controllers"

    def log(self, name: str) -> Path:
        return self.logs / f"{name}.log"
