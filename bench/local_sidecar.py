"""How much the local sidecar adds over moving the same bytes through a raw loopback socket.

Both sides cross a process boundary: the baseline is an echo server in its own process that reads a length-
prefixed message into a preallocated buffer and writes it back. For each case the sidecar round trip
(`call(identity, payload)`) is timed beside a raw echo of exactly the bytes that call puts on the wire.

Run: .venv/bin/python bench/local_sidecar.py
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np

from tpuplane.runtime import sidecar_protocol as protocol
from tpuplane.runtime.local_sidecar import LocalSidecar

ECHO_SERVER = textwrap.dedent(
    """
    import socket, struct, sys
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    prefix = bytearray(8)
    while True:
        view = memoryview(prefix)
        while view:
            n = conn.recv_into(view)
            if not n:
                sys.exit(0)
            view = view[n:]
        size = struct.unpack(">Q", prefix)[0]
        body = bytearray(size)
        view = memoryview(body)
        while view:
            view = view[conn.recv_into(view):]
        conn.sendall(prefix)
        conn.sendall(body)
    """
)


class RawEcho:
    """A length-prefixed echo over loopback to another process: the floor for any round trip."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE, text=True)
        port = int(self.process.stdout.readline())
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def round_trip(self, size: int, payload: bytes) -> None:
        self.sock.sendmsg([size.to_bytes(8, "big"), payload])
        reply = bytearray(8 + size)
        view = memoryview(reply)
        while view:
            view = view[self.sock.recv_into(view):]

    def close(self) -> None:
        self.sock.close()
        self.process.wait()


def identity(value):
    return value


def wire_bytes(value) -> int:
    """What one call of identity(value) writes in one direction: header plus pickle stream plus buffers."""
    frames = protocol.dump_payload((identity, (value,), {}))
    return 256 + sum(memoryview(frame).nbytes for frame in frames)


def best_of(repeats: int, action) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return min(timings) if repeats <= 10 else statistics.median(timings)


def main() -> None:
    big = 64 << 20
    cases = [
        ("small call (int)", 7, 2000),
        ("64 MiB numpy uint8", np.frombuffer(os.urandom(big), dtype=np.uint8).copy(), 7),
        ("64 MiB bytes", os.urandom(big), 7),
    ]
    echo = RawEcho()
    print(f"{'case':<22}{'sidecar':>14}{'raw socket':>14}{'ratio':>8}")
    with LocalSidecar() as sidecar:
        for name, value, repeats in cases:
            assert sidecar.call(identity, value) is not None  # warm up: first call imports in the worker
            sidecar_time = best_of(repeats, lambda: sidecar.call(identity, value))
            size = wire_bytes(value)
            filler = bytes(size)
            raw_time = best_of(repeats, lambda: echo.round_trip(size, filler))
            unit, scale = ("us", 1e6) if sidecar_time < 0.01 else ("ms", 1e3)
            print(f"{name:<22}{sidecar_time * scale:>11.1f} {unit}{raw_time * scale:>11.1f} {unit}"
                  f"{sidecar_time / raw_time:>7.2f}x")
    echo.close()
    print("(small: median of 2000; 64 MiB: best of 7. Both round trips cross a process boundary over loopback.)")


if __name__ == "__main__":
    main()
