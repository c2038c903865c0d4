"""Create a file on every host next to the accelerators, with JAX colocated Python.

The first example of the colocated-Python sidecar's original guide, corrected so that it runs. Here, on CPU:

    python examples/colocated/create_file.py --directory /tmp/colocated

On Pathways, run the same `main()` inside `with tpuplane.runtime.connect(...):` (with `proxy_options=
["sidecar:true"]`): the function then runs in the sidecar of every TPU host, and writes the file there.

What the original got wrong: `jax.process_id` does not exist (`jax.process_index()` does); `np` was never imported;
the dummy array went to `jax.devices()[0]`, an accelerator, where colocated Python takes only arrays on the
colocated CPU devices (and reaches only that one host); the file went to whatever directory the sidecar happened to
run in; and an error was printed on a remote host, where nobody reads it, instead of failing the call.
`tpuplane.runtime.on_each_host` takes care of the carrier array, runs the function once per host and returns what
each returned (here, the file it wrote).
"""

from __future__ import annotations

import argparse
import socket
import tempfile
from pathlib import Path

import jax

from tpuplane.runtime import on_each_host


def create_a_file(directory: str):
    """A function for every host: write `directory/written_on_host_<i>.txt` there, return where and on which host."""

    def on_the_host(process_index: int, process_count: int) -> tuple[str, str]:
        path = Path(directory) / f"written_on_host_{process_index}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"This is written on host {process_index} of {process_count} ({socket.gethostname()})\n")
        return socket.gethostname(), str(path)

    return on_the_host


def main(directory: str) -> list[tuple[str, str]]:
    written = on_each_host(create_a_file(directory), mesh_or_devices=jax.devices())
    for host, path in written:
        print(f"{host}: wrote {path}")
    return written


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", default=str(Path(tempfile.gettempdir()) / "tpuplane-colocated-example"),
                        help="where each host writes its file (on that host)")
    main(parser.parse_args().directory)
