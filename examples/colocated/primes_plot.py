"""Save a matplotlib plot on the sidecar, a dependency only the sidecar has, with JAX colocated Python.

The second example of the colocated-Python sidecar's original guide, corrected so that it runs. Here, the sidecar
is a LocalSidecar worker in a venv built (once, then cached) from `requirements.txt` beside this file, which is
the only place matplotlib is installed:

    python examples/colocated/primes_plot.py --directory /tmp/colocated

On Pathways, put matplotlib in the sidecar image's requirements (`sidecar/requirements.txt`) and call
`create_and_save_primes_plot(device_carrier(jax.devices()))` inside `with tpuplane.runtime.connect(...):`.

What the original got wrong: it called `create_and_save_plot`, which is not the function it defined; `jax.process_id`
does not exist (`jax.process_index()` does); it imported matplotlib on the client, which then needs it too (import
it in the function: only the sidecar runs it); on a host without a display matplotlib needs the `Agg` backend; the
plot went to whatever directory the sidecar ran in; the dummy array went to an accelerator device instead of the
colocated CPU devices; and errors were printed on a remote host instead of failing the call.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jax
from jax.experimental.colocated_python import colocated_python

from tpuplane.runtime import LocalSidecar
from tpuplane.runtime.colocated import device_carrier

REQUIREMENTS = Path(__file__).with_name("requirements.txt")


def plotter(directory: str):
    """The colocated function, as the guide writes it (a decorated function of a carrier array), saving into
    `directory` on the host that runs it."""

    @colocated_python
    def create_and_save_primes_plot(carrier: jax.Array) -> jax.Array:
        import matplotlib

        matplotlib.use("Agg")  # a TPU host has no display
        import matplotlib.pyplot as plt

        worker_id = jax.process_index()
        path = Path(directory) / f"simple_line_plot_worker_{worker_id}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        figure = plt.figure(figsize=(6, 4))
        plt.plot([1, 2, 3, 4, 5], [2, 3, 5, 7, 11], marker="o", linestyle="-")
        plt.xlabel("Nth prime")
        plt.ylabel("Prime")
        plt.title(f"Simple plot from worker {worker_id}")
        plt.grid(True)
        figure.savefig(path)
        plt.close(figure)
        return carrier

    return create_and_save_primes_plot


def main(directory: str) -> Path:
    create_and_save_primes_plot = plotter(directory)
    with LocalSidecar(venv_requirements=REQUIREMENTS) as sidecar:
        sidecar.call(create_and_save_primes_plot, device_carrier(jax.devices()))
    path = Path(directory) / "simple_line_plot_worker_0.png"
    print(f"the sidecar saved {path}")
    return path


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--directory", default=str(Path(tempfile.gettempdir()) / "tpuplane-colocated-example"),
                        help="where the sidecar saves the plot")
    main(parser.parse_args().directory)
