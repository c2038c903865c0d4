"""The wheel of tpuplane's sidecar runtime: what the sidecar image installs so that the helpers' pickles import there.

The last test builds a real venv from PyPI the way the image is built (the image's own `sidecar/requirements.txt`
and this wheel; cached under ~/.cache/tpuplane once built) and loads there the very pickles JAX's colocated Python
ships for `RemoteIterator` and `on_each_host`, recorded on the way out of this process.
"""

from __future__ import annotations

import hashlib
import os
import sys
import zipfile
from pathlib import Path

import cpu_jax  # noqa: F401 (JAX on 8 CPU devices, set before any backend exists)
import jax
import numpy as np
import pytest
from jax.experimental.colocated_python import func as colocated_func
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from tpuplane.runtime import sidecar_wheel
from tpuplane.runtime.colocated import on_each_host
from tpuplane.runtime.local_sidecar import LocalSidecar, pickled_by_value
from tpuplane.runtime.remote_iterator import RemoteIterator

REPO = Path(__file__).resolve().parents[1]


def test_runtime_wheel_holds_the_sidecar_modules_and_their_requirements(tmp_path):
    wheel = sidecar_wheel.build_runtime_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(name for name in names if name.endswith("/METADATA"))).decode()
    assert [name for name in names if name.endswith(".py")] == sorted(
        f"tpuplane/runtime/{module}.py" for module in sidecar_wheel.SIDECAR_MODULES)
    assert "tpuplane/runtime/session.py" not in names  # connect() never runs on a sidecar
    assert "Name: tpuplane-runtime" in metadata
    assert [line.split(": ", 1)[1] for line in metadata.splitlines() if line.startswith("Requires-Dist")] == list(
        sidecar_wheel.REQUIREMENTS)


def test_runtime_wheel_is_the_same_bytes_wherever_and_whenever_it_is_built(tmp_path, monkeypatch):
    first = sidecar_wheel.build_runtime_wheel(tmp_path / "here")
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")  # a build environment that asks for another date
    os.umask(os.umask(0o077))
    second = sidecar_wheel.build_runtime_wheel(tmp_path / "elsewhere" / "deeper")
    assert first.name == second.name
    assert hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    assert os.environ["SOURCE_DATE_EPOCH"] == "1700000000"  # left as it was


def test_runtime_wheel_name_follows_what_it_holds():
    sources = sidecar_wheel.runtime_sources()
    edited = {**sources, "tpuplane/runtime/colocated.py": sources["tpuplane/runtime/colocated.py"] + b"\n# edit\n"}
    assert sidecar_wheel.runtime_wheel_name(edited) != sidecar_wheel.runtime_wheel_name(sources)


def test_runtime_wheel_replaces_a_stale_one_so_the_dockerfile_finds_exactly_one(tmp_path):
    stale = tmp_path / "tpuplane_runtime-0.1.0+000000000000-py3-none-any.whl"
    stale.write_bytes(b"an older runtime")
    (tmp_path / "unrelated.whl").write_bytes(b"not ours")
    wheel = sidecar_wheel.build_runtime_wheel(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted([wheel.name, "unrelated.whl"])


def test_sidecar_dockerfile_installs_the_runtime_wheel_from_its_folder():
    dockerfile = (REPO / "sidecar" / "Dockerfile").read_text()
    assert f"/opt/sidecar/{sidecar_wheel.WHEEL_FOLDER}/*.whl" in dockerfile
    assert sidecar_wheel.WHEEL_FOLDER not in (REPO / "sidecar" / ".dockerignore").read_text()


# -- the image's own requirements, for real --------------------------------------------------------------------


def host_name(index: int, count: int) -> str:
    return f"host {index} of {count}"


def two_batches(index: int, count: int):
    return iter([np.full((16 // count, 4), k, np.float32) for k in range(2)])


@pytest.fixture(autouse=True)
def _ship_this_module_by_value():
    """A sidecar could never import this test module: its functions travel by value, as from a script."""
    with pickled_by_value(sys.modules[__name__]):
        yield


@pytest.fixture
def shipped_pickles(monkeypatch) -> list[bytes]:
    """Every function JAX's colocated Python serializes for a host, recorded as it leaves (it still leaves)."""
    shipped: list[bytes] = []
    serialize = colocated_func._serialize

    def recording(obj):
        shipped.append(serialized := serialize(obj))
        return serialized

    monkeypatch.setattr(colocated_func, "_serialize", recording)
    return shipped


def load_as_the_sidecar_does(pickles: list[bytes]) -> tuple[list[str], str]:
    """In the sidecar venv: unpickle what colocated Python shipped; which tpuplane modules that imported, and from
    where."""
    from jax.experimental.colocated_python.serialization import _deserialize

    for pickled in pickles:
        _deserialize(pickled)
    import tpuplane.runtime

    return sorted(name for name in sys.modules if name.startswith("tpuplane")), tpuplane.runtime.__file__


def test_helpers_pickles_import_in_a_venv_built_from_the_sidecar_images_requirements(shipped_pickles):
    mesh = Mesh(np.array(jax.devices()[:8]), ("data",))
    assert on_each_host(host_name, mesh_or_devices=mesh) == ["host 0 of 1"]
    iterator = RemoteIterator(two_batches, sharding=NamedSharding(mesh, PartitionSpec("data")), global_shape=(16, 4))
    assert [float(np.asarray(batch)[0, 0]) for batch in iterator] == [0.0, 1.0]
    assert len(shipped_pickles) >= 2

    with LocalSidecar(venv_requirements=REPO / "sidecar" / "requirements.txt",
                      env={"JAX_PLATFORMS": "cpu", "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}) as sidecar:
        modules, runtime_file = sidecar.call(load_as_the_sidecar_does, shipped_pickles)
    assert {"tpuplane.runtime.colocated", "tpuplane.runtime.remote_iterator"} <= set(modules)
    assert "site-packages" in runtime_file and str(REPO) not in runtime_file  # the wheel's, not this checkout's
