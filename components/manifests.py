"""Turn a rendered Kubernetes manifest (a plain dict from an `infra` renderer) into a Pulumi resource.

Renderers own every field; this module only picks the pulumi-kubernetes class, so that each object is its own
resource in the plan and in `pulumi preview` (diffable and owned one by one, unlike one big YAML apply).
"""

from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Custom resources that carry only metadata and spec go through CustomResource; kinds with other top-level
# fields (Kueue's WorkloadPriorityClass has `value`) cannot, so they ride in a one-object ConfigGroup.
_CR_KEYS = {"apiVersion", "kind", "metadata", "spec"}
_CORE_GROUPS = {"", "apps", "batch", "scheduling.k8s.io", "networking.k8s.io", "rbac.authorization.k8s.io",
                "policy", "storage.k8s.io"}


def _snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def manifest_resource_name(manifest: dict[str, Any]) -> str:
    """A stable logical name: kind, namespace and name, so URNs never collide across namespaces."""
    meta = manifest["metadata"]
    parts = [manifest["kind"].lower(), meta.get("namespace"), meta["name"]]
    return "-".join(p for p in parts if p)


def manifest_resource(manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """Create the Pulumi resource for one manifest (typed class for core kinds)."""
    name = manifest_resource_name(manifest)
    group, _, version = manifest["apiVersion"].rpartition("/")
    if group in _CORE_GROUPS:
        module = getattr(k8s, group.split(".")[0] or "core")
        cls = getattr(getattr(module, version), manifest["kind"])
        return cls(name, opts=opts, **{_snake(k): v for k, v in manifest.items()})
    if set(manifest) <= _CR_KEYS:
        return k8s.apiextensions.CustomResource(
            name, api_version=manifest["apiVersion"], kind=manifest["kind"], metadata=manifest["metadata"],
            spec=manifest.get("spec"), opts=opts)
    return k8s.yaml.v2.ConfigGroup(name, objs=[manifest], opts=opts)
