"""The binary wire format between `LocalSidecar` and its worker process, built for round-trip latency.

A message is a fixed 24-byte header (`HEADER`: magic, type, frame count, metadata length, request id), the
frames' lengths (8 bytes each), the metadata (JSON, only on the rare messages that carry any: hello, probe,
capabilities, error) and the frames. A call and its result carry no JSON at all.

A message leaves in one `sendmsg` of the header and the frames' own memory (nothing concatenated). The reader
receives into a reused staging buffer as much as the socket holds, so a small message takes one `recv`; a large
frame is received straight into the buffer that becomes the unpickled object's memory.

Python objects travel as pickle protocol 5 (cloudpickle; the C pickler for plain data, where both write the same
bytes): the pickle stream, then its out-of-band buffers (numpy arrays), which are written from their own memory
and read into fresh writable buffers, never copied into or out of the pickle.
"""

from __future__ import annotations

import json
import mmap
import pickle
import socket
import struct
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime.sidecar_protocol import PeerClosed, ProtocolError

# The magic names the format and its version: a peer speaking another one is refused at its first message.
MAGIC = b"TPS\x02"
HEADER = struct.Struct("<4sB3xIIQ")  # magic, type code, frame count, metadata bytes, request id
_LENGTH_BYTES = 8  # each frame's length, little-endian
# A call's first frame: the id the worker keeps its function under (0: not kept), then the function's pickle.
FUNCTION_ID = struct.Struct("<Q")
TYPES = (protocol.HELLO, protocol.CAPABILITY_PROBE, protocol.CAPABILITIES, protocol.CALL, protocol.RESULT,
         protocol.ERROR, protocol.SHUTDOWN, protocol.BYE)
_CODES = {name: code for code, name in enumerate(TYPES)}

# Bounds checked before anything is allocated: a garbled or hostile header must not ask for exabytes. Metadata
# holds at most an error's message and traceback, which the worker cuts to 320 K characters (JSON escapes them to
# 12 bytes at worst).
MAX_META_BYTES = 8 << 20
MAX_FRAME_BYTES = protocol.MAX_FRAME_BYTES
MAX_FRAMES = protocol.MAX_FRAMES
_STAGING_BYTES = 256 << 10
# Large receive buffers are mapped with transparent huge pages, as numpy maps its own arrays of 4 MiB and more: the
# kernel then supplies them 2 MiB per page fault instead of 4 KiB, several times faster for a 64 MiB array.
_HUGE_PAGE_MIN_BYTES = 4 << 20
_MAX_IOVECS = 1024  # Linux IOV_MAX: sendmsg takes at most this many buffers per call

# Called when a non-blocking socket is not ready; returns once it may be (or raises to abandon the message).
Wait = Callable[[], object]


class Message(NamedTuple):
    type: str
    id: int
    meta: dict[str, Any]
    frames: list[Any]  # writable buffers: bytearray, or mmap for a large frame


def send(sock: socket.socket, type_: str, request_id: int = 0, meta: dict[str, Any] | None = None,
         frames: Sequence[Any] = (), wait: Wait | None = None) -> None:
    """Write one message with scatter-gather sendmsg, copying none of the frames.

    A blocking socket needs no `wait`. On a non-blocking one, `wait` is called whenever the socket is full; it is
    where the caller watches for other things meanwhile (the peer's exit, data to read, a deadline).
    """
    sizes = [memoryview(frame).nbytes for frame in frames]
    encoded = json.dumps(meta, separators=(",", ":")).encode() if meta else b""
    head = (HEADER.pack(MAGIC, _CODES[type_], len(sizes), len(encoded), request_id)
            + struct.pack(f"<{len(sizes)}Q", *sizes) + encoded)
    buffers = [head, *frames]
    sent = 0
    if len(buffers) <= _MAX_IOVECS:
        try:
            sent = sock.sendmsg(buffers)  # a small message leaves whole here
        except BlockingIOError:
            pass
    if sent < len(head) + sum(sizes):
        _send_rest(sock, buffers, sent, wait)


def _send_rest(sock: socket.socket, buffers: list[Any], sent: int, wait: Wait | None) -> None:
    """Go on from the `sent` bytes a first sendmsg took, waiting whenever the socket is full."""
    views = [memoryview(buffer).cast("B") for buffer in buffers]
    first = 0
    while True:
        while first < len(views) and sent >= views[first].nbytes:
            sent -= views[first].nbytes
            first += 1
        if first == len(views):
            return
        views[first] = views[first][sent:]
        try:
            sent = sock.sendmsg(views[first:first + _MAX_IOVECS])
        except BlockingIOError:
            assert wait is not None, "a non-blocking socket needs a wait callable"
            wait()
            sent = 0


class Reader:
    """Reads messages from one socket through a reused staging buffer.

    `buffered` tells the caller that bytes already received wait here: a socket wait would not see them.
    """

    def __init__(self, sock: socket.socket, wait: Wait | None = None) -> None:
        self._sock = sock
        self._wait = wait
        self._staging = bytearray(_STAGING_BYTES)
        self._view = memoryview(self._staging)
        self._start = self._end = 0

    @property
    def buffered(self) -> bool:
        return self._end > self._start

    def receive(self) -> Message:
        """Read one message; PeerClosed at end of stream, ProtocolError on a malformed or oversized header."""
        if self._end - self._start < HEADER.size:
            self._stage_header()
        magic, code, count, meta_size, request_id = HEADER.unpack_from(self._staging, self._start)
        self._start += HEADER.size
        if magic != MAGIC:
            raise ProtocolError(f"message starts with {magic!r}, not the sidecar's {MAGIC!r}: the peer speaks another "
                                "wire format (another tpuplane version?) or the stream is out of step")
        if code >= len(TYPES):
            raise ProtocolError(f"unknown message type code {code}")
        if count > MAX_FRAMES:
            raise ProtocolError(f"message announces {count} frames; at most {MAX_FRAMES}")
        if meta_size > MAX_META_BYTES:
            raise ProtocolError(f"message metadata of {meta_size} bytes exceeds the {MAX_META_BYTES}-byte limit")
        sizes = struct.unpack(f"<{count}Q", self._read(count * _LENGTH_BYTES))
        if sizes and max(sizes) > MAX_FRAME_BYTES:
            raise ProtocolError(f"frame of {max(sizes)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
        meta = _decode_meta(self._read(meta_size)) if meta_size else {}
        return Message(TYPES[code], request_id, meta, [self._read(size) for size in sizes])

    def _stage_header(self) -> None:
        """Receive at least a header, and as much more as the socket holds: for a small message, all of it."""
        staged = self._end - self._start
        if staged:  # a partial header moves to the front
            self._staging[:staged] = self._staging[self._start:self._end]
        self._start, self._end = 0, staged
        while self._end < HEADER.size:
            self._end += self._recv_into(self._view[self._end:], HEADER.size - self._end, between=not self._end)

    def _read(self, size: int) -> Any:
        """The next `size` bytes in a fresh writable buffer: what is staged, and the rest straight from the socket."""
        start, staged = self._start, self._end - self._start
        if size <= staged:
            self._start += size
            return self._staging[start:start + size]
        buffer = allocate(size)
        target = memoryview(buffer)
        target[:staged] = self._view[start:self._end]
        self._start = self._end = 0
        target = target[staged:]
        while target:
            target = target[self._recv_into(target, len(target)):]
        return buffer

    def _recv_into(self, view: memoryview, missing: int, *, between: bool = False) -> int:
        while True:
            try:
                received = self._sock.recv_into(view)
            except BlockingIOError:
                assert self._wait is not None, "a non-blocking socket needs a wait callable"
                self._wait()
                continue
            if received:
                return received
            raise PeerClosed("connection closed" if between else
                             f"connection closed in the middle of a message, {missing} more bytes expected")


def allocate(size: int) -> bytearray | mmap.mmap:
    """A fresh writable buffer of `size` bytes, which may become an unpickled array's memory."""
    if size < _HUGE_PAGE_MIN_BYTES or not hasattr(mmap, "MADV_HUGEPAGE"):
        return bytearray(size)
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory.madvise(mmap.MADV_HUGEPAGE)
    return memory


def _decode_meta(raw: bytearray) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"message metadata is not JSON: {exc}") from exc
    if not isinstance(meta, dict):
        raise ProtocolError(f"message metadata is not a JSON object: {bytes(raw[:200])!r}")
    return meta


def dump_payload(obj: Any) -> list[Any]:
    """Pickle `obj` into frames: the pickle stream, then its out-of-band buffers (raw, uncopied).

    Plain data (see `_plain_data`) goes through the C pickler, which writes the same bytes as cloudpickle at a
    fraction of the cost of a small call; anything else through cloudpickle.
    """
    if _plain_data(obj):
        return [pickle.dumps(obj, protocol=5)]
    buffers: list[pickle.PickleBuffer] = []
    stream = protocol.require_cloudpickle().dumps(obj, protocol=5, buffer_callback=buffers.append)
    return [stream, *(buffer.raw() for buffer in buffers)]


_SCALARS = frozenset({type(None), bool, int, float, complex, str, bytes})
_PLAIN_MAX_ITEMS = 64  # a longer container is not looked through: cloudpickle is no slower on it than the look


def _plain_data(obj: Any, depth: int = 3) -> bool:
    """Whether `obj` is built-in scalars in short tuples, lists and dicts (`depth` levels: a call's args and kwargs,
    and lists in them): what pickle writes by value, never by reference to a function or class."""
    kind = type(obj)
    if kind in _SCALARS:
        return True
    if kind is dict:
        if not _SCALARS.issuperset(map(type, obj)):
            return False
        obj = obj.values()
    elif kind is not tuple and kind is not list:
        return False
    if len(obj) > _PLAIN_MAX_ITEMS:
        return False
    return _SCALARS.issuperset(map(type, obj)) or (depth > 1 and all(_plain_data(item, depth - 1) for item in obj))


def load_payload(frames: Sequence[Any]) -> Any:
    if not frames:
        raise ProtocolError("message has no payload frame")
    return pickle.loads(frames[0], buffers=frames[1:])
