"""The sidecar wire protocol: frames over real sockets, payload pickling, and the lock-step version rule."""

from __future__ import annotations

import json
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime.sidecar_protocol import RuntimeVersions


@pytest.fixture
def pair():
    """A connected pair of real stream sockets."""
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def _send_in_thread(sock, header, frames=()):
    """Large messages exceed the socket buffer, so the writer must run while the reader reads."""
    thread = threading.Thread(target=protocol.send_message, args=(sock, header, frames))
    thread.start()
    return thread


def test_message_round_trip_keeps_header_and_frames(pair):
    left, right = pair
    protocol.send_message(left, {"type": "call", "id": 7}, [b"abc", bytearray(b""), memoryview(b"xyz")])
    message = protocol.recv_message(right)
    assert message.header == {"type": "call", "id": 7, "frames": 3}
    assert message.frames == [bytearray(b"abc"), bytearray(b""), bytearray(b"xyz")]


@settings(max_examples=30, deadline=None)
@given(
    header=st.dictionaries(st.text(min_size=1, max_size=8).filter(lambda k: k not in ("type", "frames")),
                           st.integers() | st.text(max_size=20) | st.booleans() | st.none(), max_size=5),
    frames=st.lists(st.binary(max_size=3000), max_size=6),
)
def test_message_round_trip_of_any_header_and_frames(header, frames):
    left, right = socket.socketpair()
    with left, right:
        protocol.send_message(left, {**header, "type": "x"}, frames)
        message = protocol.recv_message(right)
    assert message.header == {**header, "type": "x", "frames": len(frames)}
    assert message.frames == [bytearray(frame) for frame in frames]


def test_message_with_64_mib_frame_arrives_intact(pair):
    left, right = pair
    payload = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8)
    writer = _send_in_thread(left, {"type": "result", "id": 1}, [payload])
    message = protocol.recv_message(right)
    writer.join()
    assert np.array_equal(np.frombuffer(message.frames[0], dtype=np.uint8), payload)


def test_message_over_non_blocking_sockets_waits_through_the_callable(pair):
    """16 MiB cannot fit the socket buffers, so both sides find their socket not ready and must call `wait`.

    Made deterministic: the receiver starts first (nothing to read yet: it must wait) and stays in that first wait
    until the sender has had to wait too (nobody reading, buffers full)."""
    left, right = pair
    left.setblocking(False)
    right.setblocking(False)
    waits = {"send": 0, "recv": 0}
    sender_waited = threading.Event()

    def wait_send():
        waits["send"] += 1
        sender_waited.set()
        select.select([], [left], [])

    def wait_recv():
        waits["recv"] += 1
        if waits["recv"] == 1:
            assert sender_waited.wait(timeout=30), "the sender never found its socket full"
        select.select([right], [], [])

    received = {}
    reader = threading.Thread(target=lambda: received.update(message=protocol.recv_message(right, wait=wait_recv)))
    reader.start()
    payload = np.arange(4 << 20, dtype=np.float32)
    while waits["recv"] == 0:  # the reader is inside its first wait before anything is sent
        time.sleep(0.001)
    protocol.send_message(left, {"type": "result", "id": 1}, [payload], wait=wait_send)
    reader.join(timeout=30)
    assert np.array_equal(np.frombuffer(received["message"].frames[0], dtype=np.float32), payload)
    assert waits["send"] > 0 and waits["recv"] > 0


def test_message_frame_layout_is_big_endian_length_then_json(pair):
    left, right = pair
    protocol.send_message(left, {"type": "bye", "id": 2}, [b"\x00\x01"])
    left.close()
    raw = b""
    while chunk := right.recv(4096):
        raw += chunk
    (header_size,) = struct.unpack(">Q", raw[:8])
    assert json.loads(raw[8 : 8 + header_size]) == {"type": "bye", "id": 2, "frames": 1}
    assert raw[8 + header_size :] == struct.pack(">Q", 2) + b"\x00\x01"


def test_recv_message_rejects_oversized_header(pair):
    left, right = pair
    left.sendall(struct.pack(">Q", protocol.MAX_HEADER_BYTES + 1))
    with pytest.raises(protocol.ProtocolError, match="exceeds"):
        protocol.recv_message(right)


def test_recv_message_rejects_header_that_is_not_json(pair):
    left, right = pair
    left.sendall(struct.pack(">Q", 5) + b"hello")
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.recv_message(right)


def test_recv_message_rejects_header_without_type(pair):
    left, right = pair
    body = json.dumps({"id": 1}).encode()
    left.sendall(struct.pack(">Q", len(body)) + body)
    with pytest.raises(protocol.ProtocolError, match="'type'"):
        protocol.recv_message(right)


def test_recv_message_reports_stream_cut_mid_frame(pair):
    left, right = pair
    body = json.dumps({"type": "result", "frames": 1}).encode()
    left.sendall(struct.pack(">Q", len(body)) + body + struct.pack(">Q", 100) + b"only-some")
    left.close()
    with pytest.raises(protocol.PeerClosed, match="91 of 100 bytes"):
        protocol.recv_message(right)


def test_payload_sends_numpy_array_out_of_band():
    array = np.arange(1 << 20, dtype=np.float32)
    frames = protocol.dump_payload({"x": array})
    assert len(frames) == 2 and frames[1].nbytes == array.nbytes  # the array is not inside the pickle stream
    loaded = protocol.load_payload([bytearray(frame) for frame in frames])["x"]
    assert np.array_equal(loaded, array) and loaded.flags.writeable


def test_payload_round_trips_a_closure():
    offset = 5
    frames = protocol.dump_payload(lambda x: x + offset)
    assert protocol.load_payload([bytearray(frame) for frame in frames])(1) == 6


def test_local_versions_reads_metadata_without_importing_jax():
    code = ("import sys; from tpuplane.runtime import sidecar_protocol as p; v = p.local_versions(); "
            "print(v.python, 'jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == [protocol.local_versions().python, "False"]


CLIENT = RuntimeVersions(python="3.12.4", jax="0.10.0", jaxlib="0.10.0", cloudpickle="3.1.1")


def _worker(**changes):
    return RuntimeVersions(**{**CLIENT.to_json(), **changes})


def test_lockstep_accepts_identical_versions_and_python_patch_skew():
    assert protocol.lockstep_mismatches(CLIENT, _worker(python="3.12.9")) == []


def test_lockstep_accepts_jax_absent_on_both_sides():
    without_jax = _worker(jax=None, jaxlib=None)
    assert protocol.lockstep_mismatches(without_jax, without_jax) == []


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"python": "3.11.7"}, "python major.minor: client 3.12.4, worker 3.11.7"),
        ({"jax": "0.10.2"}, "jax: client 0.10.0, worker 0.10.2"),
        ({"jaxlib": "0.9.0"}, "jaxlib: client 0.10.0, worker 0.9.0"),
        ({"jax": None}, "jax: client 0.10.0, worker not installed"),
        ({"cloudpickle": "3.0.0"}, "cloudpickle: client 3.1.1, worker 3.0.0"),
    ],
)
def test_lockstep_names_each_violated_rule(changes, expected):
    assert protocol.lockstep_mismatches(CLIENT, _worker(**changes)) == [expected]


def test_runtime_versions_from_json_rejects_non_object():
    with pytest.raises(protocol.ProtocolError, match="versions"):
        RuntimeVersions.from_json("3.12")
