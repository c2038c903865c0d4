"""The protocol between `LocalSidecar` and its worker process: message types, limits, errors, and the lock-step
rule. The bytes on the wire are `sidecar_wire`'s.

Both sides also share the sidecar lock-step rule here: functions travel cloudpickled, which has no
cross-version guarantee, so jax and jaxlib must be identical, Python major.minor identical, cloudpickle identical.

cloudpickle is imported only when a payload is pickled (`require_cloudpickle`), so that the pytest plugin, which
imports this module, loads in an environment without the `runtime` extra.
"""

from __future__ import annotations

import platform
import socket
from dataclasses import asdict, dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

from packaging.version import InvalidVersion, Version

PROTOCOL_VERSION = 2  # 2: the binary framing of sidecar_wire

# The worker learns the client's secret from this environment variable and proves it in `hello`, so another
# local process that happens to connect to the client's loopback port is never taken for the worker.
TOKEN_ENV = "TPUPLANE_SIDECAR_TOKEN"

# Message types. Requests carry an `id`; every reply repeats it.
HELLO = "hello"  # worker -> client, first message: protocol, token, pid, versions
CAPABILITY_PROBE = "capability_probe"  # client -> worker; reply CAPABILITIES
CAPABILITIES = "capabilities"
CALL = "call"  # client -> worker, payload (fn, args, kwargs); reply RESULT (payload) or ERROR
RESULT = "result"
ERROR = "error"  # metadata: exc_type, message, traceback, phase
SHUTDOWN = "shutdown"  # client -> worker; reply BYE, then the worker exits 0
BYE = "bye"

# Bounds both sides enforce before allocating: a garbled or hostile length must not ask for exabytes.
MAX_FRAME_BYTES = 8 << 30  # one pickled buffer (a large array travels as one out-of-band frame)
MAX_FRAMES = 65536


class SidecarError(RuntimeError):
    """Base of every failure of the local sidecar, on either side of the wire."""


class ProtocolError(SidecarError):
    """The peer sent something this protocol does not allow (bad frame, bad JSON, a reply to another request)."""


class PeerClosed(ConnectionError):
    """The connection ended, cleanly between messages or in the middle of one."""


def exception_text(exc: BaseException) -> str:
    """`str(exc)`, or what went wrong making it: a broken `__str__` must not hide the error it describes."""
    try:
        return str(exc)
    except BaseException as failure:  # noqa: BLE001 - whatever __str__ raises
        return f"<str() of the exception failed: {type(failure).__name__}>"


def require_cloudpickle() -> ModuleType:
    """cloudpickle, or an ImportError that says which extra brings it."""
    try:
        import cloudpickle
    except ImportError as exc:
        raise ImportError(
            "the local sidecar pickles calls with cloudpickle, which is not installed: pip install 'tpuplane[runtime]'"
        ) from exc
    return cloudpickle


def configure_socket(sock: socket.socket) -> None:
    """Small request/reply messages must not wait for Nagle's delayed-ACK dance."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@dataclass(frozen=True)
class RuntimeVersions:
    """What the lock-step rule compares; None where the distribution is not installed."""

    python: str
    jax: str | None
    jaxlib: str | None
    cloudpickle: str | None

    def to_json(self) -> dict[str, str | None]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> RuntimeVersions:
        if not isinstance(data, dict):
            raise ProtocolError(f"hello carries no versions object: {data!r}")
        return cls(**{name: data.get(name) for name in ("python", "jax", "jaxlib", "cloudpickle")})


def local_versions() -> RuntimeVersions:
    """Read installed versions from package metadata, never by importing jax (which takes a second or more)."""
    return RuntimeVersions(
        python=platform.python_version(),
        jax=_installed("jax"),
        jaxlib=_installed("jaxlib"),
        cloudpickle=_installed("cloudpickle"),
    )


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def lockstep_mismatches(client: RuntimeVersions, worker: RuntimeVersions) -> list[str]:
    """One line per violated lock-step rule; empty when client and worker may exchange pickled functions."""
    problems = []
    if _major_minor(client.python) != _major_minor(worker.python):
        problems.append(f"python major.minor: client {client.python}, worker {worker.python}")
    for name in ("jax", "jaxlib", "cloudpickle"):
        mine, theirs = getattr(client, name), getattr(worker, name)
        if mine != theirs:
            problems.append(f"{name}: client {mine or 'not installed'}, worker {theirs or 'not installed'}")
    return problems


def _major_minor(version: str) -> tuple[int, ...] | str:
    try:
        return Version(version).release[:2]
    except InvalidVersion:
        return version
