"""The part of `tpuplane.runtime` that runs on a colocated-Python sidecar, as a wheel for the sidecar image.

`RemoteIterator` and `on_each_host` ship pickles that refer to `tpuplane.runtime` modules by name, so the sidecar
must be able to import them: `sidecar/Dockerfile` installs this wheel, which the stack writes into the build
context before hashing it (so the image's content-hash tag covers it), and `LocalSidecar`'s venv installs the same
wheel, so a local test sees what the image has.

The wheel holds only the modules that run on a sidecar (`SIDECAR_MODULES`), taken from this installed tpuplane
(the checkout, for an editable install): an edit to `connect()` or the CLI changes neither the wheel nor the image
tag, so it does not restart the Pathways service. Its bytes depend on those modules and this file only (fixed
dates and modes, a fixed order, stored uncompressed), so every machine makes the same wheel from the same commit,
and the same image tag.
"""

from __future__ import annotations

import contextlib
import email.message
import email.policy
import hashlib
import os
import stat
import tempfile
import zipfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "tpuplane-runtime"
WHEEL_FOLDER = "tpuplane-runtime"  # inside the sidecar build context; the Dockerfile installs the wheel found there
# What a sidecar imports: the colocated helpers (and what their pickles refer to), and LocalSidecar's worker.
SIDECAR_MODULES = ("__init__", "colocated", "remote_iterator", "sidecar_protocol", "sidecar_wire", "sidecar_worker")
# jax and numpy come with the sidecar base image, pinned there: they are named, never pinned, here.
REQUIREMENTS = ("cloudpickle>=3.0", "jax", "numpy", "packaging>=24.0")
_PACKAGE = Path(__file__).parent
_ARCHIVE_PATH = "tpuplane/runtime"
_FIXED_DATE = 315532800  # 1980-01-01, the earliest date a zip can hold: no build time in the bytes
_FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_WHEEL_INFO = "Wheel-Version: 1.0\nGenerator: tpuplane\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def runtime_sources() -> dict[str, bytes]:
    """Archive path -> bytes of each module the wheel holds, read from this installed tpuplane."""
    return {f"{_ARCHIVE_PATH}/{name}.py": (_PACKAGE / f"{name}.py").read_bytes() for name in SIDECAR_MODULES}


def runtime_wheel_name(sources: dict[str, bytes] | None = None) -> str:
    """`tpuplane_runtime-<tpuplane version>+<digest>-py3-none-any.whl`: the digest of what the wheel holds names it,
    so a changed runtime is a new wheel (and a new image tag), and an unchanged one is found again by name."""
    digest = hashlib.sha256()
    for path, content in sorted((sources or runtime_sources()).items()):
        digest.update(f"{path}\0{len(content)}\0".encode())
        digest.update(content)
    digest.update("\0".join(REQUIREMENTS).encode())
    return f"{DISTRIBUTION.replace('-', '_')}-{_version()}+{digest.hexdigest()[:12]}-py3-none-any.whl"


def _version() -> str:
    try:
        return metadata.version("tpuplane")
    except metadata.PackageNotFoundError:  # imported from a source tree that was never installed
        return "0"


def build_runtime_wheel(folder: Path) -> Path:
    """The wheel in `folder`, built unless it is there already; other tpuplane-runtime wheels there are removed,
    so the Dockerfile's `*.whl` finds exactly one. Safe for builders running at once (written aside, then renamed)."""
    from wheel.wheelfile import WheelFile  # the `wheel` project's writer: it hashes every file into RECORD

    sources = runtime_sources()
    name = runtime_wheel_name(sources)
    target = folder / name
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob(f"{_PREFIX}-*.whl"):
        if stale.name != name:
            stale.unlink(missing_ok=True)
    if target.is_file():
        return target
    version = name.split("-")[1]
    dist_info = f"{_PREFIX}-{version}.dist-info"
    with tempfile.TemporaryDirectory(dir=folder, prefix=".building-") as building:  # never seen by name half-written
        aside = Path(building)
        with _fixed_record_date(), WheelFile(aside / name, "w", compression=zipfile.ZIP_STORED) as wheel:
            for path, content in sorted(sources.items()):
                wheel.writestr(_entry(path), content)
            wheel.writestr(_entry(f"{dist_info}/METADATA"), _metadata(version))
            wheel.writestr(_entry(f"{dist_info}/WHEEL"), _WHEEL_INFO)
        (aside / name).replace(target)
    return target


_PREFIX = DISTRIBUTION.replace("-", "_")


def _entry(path: str) -> zipfile.ZipInfo:
    """A zip entry with a fixed date and mode: the checkout's mtimes and umask never reach the bytes."""
    info = zipfile.ZipInfo(path, date_time=_FIXED_DATE_TIME)
    info.external_attr = (stat.S_IFREG | 0o644) << 16
    info.compress_type = zipfile.ZIP_STORED
    return info


def _metadata(version: str) -> str:
    """The core metadata (METADATA) of the wheel."""
    message = email.message.EmailMessage(policy=email.policy.compat32)
    message["Metadata-Version"] = "2.1"
    message["Name"] = DISTRIBUTION
    message["Version"] = version
    message["Summary"] = "The part of tpuplane.runtime that runs on a colocated-Python sidecar."
    message["Requires-Python"] = ">=3.11"
    for requirement in REQUIREMENTS:
        message["Requires-Dist"] = requirement
    return message.as_string()


@contextlib.contextmanager
def _fixed_record_date() -> Iterator[None]:
    """WheelFile dates the RECORD it writes last by SOURCE_DATE_EPOCH, its switch for reproducible wheels."""
    previous = os.environ.get("SOURCE_DATE_EPOCH")
    os.environ["SOURCE_DATE_EPOCH"] = str(_FIXED_DATE)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = previous
