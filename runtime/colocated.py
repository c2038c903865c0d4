"""Run Python next to the accelerators with JAX colocated Python, with its traps turned into clear errors.

`jax.experimental.colocated_python` ships a function (cloudpickled) to the CPU devices that sit on the same hosts
as the accelerators and runs it there, once per host. It is powerful and unforgiving: it takes only `jax.Array`s
on those CPU devices, it cannot pickle a bare `jax.Device`, and it needs cloudpickle, which jax does not declare.
Each mistake surfaces deep inside JAX as an `AttributeError ... 'sharding'` or `cannot pickle 'Device' object`.
This module checks for them first and says what to do instead:

- `colocated(fn)`: `colocated_python` with the checks;
- `on_each_host(fn, mesh_or_devices=...)`: run `fn(process_index, process_count)` once per host, gather the results;
- `device_carrier(...)`: the small sharded array that makes a zero-payload call reach every host.

On a CPU-only machine (tests, laptops) JAX runs the colocated function in the calling process after a cloudpickle
round trip, so pickling, sharding and per-host state are exercised for real; only the sidecar transport is not.
"""

from __future__ import annotations

import functools
import importlib
import pickle
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.experimental.colocated_python import colocated_cpu_devices, colocated_python
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

INSTALL_HINT = "pip install tpuplane[runtime]"


class ColocatedUsageError(TypeError):
    """A known colocated-Python mistake, reported before JAX fails with a less helpful message."""


def require_cloudpickle():
    """Return the cloudpickle module; JAX needs it for colocated Python but does not depend on it."""
    try:
        return importlib.import_module("cloudpickle")
    except ImportError as missing:
        raise ImportError(
            f"JAX colocated Python ships functions with cloudpickle, which is not installed. Install it with: "
            f"{INSTALL_HINT}"
        ) from missing


# --- Trap: a bare jax.Device captured by the function --------------------------------------------------------


class _Discard:
    """A write-only sink, so probing a function that captures large arrays does not copy them."""

    def write(self, data) -> int:
        return len(data)


# JAX's colocated serializer has its own reducers for these; they travel fine and are what users should capture.
_SHARDING_TYPES = (Mesh, NamedSharding, SingleDeviceSharding)


def find_captured_devices(obj: Any) -> list[jax.Device]:
    """List the bare `jax.Device`s that pickling `obj` would meet.

    Detection is by pickling, not by reading closure cells: a cloudpickle pickler walks exactly what colocated
    Python will ship (closures, referenced globals, default arguments, nested containers, bound objects) and notes
    every device on the way. Shardings and meshes are not descended into, because JAX pickles them by device id.
    Other pickling failures are left to JAX to report.
    """
    cloudpickle = require_cloudpickle()
    found: list[jax.Device] = []

    class DeviceProbe(cloudpickle.Pickler):
        def reducer_override(self, value):
            if isinstance(value, jax.Device):
                found.append(value)
                return tuple, ()
            if isinstance(value, _SHARDING_TYPES):
                return tuple, ()
            return super().reducer_override(value)

    try:
        DeviceProbe(_Discard()).dump(obj)
    except Exception:  # noqa: BLE001 - any other pickling problem is reported by JAX in its own words
        pass
    return found


def reject_captured_devices(obj: Any, what: str) -> None:
    """Raise `ColocatedUsageError` if `obj` captures a bare `jax.Device` (colocated Python cannot pickle one)."""
    devices = find_captured_devices(obj)
    if devices:
        shown = ", ".join(sorted({str(d) for d in devices}))
        raise ColocatedUsageError(
            f"{what} captures jax.Device objects ({shown}); colocated Python cannot pickle a bare device. "
            f"Capture a sharding or mesh instead, e.g. NamedSharding(Mesh(cpu_devices, ('x',)), PartitionSpec()), "
            f"and read devices from it on the host (sharding.addressable_devices)."
        )


# --- Trap: numpy arrays or Python values where jax.Arrays are required ---------------------------------------


_PUT_ARGUMENT = (
    "device_put it onto a sharding of the colocated CPU devices first, e.g. "
    "jax.device_put(x, NamedSharding(colocated_cpu_mesh(mesh), PartitionSpec()))"
)
_BUILD_RESULT = "build the result with jax.make_array_from_callback(shape, input.sharding, ...) instead"


def reject_non_arrays(tree: Any, where: str, *, numpy_fix: str = _PUT_ARGUMENT) -> None:
    """Raise `ColocatedUsageError` unless every leaf of `tree` is a `jax.Array`."""
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if isinstance(leaf, jax.Array):
            continue
        if isinstance(leaf, np.ndarray):
            fix = numpy_fix
        else:
            fix = "wrap it in an array (np.asarray) and device_put it onto a sharding of the colocated CPU devices"
        at = f" at {jax.tree_util.keystr(path)}" if path else ""
        raise ColocatedUsageError(
            f"colocated Python takes and returns only jax.Array, but the value {where}{at} is a "
            f"{type(leaf).__name__}; {fix}."
        )


# --- Which host am I? -------------------------------------------------------------------------------------------


class HostIdentity(NamedTuple):
    """A host's place among the hosts an array spans: what `make_dataset(index, count)` receives."""

    index: int
    count: int


def host_identity(array: jax.Array) -> HostIdentity:
    """Derive this host's index and the host count from the devices of `array`.

    Called inside a colocated function: the array's sharding spans every host, its addressable shards are the
    local ones. The index is the rank of the local process among the processes the sharding spans, so it comes
    from the data itself rather than from global JAX state on the host.
    """
    processes = sorted({d.process_index for d in array.sharding.device_set})
    here = array.addressable_shards[0].device.process_index
    return HostIdentity(processes.index(here), len(processes))


def colocated_cpu_mesh(mesh_or_devices: Mesh | Sequence[jax.Device]) -> Mesh:
    """The CPU mesh colocated with an accelerator mesh (same shape and axis names), or a 1-D one for devices."""
    if isinstance(mesh_or_devices, Mesh):
        return colocated_cpu_devices(mesh_or_devices)
    if isinstance(mesh_or_devices, jax.Device):
        raise ColocatedUsageError("mesh_or_devices must be a Mesh or a sequence of devices, not a single device.")
    devices = colocated_cpu_devices(tuple(mesh_or_devices))
    return Mesh(np.array(devices), ("hosts",))


def device_carrier(mesh_or_devices: Mesh | Sequence[jax.Device]) -> jax.Array:
    """A tiny array with one element on each colocated CPU device.

    Colocated Python runs a function on the hosts that hold its arguments and cannot be called without one, so a
    call that needs no data passes this array: every host receives its shards and can derive its identity.
    """
    mesh = colocated_cpu_mesh(mesh_or_devices)
    every_device = NamedSharding(mesh, PartitionSpec(tuple(mesh.axis_names)))
    return jax.device_put(np.zeros(mesh.devices.size, np.int8), every_device)


# --- Public entry points -----------------------------------------------------------------------------------------


def colocated(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`jax.experimental.colocated_python(fn)` with its known traps checked first.

    At wrap time: cloudpickle is installed, `fn` captures no bare `jax.Device`. At each call: every argument is a
    `jax.Array` and there is at least one (it tells JAX which hosts to run on). On the host: `fn` returns only
    `jax.Array`s. Each failure is a `ColocatedUsageError` (or `ImportError` for cloudpickle) saying what to do.
    """
    require_cloudpickle()
    reject_captured_devices(fn, what=f"colocated function {_name(fn)}")

    @functools.wraps(fn)
    def on_host(*args, **kwargs):
        result = fn(*args, **kwargs)
        reject_non_arrays(result, where=f"returned by {_name(fn)}", numpy_fix=_BUILD_RESULT)
        return result

    remote = colocated_python(on_host)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not jax.tree_util.tree_leaves((args, kwargs)):
            raise ColocatedUsageError(
                f"{_name(fn)} was called without arrays, so JAX cannot tell which hosts to run it on; "
                f"pass device_carrier(mesh) as an argument."
            )
        for position, arg in enumerate(args):
            reject_non_arrays(arg, where=f"passed to {_name(fn)} as argument {position}")
        for keyword, arg in kwargs.items():
            reject_non_arrays(arg, where=f"passed to {_name(fn)} as {keyword}=")
        return remote(*args, **kwargs)

    # As on JAX's own colocated callable (whose specialized callables run without the checks above); it also marks
    # `call` as colocated, so that a LocalSidecar runs `fn` itself.
    call.specialize = remote.specialize
    return call


def on_each_host(
    fn: Callable[[int, int], Any],
    *,
    mesh_or_devices: Mesh | Sequence[jax.Device],
    max_result_bytes: int = 16 * 1024,
) -> list[Any]:
    """Run `fn(process_index, process_count)` once on every host of `mesh_or_devices`; return the results by host.

    For small facts (hostnames, free disk, library versions), not data: each result is pickled on its host into a
    fixed-size row (`max_result_bytes`) of one global uint8 array, which the controller reads back.
    """
    require_cloudpickle()
    reject_captured_devices(fn, what=f"on_each_host function {_name(fn)}")
    carrier = device_carrier(mesh_or_devices)
    row_bytes = _HEADER.itemsize + max_result_bytes

    def run_on_host(carrier: jax.Array) -> jax.Array:
        host = host_identity(carrier)
        payload = pickle.dumps(fn(host.index, host.count))
        if len(payload) > max_result_bytes:
            raise ColocatedUsageError(
                f"on_each_host: {_name(fn)} returned {len(payload)} pickled bytes on host {host.index}; "
                f"raise max_result_bytes (now {max_result_bytes}) or return less."
            )
        row = np.zeros((1, row_bytes), np.uint8)
        row[0, : _HEADER.itemsize] = np.array([(host.index, host.count, len(payload))], _HEADER).view(np.uint8)
        row[0, _HEADER.itemsize : _HEADER.itemsize + len(payload)] = np.frombuffer(payload, np.uint8)
        # Every local device holds this host's row; the controller keeps one row per host index.
        return jax.make_array_from_callback((carrier.shape[0], row_bytes), carrier.sharding, lambda _: row)

    rows = np.asarray(colocated_python(run_on_host)(carrier))
    results: dict[int, Any] = {}
    count = 0
    for row in rows:
        index, count, size = (int(v) for v in row[: _HEADER.itemsize].view(_HEADER)[0])
        if index not in results:
            results[index] = pickle.loads(row[_HEADER.itemsize : _HEADER.itemsize + size].tobytes())
    return [results[i] for i in range(count)]


# Each on_each_host row starts with who wrote it and how long the pickled result is.
_HEADER = np.dtype([("index", "<i8"), ("count", "<i8"), ("size", "<i8")])


def _name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or repr(fn)
