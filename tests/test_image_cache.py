"""Image pre-pull DaemonSet: runs on TPU nodes only, pulls each image once, and is a valid DaemonSet."""

from __future__ import annotations

import pytest

from tpuplane.infra.args import Source
from tpuplane.infra.batch.image_cache import IMAGE_CACHE_ARGS, ImageCacheSpec, read_image_cache, render_image_cache
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.k8s_validation import manifest_errors

SOURCE = Source.args(IMAGE_CACHE_ARGS, ImageCacheSpec)


def cache(images: list[str], **fields: str) -> dict:
    return render_image_cache(read_image_cache({"images": images, **fields}, SOURCE))


def test_image_cache_pulls_each_image_in_an_init_container_then_pauses():
    ds = cache(["a/train:1", "a/serve:2", "a/train:1"])
    pod = ds["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["initContainers"]] == ["a/train:1", "a/serve:2"]
    assert all(c["command"] == ["/bin/sh", "-c", "true"] for c in pod["initContainers"])
    assert pod["containers"][0]["image"].startswith("registry.k8s.io/pause:")


def test_image_cache_selects_tpu_nodes_and_tolerates_their_taints():
    pod = cache(["a/train:1"])["spec"]["template"]["spec"]
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [{"key": "cloud.google.com/gke-tpu-accelerator", "operator": "Exists"}]
    assert {t["key"] for t in pod["tolerations"]} == {"google.com/tpu", "cloud.google.com/gke-queued"}


def test_image_cache_is_a_valid_daemonset():
    assert manifest_errors(cache(["a/train:1", "b/x@sha256:" + "0" * 64])) == []


@pytest.mark.parametrize("images, path", [([], "ImageCacheArgs.images"), (["has space"], "ImageCacheArgs.images[0]")])
def test_image_cache_bad_images_are_refused(images, path):
    with pytest.raises(ConfigError) as exc:
        cache(images)
    assert [p.path for p in exc.value.problems] == [path]


def test_image_cache_bad_name_is_refused():
    with pytest.raises(ConfigError) as exc:
        cache(["a:1"], cache_name="Image_Cache")
    assert [p.path for p in exc.value.problems] == ["ImageCacheArgs.cache_name"]
