"""The component library's public names: importable from `tpuplane.components`, each a ComponentResource."""

import importlib
import subprocess
import sys

import pulumi
import pytest

import tpuplane.components as components

COMPONENTS = ["TpuCluster", "TpuSlicePool", "TpuReservation", "BatchStack", "TpuWorkload", "TpuExperiment",
              "ImageCache", "SharedPathwaysService", "SidecarImage", "ProxyJanitor"]


@pytest.mark.parametrize("name", COMPONENTS)
def test_components_public_name_is_a_component_resource(name):
    cls = getattr(importlib.import_module("tpuplane.components"), name)
    assert issubclass(cls, pulumi.ComponentResource)
    assert name in components.__all__


def test_components_package_import_loads_no_provider_sdk():
    code = ("import sys, tpuplane.components; print(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('pulumi_gcp', 'pulumi_kubernetes', 'pulumi_docker_build')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_components_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'TpuNothing'"):
        components.TpuNothing  # noqa: B018
