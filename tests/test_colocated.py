"""`tpuplane.runtime.colocated`: checked colocated Python calls, on_each_host, and the clear errors for its traps.

Everything runs real JAX colocated Python on 8 CPU devices: on CPU, JAX cloudpickles the function and runs it
in this process, so pickling, shardings and per-host results are real; there is one host.
"""

from __future__ import annotations

import os
import sys

import cpu_jax  # noqa: F401 (JAX on 8 CPU devices, set before any backend exists)
import jax

import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tpuplane.runtime.colocated import (
    ColocatedUsageError,
    HostIdentity,
    colocated,
    device_carrier,
    find_captured_devices,
    host_identity,
    on_each_host,
)


@pytest.fixture(scope="module")
def devices() -> list[jax.Device]:
    if jax.device_count() < 8:
        pytest.skip(
            f"needs 8 CPU devices but JAX started with {jax.device_count()}: another module used JAX before this "
            f"one could set jax_num_cpu_devices; set it in tests/conftest.py"
        )
    return jax.devices()[:8]


@pytest.fixture
def carrier(devices) -> jax.Array:
    return device_carrier(devices)


def add_one(x):
    return x + 1


# --- device carrier and host identity ---------------------------------------------------------------------------


def test_device_carrier_puts_one_element_on_each_cpu_device(devices, carrier):
    assert carrier.shape == (8,)
    assert {shard.device for shard in carrier.addressable_shards} == set(devices)
    assert all(shard.data.shape == (1,) for shard in carrier.addressable_shards)


def test_device_carrier_from_mesh_spans_the_whole_mesh(devices):
    mesh = Mesh(np.array(devices).reshape(4, 2), ("data", "model"))
    carrier = device_carrier(mesh)
    assert carrier.shape == (8,)
    assert carrier.sharding.spec == PartitionSpec(("data", "model"))


def test_host_identity_on_this_machine_is_host_0_of_1(carrier):
    assert host_identity(carrier) == HostIdentity(index=0, count=1)


# --- colocated() ------------------------------------------------------------------------------------------------


def test_colocated_runs_the_function_on_the_argument_devices(carrier):
    x = jax.device_put(np.arange(8, dtype=np.float32), carrier.sharding)
    result = colocated(add_one)(x)
    np.testing.assert_array_equal(np.asarray(result), np.arange(1, 9, dtype=np.float32))
    assert result.sharding == carrier.sharding


def test_colocated_accepts_a_captured_sharding(carrier):
    replicated = NamedSharding(carrier.sharding.mesh, PartitionSpec())

    def total(x):
        return jax.device_put(x.sum(), replicated)

    x = jax.device_put(np.arange(8, dtype=np.float32), carrier.sharding)
    assert float(colocated(total)(x)) == 28.0


def test_colocated_numpy_argument_says_to_device_put_onto_a_sharding():
    with pytest.raises(ColocatedUsageError, match=r"argument 0 is a ndarray; device_put it onto a sharding"):
        colocated(add_one)(np.arange(8.0))


def test_colocated_python_scalar_argument_is_rejected(carrier):
    x = jax.device_put(np.arange(8.0), carrier.sharding)
    with pytest.raises(ColocatedUsageError, match=r"as step= is a int"):
        colocated(lambda x, step: x)(x, step=3)


def test_colocated_numpy_result_says_to_build_a_jax_array(carrier):
    to_numpy = colocated(lambda x: np.asarray(x))
    with pytest.raises(ColocatedUsageError, match=r"returned by .* is a ndarray; build the result"):
        to_numpy(carrier)


def test_colocated_call_without_arrays_says_to_pass_a_device_carrier():
    with pytest.raises(ColocatedUsageError, match=r"pass device_carrier\(mesh\)"):
        colocated(lambda: None)()


def test_colocated_error_is_a_type_error():
    assert issubclass(ColocatedUsageError, TypeError)


# --- captured jax.Device trap -----------------------------------------------------------------------------------

_GLOBAL_DEVICE = None  # set by the fixture below, read by `uses_global_device`


def uses_closure_device(device):
    return lambda x: jax.device_put(x, device)


def uses_default_argument_device(device):
    def fn(x, where=device):
        return jax.device_put(x, where)

    return fn


def uses_device_in_a_list(device):
    targets = [{"first": device}]
    return lambda x: jax.device_put(x, targets[0]["first"])


def uses_global_device(device, monkeypatch):
    monkeypatch.setitem(globals(), "_GLOBAL_DEVICE", device)
    return lambda x: jax.device_put(x, _GLOBAL_DEVICE)


@pytest.mark.parametrize(
    "make_fn",
    [uses_closure_device, uses_default_argument_device, uses_device_in_a_list, uses_global_device],
    ids=["closure", "default-argument", "nested-container", "global"],
)
def test_colocated_captured_device_is_rejected_before_jax(make_fn, devices, monkeypatch):
    args = (devices[3], monkeypatch) if make_fn is uses_global_device else (devices[3],)
    with pytest.raises(ColocatedUsageError, match=r"captures jax\.Device objects \(.*3\).*Capture a sharding"):
        colocated(make_fn(*args))


def test_find_captured_devices_skips_meshes_and_shardings(devices):
    sharding = NamedSharding(Mesh(np.array(devices), ("x",)), PartitionSpec("x"))
    assert find_captured_devices(lambda: (sharding, sharding.mesh)) == []


def test_find_captured_devices_names_every_device(devices):
    pair = devices[:2]
    assert set(find_captured_devices(lambda: pair)) == set(pair)


# --- missing cloudpickle ----------------------------------------------------------------------------------------


@pytest.fixture
def without_cloudpickle(monkeypatch):
    """Simulates an environment without cloudpickle: a None entry in sys.modules makes `import` fail."""
    monkeypatch.setitem(sys.modules, "cloudpickle", None)


def test_colocated_without_cloudpickle_gives_the_install_hint(without_cloudpickle):
    with pytest.raises(ImportError, match=r"pip install tpuplane\[runtime\]"):
        colocated(add_one)


def test_on_each_host_without_cloudpickle_gives_the_install_hint(devices, without_cloudpickle):
    with pytest.raises(ImportError, match=r"pip install tpuplane\[runtime\]"):
        on_each_host(lambda index, count: index, mesh_or_devices=devices)


# --- on_each_host -----------------------------------------------------------------------------------------------


def test_on_each_host_gathers_one_result_per_host(devices):
    results = on_each_host(lambda index, count: {"host": (index, count), "pid": os.getpid()}, mesh_or_devices=devices)
    assert results == [{"host": (0, 1), "pid": os.getpid()}]


def test_on_each_host_accepts_a_mesh(devices):
    mesh = Mesh(np.array(devices).reshape(2, 4), ("data", "model"))
    assert on_each_host(lambda index, count: np.arange(3) * count, mesh_or_devices=mesh)[0].tolist() == [0, 1, 2]


def test_on_each_host_too_large_result_names_the_limit(devices):
    with pytest.raises(ColocatedUsageError, match=r"raise max_result_bytes \(now 64\)"):
        on_each_host(lambda index, count: b"x" * 100, mesh_or_devices=devices, max_result_bytes=64)


def test_on_each_host_captured_device_is_rejected(devices):
    device = devices[0]
    with pytest.raises(ColocatedUsageError, match=r"on_each_host function .* captures jax\.Device"):
        on_each_host(lambda index, count: str(device), mesh_or_devices=devices)


def test_on_each_host_single_device_says_to_pass_a_sequence(devices):
    with pytest.raises(ColocatedUsageError, match=r"not a single device"):
        on_each_host(lambda index, count: index, mesh_or_devices=devices[0])
