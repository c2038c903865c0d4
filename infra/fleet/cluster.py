"""Decisions about the GKE cluster itself: location, identity, the CPU system pool and how clients reach it."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from tpuplane.infra.config import ClusterConfig, StackConfig
from tpuplane.infra.fleet.networking import accelerator_networking
from tpuplane.infra.naming import node_service_account_id

CPU_POOL_NAME = "cpu"
PRODUCTION_LABEL = "tpuplane-production"  # GCE label on the cluster, read by the policy pack
WORKLOAD_POOL_SUFFIX = ".svc.id.goog"  # Workload Identity pool: <project>.svc.id.goog

# Least privilege for nodes: GKE's own minimal node role (logs, metrics, metadata) and image pulls.
NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
NODE_OAUTH_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)  # IAM, not scopes, limits access


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    location: str  # the region for a regional control plane, else the zone
    node_locations: tuple[str, ...]  # of the cluster; pools always pin the TPU zone
    workload_pool: str
    service_account_id: str
    resource_labels: dict[str, str]
    multi_networking: bool  # required by pools with automated accelerator networking


def plan_cluster(c: ClusterConfig, *, project: str, region: str, multi_networking: bool) -> ClusterPlan:
    return ClusterPlan(
        name=c.name,
        location=cluster_location(c, region),
        # A zonal cluster's own zone must not be listed again (the provider would diff forever).
        node_locations=(c.zone,) if c.regional else (),
        workload_pool=f"{project}{WORKLOAD_POOL_SUFFIX}",
        service_account_id=node_service_account_id(c.name),
        resource_labels={"managed-by": "tpuplane", PRODUCTION_LABEL: str(c.production).lower()},
        multi_networking=multi_networking,
    )


def cluster_location(c: ClusterConfig, region: str) -> str:
    """Where the control plane lives: the region (regional clusters) or the zone."""
    return region if c.regional else c.zone


def needs_multi_networking(cfg: StackConfig) -> bool:
    """Pools with automated accelerator networking need a multi-networking cluster."""
    return any(accelerator_networking(pool) for pool in cfg.tpu_pools)


def reservation_deletion_policy(production: bool) -> str | None:
    """Production stacks keep their reservations even if the program stops declaring them: capacity
    given back is rarely given again. Elsewhere Pulumi's default (delete) applies."""
    return "PREVENT" if production else None


def render_kubeconfig(cluster: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that holds no credential: `gke-gcloud-auth-plugin` fetches short-lived tokens at use."""
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
                     "installHint": "gcloud components install gke-gcloud-auth-plugin",
                     "provideClusterInfo": True}}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": f"https://{endpoint}",
                                                   "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}],
        "current-context": cluster,
        "users": [{"name": cluster, "user": user}],
    }
    return yaml.safe_dump(doc, sort_keys=True)
