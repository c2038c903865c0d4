"""Facts about container image references that several renderers share (service, proxies, sidecar, janitor).

A neutral module: it imports nothing from tpuplane, so any renderer can use it without an import cycle.
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

# The public Pathways server images are tagged `jax-<version>` (optionally followed by `@sha256:<digest>`).
_JAX_TAG = re.compile(r"^jax-(?P<version>[0-9][0-9A-Za-z.+!-]*)$")


def reference_tag(image: str) -> str | None:
    """The tag of an image reference (`reg:5000/repo/name:tag@sha256:...` -> "tag"), None when untagged."""
    name = image.partition("@")[0]
    last = name.rpartition("/")[2]
    return last.partition(":")[2] or None if ":" in last else None


def is_pinned(image: str) -> bool:
    """Pinned: a digest, or a tag other than the moving `latest`."""
    return "@" in image.rpartition("/")[2] or reference_tag(image) not in (None, "latest")


def pull_policy(image: str) -> str:
    """A pinned image is pulled once per node; a moving `:latest` (or untagged) one every time, as its content moves."""
    return "IfNotPresent" if is_pinned(image) else "Always"


def jax_version_of_tag(image: str) -> str | None:
    """The JAX release a public server image was built for, from its `jax-<version>` tag; None for other tags."""
    match = _JAX_TAG.match(reference_tag(image) or "")
    if match is None:
        return None
    try:
        Version(match["version"])
    except InvalidVersion:  # e.g. jax-0.9.0-custom-build: a name, not a release
        return None
    return match["version"]
