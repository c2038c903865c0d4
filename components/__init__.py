"""Pulumi ComponentResources: thin wrappers that turn `tpuplane.infra` plans into pulumi-gcp/-kubernetes resources.

`from tpuplane.components import TpuCluster, TpuClusterArgs, TpuSlicePool, ...` is the public API: each component
takes its name, one Args `TypedDict` and `ResourceOptions`. Each name loads its module on first use (PEP 562):
importing the package costs nothing, and a program that only adds slice pools never loads the Kubernetes or Docker
SDKs. `COMPONENTS` are also served to other Pulumi languages (`__main__.py`, `PulumiPlugin.yaml`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpuplane.components.batch import BatchStack
    from tpuplane.components.batch_args import BatchStackArgs, KueuePoolArgs, KueueTeamArgs
    from tpuplane.components.cluster import (AuthorizedNetworkArgs, AutoprovisioningArgs, CpuPoolArgs,
                                             MaintenanceExclusionArgs, TpuCluster, TpuClusterArgs)
    from tpuplane.components.janitor import ProxyJanitor, ProxyJanitorArgs
    from tpuplane.components.monitoring import FleetDashboard, FleetDashboardArgs
    from tpuplane.components.pathways import SharedPathwaysService, SharedPathwaysServiceArgs
    from tpuplane.components.reservation import TpuReservation, TpuReservationArgs
    from tpuplane.components.sidecar_image import SidecarImage, SidecarImageArgs
    from tpuplane.components.slice_pool import SliceAutoscalingArgs, TpuSlicePool, TpuSlicePoolArgs
    from tpuplane.components.storage import (FilestoreShareArgs, GcsBucketArgs, LustreArgs, ParallelstoreArgs,
                                             PersistentDiskArgs, StorageVolumeArgs, TeamStorage, TeamStorageArgs,
                                             WorkloadTeamArgs)
    from tpuplane.components.workload import ImageCache, ImageCacheArgs, TpuExperiment, TpuExperimentArgs, TpuWorkload, TpuWorkloadArgs

_EXPORTS = {
    "TpuCluster": "tpuplane.components.cluster",
    "TpuClusterArgs": "tpuplane.components.cluster",
    "CpuPoolArgs": "tpuplane.components.cluster",
    "MaintenanceExclusionArgs": "tpuplane.components.cluster",
    "AuthorizedNetworkArgs": "tpuplane.components.cluster",
    "AutoprovisioningArgs": "tpuplane.components.cluster",
    "TpuSlicePool": "tpuplane.components.slice_pool",
    "TpuSlicePoolArgs": "tpuplane.components.slice_pool",
    "SliceAutoscalingArgs": "tpuplane.components.slice_pool",
    "TpuReservation": "tpuplane.components.reservation",
    "TpuReservationArgs": "tpuplane.components.reservation",
    "BatchStack": "tpuplane.components.batch",
    "BatchStackArgs": "tpuplane.components.batch_args",
    "KueuePoolArgs": "tpuplane.components.batch_args",
    "KueueTeamArgs": "tpuplane.components.batch_args",
    "TpuWorkload": "tpuplane.components.workload",
    "TpuWorkloadArgs": "tpuplane.components.workload",
    "TpuExperiment": "tpuplane.components.workload",
    "TpuExperimentArgs": "tpuplane.components.workload",
    "ImageCache": "tpuplane.components.workload",
    "ImageCacheArgs": "tpuplane.components.workload",
    "SharedPathwaysService": "tpuplane.components.pathways",
    "SharedPathwaysServiceArgs": "tpuplane.components.pathways",
    "SidecarImage": "tpuplane.components.sidecar_image",
    "SidecarImageArgs": "tpuplane.components.sidecar_image",
    "ProxyJanitor": "tpuplane.components.janitor",
    **{name: "tpuplane.components.storage" for name in (
        "TeamStorage", "TeamStorageArgs", "StorageVolumeArgs", "WorkloadTeamArgs", "GcsBucketArgs",
        "FilestoreShareArgs", "ParallelstoreArgs", "LustreArgs", "PersistentDiskArgs")},
    "ProxyJanitorArgs": "tpuplane.components.janitor",
    "FleetDashboard": "tpuplane.components.monitoring",
    "FleetDashboardArgs": "tpuplane.components.monitoring",
}

__all__ = sorted(_EXPORTS)

# The components every Pulumi language gets through `pulumi package add` (PulumiPlugin.yaml, __main__.py).
COMPONENTS = ("TpuCluster", "TpuSlicePool", "TpuReservation", "BatchStack", "TpuWorkload", "TpuExperiment",
              "ImageCache", "SharedPathwaysService", "SidecarImage", "ProxyJanitor", "TeamStorage",
              "FleetDashboard")


def component_classes() -> list[type]:
    """The classes of `COMPONENTS`, loaded."""
    return [__getattr__(name) for name in COMPONENTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tpuplane.components' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
