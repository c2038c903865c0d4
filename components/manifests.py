"""Turn a rendered Kubernetes manifest (a plain dict from an `infra` renderer) into a Pulumi resource.

Renderers own every field; this module only picks the pulumi-kubernetes class, so that each object is its own
resource in the plan and in `pulumi preview` (diffable and owned one by one, unlike one big YAML apply).
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# Custom resources that carry only metadata and spec go through the SDK's CustomResource; kinds with other top-level
# fields (Kueue's WorkloadPriorityClass has `value`) are registered as themselves by `_Manifest`.
_CR_KEYS = {"apiVersion", "kind", "metadata", "spec"}
_K8S_VERSION = importlib.metadata.version("pulumi-kubernetes")
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
    return _Manifest(name, manifest, opts)


class _Manifest(pulumi.CustomResource):
    """A custom resource with top-level fields besides metadata and spec, registered as itself with the Kubernetes
    provider (type `kubernetes:<apiVersion>:<kind>`, the object as its inputs), as the provider's other SDKs do:
    Python's CustomResource takes only metadata and spec.

    Such objects used to ride in a one-object `yaml/v2` ConfigGroup named like the resource, whose child the
    provider names `<resource name>:<object name>`: the alias keeps that object, so upgrading replaces nothing
    (the empty ConfigGroup goes)."""

    def __init__(self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions):
        assert "namespace" not in manifest["metadata"], "only cluster-scoped kinds ever rode in a ConfigGroup"
        alias = pulumi.Alias(name=f"{name}:{manifest['metadata']['name']}",
                             parent=opts.parent.urn.apply(lambda urn: _config_group_urn(urn, name)))
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(version=_K8S_VERSION, aliases=[alias]))
        super().__init__(f"kubernetes:{manifest['apiVersion']}:{manifest['kind']}", name, dict(manifest), opts)


def _config_group_urn(parent_urn: str, name: str) -> str:
    """The URN of the ConfigGroup `name` under the resource `parent_urn`."""
    return f"{parent_urn.rsplit('::', 1)[0]}$kubernetes:yaml/v2:ConfigGroup::{name}"
