"""What workloads and laptops import: connect to the shared Pathways service, colocated Python helpers,
and a local sidecar. Never imports pulumi; kept light because every sidecar worker imports it at start-up.

`from tpuplane.runtime import connect, LocalSidecar, RemoteIterator, on_each_host` loads each name's module only
when it is first used (PEP 562), so importing the package pulls in neither jax nor the kubernetes client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpuplane.runtime.colocated import on_each_host
    from tpuplane.runtime.local_sidecar import LocalSidecar
    from tpuplane.runtime.remote_iterator import RemoteIterator
    from tpuplane.runtime.session import connect

_EXPORTS = {
    "connect": "tpuplane.runtime.session",
    "LocalSidecar": "tpuplane.runtime.local_sidecar",
    "RemoteIterator": "tpuplane.runtime.remote_iterator",
    "on_each_host": "tpuplane.runtime.colocated",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpuplane.runtime' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
