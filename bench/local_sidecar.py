"""How much the local sidecar adds over the fastest raw loopback round trip of the same bytes.

The baseline is as fair as we can make it: an echo server in its own process that reads each length-prefixed
message into ONE preallocated, reused buffer and sends it back with ONE send; the client sends each message with
one send from a prebuilt buffer and receives into a reused buffer. Its buffers come from the sidecar's own
allocator, which maps large ones with transparent huge pages (the kernel copies into them faster). For each case
the sidecar round trip (`call(identity, payload)`) and the raw echo of exactly the bytes that call puts on the
wire are timed in alternating rounds, so both see the same machine load; each round times a batch, and the report
gives the median and min-max of the per-round ratios.

Both pairs of processes also get the same placement on CPUs (`--placement`). Left free, the scheduler keeps each
pair where it first put it, on one CPU or across two, and on a small VM a wake-up across CPUs costs ~20 us: one
pair on one CPU and the other across two measure placement, not the sidecar.

Run: .venv/bin/python bench/local_sidecar.py [--rounds 7] [--placement same-cpu|split|free]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable

import cloudpickle
import numpy as np

from tpuplane.runtime import sidecar_wire as wire
from tpuplane.runtime.local_sidecar import LocalSidecar

ECHO_SERVER = textwrap.dedent(
    """
    import socket, struct, sys
    from tpuplane.runtime.sidecar_wire import allocate
    listener = socket.create_server(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buffer = allocate(8)
    while True:
        view = memoryview(buffer)[:8]
        while view:
            n = conn.recv_into(view)
            if not n:
                sys.exit(0)
            view = view[n:]
        del view
        size = struct.unpack(">Q", buffer[:8])[0]
        if len(buffer) < 8 + size:
            buffer = allocate(8 + size)
        view = memoryview(buffer)[8:8 + size]
        while view:
            view = view[conn.recv_into(view):]
        conn.sendall(memoryview(buffer)[:8 + size])
    """
)


class RawEcho:
    """A length-prefixed echo over loopback to another process, buffers reused, one send per message."""

    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", ECHO_SERVER], stdout=subprocess.PIPE, text=True)
        port = int(self.process.stdout.readline())
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reply = wire.allocate(8)

    def prepare(self, size: int):
        if len(self.reply) < 8 + size:
            self.reply = wire.allocate(8 + size)
        message = wire.allocate(8 + size)
        message[:8] = size.to_bytes(8, "big")
        return message

    def round_trip(self, message) -> None:
        self.sock.sendall(message)
        view = memoryview(self.reply)[:len(message)]
        while view:
            view = view[self.sock.recv_into(view):]

    def close(self) -> None:
        self.sock.close()
        self.process.wait()


def identity(value):
    return value


def wire_bytes(value) -> int:
    """What one call of identity(value) writes: header, frame lengths, pickled function and arguments, buffers."""
    frames = [wire.FUNCTION_ID.pack(1), cloudpickle.dumps(identity, protocol=5), *wire.dump_payload(((value,), {}))]
    return wire.HEADER.size + 8 * len(frames) + sum(memoryview(frame).nbytes for frame in frames)


def timed(batch: int, action) -> float:
    started = time.perf_counter()
    for _ in range(batch):
        action()
    return (time.perf_counter() - started) / batch


def place_servers(placement: str) -> Callable[[], None]:
    """Pin this process where the servers go (they inherit it when started); return what then moves the client."""
    cpus = sorted(os.sched_getaffinity(0))
    if placement == "same-cpu":
        os.sched_setaffinity(0, cpus[:1])
    elif placement == "split":
        if len(cpus) < 2:
            raise SystemExit("--placement split needs two CPUs")
        os.sched_setaffinity(0, cpus[1:2])
        return lambda: os.sched_setaffinity(0, cpus[:1])
    return lambda: None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--placement", choices=("same-cpu", "split", "free"), default="same-cpu",
                        help="same-cpu: every process on one CPU; split: the client on one CPU, the echo server and "
                             "the sidecar worker on another; free: wherever the scheduler puts each pair")
    options = parser.parse_args()
    big = 64 << 20
    cases = [
        ("small call (int)", 7, 500),
        ("64 MiB numpy uint8", np.frombuffer(os.urandom(big), dtype=np.uint8).copy(), 2),
        ("64 MiB bytes", os.urandom(big), 2),
    ]
    place_client = place_servers(options.placement)
    echo = RawEcho()
    with LocalSidecar() as sidecar:
        place_client()
        print(f"{'case':<22}{'sidecar':>12}{'raw echo':>12}{'ratio median':>14}{'min-max':>14}")
        for name, value, batch in cases:
            assert sidecar.call(identity, value) is not None  # warm up: first call imports in the worker
            message = echo.prepare(wire_bytes(value))
            echo.round_trip(message)
            sidecar_times, raw_times, ratios = [], [], []
            for round_ in range(options.rounds):
                order = [("s", lambda: sidecar.call(identity, value)), ("r", lambda: echo.round_trip(message))]
                results = {}
                for label, action in (order if round_ % 2 == 0 else order[::-1]):
                    results[label] = timed(batch, action)
                sidecar_times.append(results["s"])
                raw_times.append(results["r"])
                ratios.append(results["s"] / results["r"])
            s, r = statistics.median(sidecar_times), statistics.median(raw_times)
            unit, scale = ("us", 1e6) if s < 0.01 else ("ms", 1e3)
            print(f"{name:<22}{s * scale:>9.1f} {unit}{r * scale:>9.1f} {unit}{statistics.median(ratios):>13.2f}x"
                  f"{min(ratios):>8.2f}-{max(ratios):.2f}x")
    echo.close()
    print(f"({options.rounds} alternating rounds; small calls in batches of 500, 64 MiB in batches of 2; every round "
          f"trip crosses a process boundary over loopback; placement {options.placement}.)")


if __name__ == "__main__":
    main()
