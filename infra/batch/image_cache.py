"""Image pre-pull (xpk `cluster cacheimage`): a DaemonSet that pulls workload images onto every TPU node,
so a many-slice job does not wait for hundreds of VMs to pull a large image at once.

Each image runs once as an init container (`/bin/sh -c true`: the image needs a shell, as JAX images have), which
forces the kubelet to pull it; a pause container then keeps the pod, and so the image, on the node.
"""

from __future__ import annotations

from typing import Any

from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.naming import DNS_LABEL
from tpuplane.infra.fleet.scheduling import ACCELERATOR_LABEL, QUEUED_TAINT_KEY, TPU_TAINT_KEY

PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_CACHE_NAME = "image-cache"
_TINY = {"requests": {"cpu": "1m", "memory": "8Mi"}, "limits": {"memory": "64Mi"}}


def image_cache_problems(name: str, images: list[str]) -> list[Problem]:
    problems = []
    if not DNS_LABEL.fullmatch(name) or len(name) > 63:
        problems.append(Problem("name", name, "a DNS label of at most 63 characters"))
    if not images:
        problems.append(Problem("images", images, "at least one image"))
    for i, image in enumerate(images):
        if not image or any(c.isspace() for c in image):
            problems.append(Problem(f"images[{i}]", image, "an image reference such as us-docker.pkg.dev/p/r/img:tag"))
    return problems


def render_image_cache(images: list[str], *, name: str = DEFAULT_CACHE_NAME,
                       namespace: str = "default") -> dict[str, Any]:
    """The DaemonSet; images are deduplicated and kept in the given order (init containers run in order)."""
    problems = image_cache_problems(name, images)
    if problems:
        raise ConfigError(problems)
    unique = list(dict.fromkeys(images))
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
