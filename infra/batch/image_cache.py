"""Image pre-pull (xpk `cluster cacheimage`): a DaemonSet that pulls workload images onto every TPU node,
so a many-slice job does not wait for hundreds of VMs to pull a large image at once.

Each image runs once as an init container (`/bin/sh -c true`: the image needs a shell, as JAX images have), which
forces the kubelet to pull it; a pause container then keeps the pod, and so the image, on the node.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator

from tpuplane.infra.args import Source, read_checked, text
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.scheduling import ACCELERATOR_LABEL, QUEUED_TAINT_KEY, TPU_TAINT_KEY
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.naming import K8S_NAME

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_CACHE_NAME = "image-cache"
_TINY = {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "64Mi"}}


IMAGE_CACHE_ARGS = "ImageCacheArgs"


def _image_list(value: object) -> object:
    if not isinstance(value, list) or not all(isinstance(image, str) for image in value):
        raise ValueError("a list of image references")
    return value


class ImageCacheSpec(ConfigModel):
    """`ImageCacheArgs`: the images every TPU node keeps pulled, and the DaemonSet's name and namespace."""

    images: Annotated[list[str], BeforeValidator(_image_list)]
    cache_name: text("a DNS label of at most 63 characters", K8S_NAME) = DEFAULT_CACHE_NAME
    namespace: text("a namespace name", K8S_NAME) = "default"


def read_image_cache(raw: object, source: Source) -> ImageCacheSpec:
    """`ImageCacheArgs`, every image a reference."""
    return read_checked(ImageCacheSpec, raw, source, _image_problems)


def _image_problems(spec: ImageCacheSpec, source: Source) -> list[Problem]:
    problems = [] if spec.images else [Problem(source.path("images"), spec.images, "at least one image")]
    return problems + [Problem(source.path("images", i), image,
                               "an image reference such as us-docker.pkg.dev/p/r/img:tag")
                       for i, image in enumerate(spec.images) if not image or any(c.isspace() for c in image)]


def render_image_cache(spec: ImageCacheSpec) -> dict[str, Any]:
    """The DaemonSet; images are deduplicated and kept in the given order (init containers run in order)."""
    name, namespace = spec.cache_name, spec.namespace
    unique = list(dict.fromkeys(spec.images))
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "image-cache"}
    pull = [{"name": f"pull-{i}", "image": image, "command": ["/bin/sh", "-c", "true"],
             "imagePullPolicy": "IfNotPresent", "resources": _TINY} for i, image in enumerate(unique)]
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            # all nodes pull at once: the cache has no availability to protect
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": ACCELERATOR_LABEL, "operator": "Exists"}]}]}}},
                    "tolerations": [{"key": TPU_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"},
                                    {"key": QUEUED_TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
                    "terminationGracePeriodSeconds": 0,
                    "initContainers": pull,
                    "containers": [{"name": "pause", "image": PAUSE_IMAGE, "resources": _TINY}],
                },
            },
        },
    }
