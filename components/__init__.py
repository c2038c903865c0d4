"""Pulumi ComponentResources: thin wrappers that turn `tpuplane.infra` plans into pulumi-gcp/-kubernetes resources.

`from tpuplane.components import TpuCluster, TpuSlicePool, ...` is the public API. Each name loads its module on
first use (PEP 562): importing the package costs nothing, and a program that only adds slice pools never loads
the Kubernetes or Docker SDKs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpuplane.components.batch import BatchStack
    from tpuplane.components.cluster import TpuCluster
    from tpuplane.components.janitor import ProxyJanitor
    from tpuplane.components.pathways import SharedPathwaysService
    from tpuplane.components.reservation import TpuReservation
    from tpuplane.components.sidecar_image import SidecarImage, SidecarImageArgs
    from tpuplane.components.slice_pool import TpuSlicePool
    from tpuplane.components.workload import ImageCache, TpuExperiment, TpuWorkload

_EXPORTS = {
    "TpuCluster": "tpuplane.components.cluster",
    "TpuSlicePool": "tpuplane.components.slice_pool",
    "TpuReservation": "tpuplane.components.reservation",
    "BatchStack": "tpuplane.components.batch",
    "TpuWorkload": "tpuplane.components.workload",
    "TpuExperiment": "tpuplane.components.workload",
    "ImageCache": "tpuplane.components.workload",
    "SharedPathwaysService": "tpuplane.components.pathways",
    "SidecarImage": "tpuplane.components.sidecar_image",
    "SidecarImageArgs": "tpuplane.components.sidecar_image",
    "ProxyJanitor": "tpuplane.components.janitor",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpuplane.components' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
