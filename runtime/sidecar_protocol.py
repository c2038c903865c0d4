"""The wire protocol between `LocalSidecar` and its worker process.

A message is a JSON header frame followed by the binary frames the header announces (`"frames": n`). A frame is
an 8-byte big-endian length and that many bytes. Python objects travel as cloudpickle protocol 5: the first
binary frame is the pickle stream and the rest are its out-of-band buffers (numpy arrays, bytearrays), so a large
array is written straight from its own memory and read straight into the buffer that becomes the new array,
never copied into or out of the pickle.

Both sides also share the sidecar lock-step rule here: functions travel cloudpickled, which has no
cross-version guarantee, so jax and jaxlib must be identical, Python major.minor identical, cloudpickle identical.

cloudpickle is imported only when a payload is pickled (`require_cloudpickle`), so that the pytest plugin, which
imports this module, loads in an environment without the `runtime` extra.
"""

from __future__ import annotations

import json
import platform
import socket
import struct
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from types import ModuleType
from typing import Any

from packaging.version import InvalidVersion, Version

PROTOCOL_VERSION = 1

# The worker learns the client's secret from this environment variable and proves it in `hello`, so another
# local process that happens to connect to the client's loopback port is never taken for the worker.
TOKEN_ENV = "TPUPLANE_SIDECAR_TOKEN"

# Message types. Requests carry an `id`; every reply repeats it.
HELLO = "hello"  # worker -> client, first message: protocol, token, pid, versions
CAPABILITY_PROBE = "capability_probe"  # client -> worker; reply CAPABILITIES
CAPABILITIES = "capabilities"
CALL = "call"  # client -> worker, payload (fn, args, kwargs); reply RESULT (payload) or ERROR
RESULT = "result"
ERROR = "error"  # header: exc_type, message, traceback, phase
SHUTDOWN = "shutdown"  # client -> worker; reply BYE, then the worker exits 0
BYE = "bye"

_PREFIX = struct.Struct(">Q")
# A header is a few hundred bytes; a length beyond this means the stream is not ours or is out of step.
MAX_HEADER_BYTES = 1 << 20
# Bounds both sides enforce before allocating: a garbled or hostile length prefix must not ask for exabytes.
MAX_FRAME_BYTES = 8 << 30  # one pickled buffer (a large array travels as one out-of-band frame)
MAX_FRAMES = 65536
# sendmsg() takes at most IOV_MAX (1024 on Linux) buffers per call; each frame needs two.
_MAX_IOVECS = 512


class SidecarError(RuntimeError):
    """Base of every failure of the local sidecar, on either side of the wire."""


class ProtocolError(SidecarError):
    """The peer sent something this protocol does not allow (bad frame, bad JSON, a reply to another request)."""


class PeerClosed(ConnectionError):
    """The connection ended, cleanly between messages or in the middle of one."""


@dataclass(frozen=True)
class Message:
    header: dict[str, Any]
    frames: list[bytearray]

    @property
    def type(self) -> str:
        return self.header.get("type", "")


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


# Called when a non-blocking socket is not ready; returns once it may be (or raises to abandon the message).
Wait = Callable[[], object]


def send_message(sock: socket.socket, header: dict[str, Any], frames: Sequence[Any] = (),
                 wait: Wait | None = None) -> None:
    """Write the header and the binary frames with scatter-gather sendmsg, copying none of the buffers.

    A blocking socket needs no `wait`. On a non-blocking one, `wait` is called whenever the socket is full; it is
    where the caller watches for other things meanwhile (the peer's exit, data to read, a deadline).
    """
    encoded = json.dumps({**header, "frames": len(frames)}, sort_keys=True, separators=(",", ":")).encode()
    views: list[memoryview] = []
    for buffer in (encoded, *frames):
        view = memoryview(buffer).cast("B")
        views.append(memoryview(_PREFIX.pack(view.nbytes)))
        views.append(view)
    _sendmsg_all(sock, views, wait)


def _sendmsg_all(sock: socket.socket, views: list[memoryview], wait: Wait | None) -> None:
    while views:
        try:
            sent = sock.sendmsg(views[:_MAX_IOVECS])
        except BlockingIOError:
            assert wait is not None, "a non-blocking socket needs a wait callable"
            wait()
            continue
        while sent:
            if sent >= len(views[0]):
                sent -= len(views[0])
                views.pop(0)
            else:
                views[0] = views[0][sent:]
                sent = 0
        while views and not len(views[0]):
            views.pop(0)


def recv_message(sock: socket.socket, wait: Wait | None = None) -> Message:
    """Read one message; raises PeerClosed at end of stream, ProtocolError on a malformed header.

    `wait` is called whenever a non-blocking socket has nothing to read yet (see `send_message`).
    """
    size = _recv_prefix(sock, wait)
    if size > MAX_HEADER_BYTES:
        raise ProtocolError(f"header frame of {size} bytes exceeds the {MAX_HEADER_BYTES}-byte limit")
    raw = _recv_exactly(sock, size, wait)
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header frame is not JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("type"), str):
        raise ProtocolError(f"header frame is not an object with a string 'type': {raw[:200]!r}")
    count = header.get("frames", 0)
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_FRAMES:
        raise ProtocolError(f"header announces {str(count)[:40]} frames; at most {MAX_FRAMES}")
    frames = []
    for _ in range(count):
        size = _recv_prefix(sock, wait)
        if size > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {size} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
        frames.append(_recv_exactly(sock, size, wait))
    return Message(header, frames)


def _recv_prefix(sock: socket.socket, wait: Wait | None) -> int:
    return _PREFIX.unpack(_recv_exactly(sock, _PREFIX.size, wait))[0]


def _recv_exactly(sock: socket.socket, size: int, wait: Wait | None) -> bytearray:
    """Fill one preallocated buffer with recv_into: no chunk list, no join."""
    buffer = bytearray(size)
    view = memoryview(buffer)
    while view:
        try:
            received = sock.recv_into(view)
        except BlockingIOError:
            assert wait is not None, "a non-blocking socket needs a wait callable"
            wait()
            continue
        if not received:
            raise PeerClosed(f"connection closed with {len(view)} of {size} bytes still expected")
        view = view[received:]
    return buffer


def dump_payload(obj: Any) -> list[Any]:
    """cloudpickle `obj` into frames: the pickle stream, then its out-of-band buffers (raw, uncopied)."""
    buffers: list[Any] = []
    stream = require_cloudpickle().dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [stream, *(buffer.raw() for buffer in buffers)]


def load_payload(frames: Sequence[bytearray]) -> Any:
    if not frames:
        raise ProtocolError("message has no payload frame")
    return require_cloudpickle().loads(frames[0], buffers=frames[1:])


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
