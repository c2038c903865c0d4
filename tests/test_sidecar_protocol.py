"""The sidecar wire format over real sockets, payload pickling, and the lock-step version rule."""

from __future__ import annotations

import json
import pickle
import select
import socket
import struct
import subprocess
import sys
import threading
import time

import cloudpickle
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime import sidecar_wire as wire
from tpuplane.runtime.sidecar_protocol import RuntimeVersions


@pytest.fixture
def pair():
    """A connected pair of real stream sockets."""
    left, right = socket.socketpair()
    yield left, right
    left.close()
    right.close()


def _send_in_thread(sock, *message):
    """Large messages exceed the socket buffer, so the writer must run while the reader reads."""
    thread = threading.Thread(target=wire.send, args=(sock, *message))
    thread.start()
    return thread


def _header(*, magic=wire.MAGIC, code=3, frames=0, meta=0, request_id=1):
    return wire.HEADER.pack(magic, code, frames, meta, request_id)


def test_message_round_trip_keeps_type_id_meta_and_frames(pair):
    left, right = pair
    wire.send(left, protocol.CALL, 7, {"jax": True}, [b"abc", bytearray(b""), memoryview(b"xyz")])
    message = wire.Reader(right).receive()
    assert (message.type, message.id, message.meta) == (protocol.CALL, 7, {"jax": True})
    assert [bytes(frame) for frame in message.frames] == [b"abc", b"", b"xyz"]


@settings(max_examples=30, deadline=None)
@given(
    type_=st.sampled_from(wire.TYPES),
    request_id=st.integers(0, 2**64 - 1),
    meta=st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=20) | st.booleans() | st.none(),
                         max_size=5),
    frames=st.lists(st.binary(max_size=3000), max_size=6),
)
def test_message_round_trip_of_any_meta_and_frames(type_, request_id, meta, frames):
    left, right = socket.socketpair()
    with left, right:
        wire.send(left, type_, request_id, meta, frames)
        message = wire.Reader(right).receive()
    assert (message.type, message.id, message.meta) == (type_, request_id, meta)
    assert [bytes(frame) for frame in message.frames] == frames


def test_message_with_64_mib_frame_arrives_intact_and_writable(pair):
    left, right = pair
    payload = np.random.default_rng(0).integers(0, 256, 64 << 20, dtype=np.uint8)
    writer = _send_in_thread(left, protocol.RESULT, 1, None, [payload])
    message = wire.Reader(right).receive()
    writer.join()
    received = np.frombuffer(message.frames[0], dtype=np.uint8)
    assert np.array_equal(received, payload) and received.flags.writeable


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
    reader = threading.Thread(target=lambda: received.update(message=wire.Reader(right, wait=wait_recv).receive()))
    reader.start()
    payload = np.arange(4 << 20, dtype=np.float32)
    while waits["recv"] == 0:  # the reader is inside its first wait before anything is sent
        time.sleep(0.001)
    wire.send(left, protocol.RESULT, 1, None, [payload], wait=wait_send)
    reader.join(timeout=30)
    assert np.array_equal(np.frombuffer(received["message"].frames[0], dtype=np.float32), payload)
    assert waits["send"] > 0 and waits["recv"] > 0


def test_message_layout_is_fixed_header_then_lengths_metadata_and_frames(pair):
    left, right = pair
    wire.send(left, protocol.BYE, 2, {"a": 1}, [b"\x00\x01"])
    left.close()
    raw = b""
    while chunk := right.recv(4096):
        raw += chunk
    meta = b'{"a":1}'
    assert raw == (wire.HEADER.pack(wire.MAGIC, wire.TYPES.index(protocol.BYE), 1, len(meta), 2)
                   + struct.pack("<Q", 2) + meta + b"\x00\x01")
    assert wire.HEADER.size == 24


def test_call_and_result_messages_carry_no_metadata(pair):
    left, right = pair
    wire.send(left, protocol.CALL, 1, None, [b"f", b"args"])
    assert struct.unpack_from("<I", right.recv(4096), 12) == (0,)  # the metadata length field


def test_reader_keeps_a_second_message_that_arrived_with_the_first(pair):
    """Both replies can be on the socket at once (a late one, then the awaited one): the second must not be lost,
    and `buffered` says it is already here, where a wait on the socket would not see it."""
    left, right = pair
    wire.send(left, protocol.RESULT, 1, None, [b"late"])
    wire.send(left, protocol.RESULT, 2, None, [b"awaited"])
    time.sleep(0.05)
    reader = wire.Reader(right)
    assert reader.receive().id == 1
    assert reader.buffered and not select.select([right], [], [], 0)[0]
    assert bytes(reader.receive().frames[0]) == b"awaited"
    assert not reader.buffered


def test_reader_rejects_another_wire_format(pair):
    """What the previous format (JSON headers behind a big-endian length) sends first."""
    left, right = pair
    body = json.dumps({"type": "hello"}).encode()
    left.sendall(struct.pack(">Q", len(body)) + body + bytes(24))
    with pytest.raises(protocol.ProtocolError, match="another wire format"):
        wire.Reader(right).receive()


def test_reader_rejects_an_unknown_message_type(pair):
    left, right = pair
    left.sendall(_header(code=len(wire.TYPES)))
    with pytest.raises(protocol.ProtocolError, match="unknown message type code"):
        wire.Reader(right).receive()


def test_reader_rejects_oversized_metadata_before_reading_it(pair):
    left, right = pair
    left.sendall(_header(meta=wire.MAX_META_BYTES + 1))
    with pytest.raises(protocol.ProtocolError, match="metadata of .* exceeds"):
        wire.Reader(right).receive()


def test_reader_rejects_more_frames_than_the_limit(pair):
    left, right = pair
    left.sendall(_header(frames=wire.MAX_FRAMES + 1))
    with pytest.raises(protocol.ProtocolError, match="frames; at most"):
        wire.Reader(right).receive()


def test_reader_refuses_a_frame_larger_than_the_limit_before_allocating_it(pair):
    left, right = pair
    left.sendall(_header(frames=1) + struct.pack("<Q", wire.MAX_FRAME_BYTES + 1))
    with pytest.raises(protocol.ProtocolError, match="frame of .* exceeds"):
        wire.Reader(right).receive()


def test_reader_rejects_metadata_that_is_not_a_json_object(pair):
    left, right = pair
    left.sendall(_header(meta=5) + b"hello" + _header(meta=2) + b"[]")
    reader = wire.Reader(right)
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        reader.receive()
    with pytest.raises(protocol.ProtocolError, match="not a JSON object"):
        reader.receive()


def test_reader_reports_stream_cut_mid_header(pair):
    left, right = pair
    left.sendall(_header()[:10])
    left.close()
    with pytest.raises(protocol.PeerClosed, match="middle of a message, 14 more bytes"):
        wire.Reader(right).receive()


def test_reader_reports_stream_cut_mid_frame(pair):
    left, right = pair
    left.sendall(_header(frames=1) + struct.pack("<Q", 100) + b"only-some")
    left.close()
    with pytest.raises(protocol.PeerClosed, match="middle of a message, 91 more bytes"):
        wire.Reader(right).receive()


def test_reader_reports_end_of_stream_between_messages(pair):
    left, right = pair
    left.close()
    with pytest.raises(protocol.PeerClosed, match="^connection closed$"):
        wire.Reader(right).receive()


# -- payloads ----------------------------------------------------------------------------------------------------


def test_payload_sends_numpy_array_out_of_band():
    array = np.arange(1 << 20, dtype=np.float32)
    frames = wire.dump_payload({"x": array})
    assert len(frames) == 2 and frames[1].nbytes == array.nbytes  # the array is not inside the pickle stream
    loaded = wire.load_payload([bytearray(frame) for frame in frames])["x"]
    assert np.array_equal(loaded, array) and loaded.flags.writeable


def test_payload_of_a_large_array_through_a_socket_arrives_equal_and_writable(pair):
    """Large frames are received into fresh memory mapped for them, which becomes the new array's memory."""
    left, right = pair
    array = np.random.default_rng(1).standard_normal((2048, 1024))
    writer = _send_in_thread(left, protocol.RESULT, 1, None, wire.dump_payload(array))
    loaded = wire.load_payload(wire.Reader(right).receive().frames)
    writer.join()
    assert np.array_equal(loaded, array) and loaded.flags.writeable
    loaded[0, 0] = 42.0
    assert loaded[0, 0] == 42.0


@pytest.mark.parametrize("value", [((7,), {}), (([1, 2.5], "x"), {"factor": 3, "flag": None}), b"\x00" * 100,
                                   {"nested": (1, (2, [3]))}])
def test_payload_of_plain_data_is_what_cloudpickle_writes(value):
    assert wire.dump_payload(value) == [cloudpickle.dumps(value, protocol=5)]


def test_payload_with_a_function_in_the_arguments_goes_through_cloudpickle():
    offset = 5
    frames = wire.dump_payload(((lambda x: x + offset,), {}))
    (function,), _ = pickle.loads(frames[0])
    assert function(1) == 6


def test_payload_round_trips_a_closure():
    offset = 5
    frames = wire.dump_payload(lambda x: x + offset)
    assert wire.load_payload([bytearray(frame) for frame in frames])(1) == 6


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
