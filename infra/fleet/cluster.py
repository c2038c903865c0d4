"""The GKE cluster: its Args (`TpuClusterArgs`, the `tpuplane:cluster` section), GKE's rules for it, its reader,
and the decisions about it (location, identity, the CPU system pool, how clients reach it)."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated, Iterable

import yaml
from pydantic import Field, field_validator

from tpuplane.infra.args import Source, read_checked, text
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.autoscaling import (
    Autoprovisioning,
    AutoprovisioningPlan,
    PoolReach,
    autoprovisioning_problems,
    plan_autoprovisioning,
)
from tpuplane.infra.fleet.networking import accelerator_networking
from tpuplane.infra.fleet.pools import SlicePoolSpec
from tpuplane.infra.model import Allowed, ConfigModel, FromStack
from tpuplane.infra.naming import (
    DNS_LABEL,
    GKE_MAX_NODES,
    GKE_NAME_MAX,
    PROJECT_ID,
    REGION,
    SERVICE_ACCOUNT_ID_MAX,
    node_service_account_id,
)

CLUSTER_ARGS = "TpuClusterArgs"

CPU_POOL_NAME = "cpu"
PRODUCTION_LABEL = "tpuplane-production"  # GCE label on the cluster, read by the policy pack
WORKLOAD_POOL_SUFFIX = ".svc.id.goog"  # Workload Identity pool: <project>.svc.id.goog

# Least privilege for nodes: GKE's own minimal node role (logs, metrics, metadata) and image pulls.
NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
NODE_OAUTH_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)  # IAM, not scopes, limits access
DEFAULT_CPU_MACHINE_TYPE = "n2-standard-16"  # the CPU system pool's machine, when none is given
# The GKE add-on (pulumi-gcp's `addons_config` block) of each kind of storage's CSI driver, by storage kind.
# Cloud Storage FUSE is always on: Workload Identity is, and the Pathways scratch bucket may be mounted.
CSI_DRIVER_ADDONS = {"gcs": "gcs_fuse_csi_driver_config", "filestore": "gcp_filestore_csi_driver_config",
                     "parallelstore": "parallelstore_csi_driver_config", "lustre": "lustre_csi_driver_config",
                     "disk": "gce_persistent_disk_csi_driver_config"}
ALWAYS_ON_ADDONS = ("gcs_fuse_csi_driver_config",)


class MaintenanceExclusion(ConfigModel):
    """Freeze minor and node upgrades of a training cluster (Cluster Toolkit's practice)."""

    name: str = "training-freeze"
    start_time: str
    end_time: str | None = None  # None: until the end of the minor version's support (NO_MINOR_* scopes only)
    scope: str = Field("NO_MINOR_OR_NODE_UPGRADES", pattern="^(NO_UPGRADES|NO_MINOR_UPGRADES|NO_MINOR_OR_NODE_UPGRADES)$")

    @field_validator("start_time", "end_time")
    @classmethod
    def _rfc3339(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                moment = datetime.fromisoformat(v)
            except ValueError:
                raise ValueError("an RFC 3339 time such as 2026-12-01T00:00:00Z") from None
            if moment.tzinfo is None:
                raise ValueError("an RFC 3339 time with a zone, such as 2026-12-01T00:00:00Z")
        return v


class AuthorizedNetwork(ConfigModel):
    cidr: str
    name: str = ""

    @field_validator("cidr")
    @classmethod
    def _canonical_cidr(cls, v: str) -> str:
        """What GKE takes: an IPv4 network in its canonical form (no host bits, no `/00`, no `01.`)."""
        try:
            network = ipaddress.IPv4Network(v, strict=True)
        except ValueError:
            network = None
        if network is None or str(network) != v:
            raise ValueError("an IPv4 CIDR block such as 203.0.113.0/24 (address bits beyond the prefix zero)")
        return v


class CpuPool(ConfigModel):
    """The system/CPU pool: Kueue, JobSet, the Pathways head and client proxies run here."""

    machine_type: str = DEFAULT_CPU_MACHINE_TYPE
    min_nodes: int = Field(1, ge=0, le=GKE_MAX_NODES)
    max_nodes: int = Field(10, ge=1, le=GKE_MAX_NODES)


class ClusterSpec(ConfigModel):
    """`TpuClusterArgs`, or the `tpuplane:cluster` section with the stack's project and region."""

    project: Annotated[text("a GCP project id, e.g. acme-ml", PROJECT_ID), FromStack("gcp:project")]
    region: Annotated[text("a region, e.g. us-east5", REGION), FromStack("gcp:region")]
    name: str
    zone: str
    regional: bool = True  # regional control plane, TPU nodes in `zone` (xpk's layout)
    release_channel: str = Field("REGULAR", pattern="^(RAPID|REGULAR|STABLE|EXTENDED)$")
    min_master_version: str | None = None
    maintenance_exclusion: MaintenanceExclusion | None = None
    deletion_protection: bool = True
    production: bool = False
    network: str = "default"
    subnetwork: str | None = None
    private_endpoint: bool = False
    master_authorized_networks: list[AuthorizedNetwork] = []
    cpu_pool: CpuPool = CpuPool()
    multi_networking: Annotated[bool, FromStack("tpuplane:tpuPools")] = False
    csi_drivers: Annotated[list[str], FromStack("tpuplane:storage.volumes"),
                           Allowed(f"a list of storage kinds: {', '.join(CSI_DRIVER_ADDONS)}")] = []
    lustre_legacy_port: Annotated[bool, FromStack("tpuplane:storage.volumes")] = False
    autoprovisioning: Autoprovisioning | None = Field(None, description="Node auto-provisioning: GKE creates node "
                                                      "pools for pending pods, within these limits for the whole "
                                                      "cluster.")
    managed_prometheus: Annotated[bool, FromStack("tpuplane:dashboard")] = False

    @field_validator("csi_drivers")
    @classmethod
    def _known_drivers(cls, v: list[str]) -> list[str]:
        unknown = [kind for kind in v if kind not in CSI_DRIVER_ADDONS]
        if unknown:
            raise ValueError(f"storage kinds among {', '.join(CSI_DRIVER_ADDONS)}, not {', '.join(unknown)}")
        return v

    @field_validator("name")
    @classmethod
    def _dns_name(cls, v: str) -> str:
        if not DNS_LABEL.fullmatch(v) or len(v) > GKE_NAME_MAX:
            raise ValueError(f"a DNS label of at most {GKE_NAME_MAX} characters: lowercase letters, digits, '-'")
        return v

    @property
    def location(self) -> str:
        """Where the control plane lives: the region (regional clusters) or the zone."""
        return self.region if self.regional else self.zone


def cluster_problems(cluster: ClusterSpec, source: Source) -> list[Problem]:
    """GKE's rules for the cluster itself."""
    problems = []
    if not re.fullmatch(rf"{re.escape(cluster.region)}-[a-z]", cluster.zone):
        problems.append(Problem(source.path("zone"), cluster.zone, f"a zone of region {cluster.region}",
                                f"e.g. {cluster.region}-b, or change {source.path('region')}"))
    sa = node_service_account_id(cluster.name)
    if len(sa) > SERVICE_ACCOUNT_ID_MAX:
        problems.append(Problem(source.path("name"), cluster.name,
                                f"at most {SERVICE_ACCOUNT_ID_MAX - len(sa) + len(cluster.name)} characters",
                                f"the node service account id '{sa}' must fit in {SERVICE_ACCOUNT_ID_MAX} characters"))
    if cluster.private_endpoint and not cluster.master_authorized_networks:
        problems.append(Problem(source.path("private_endpoint"), True,
                                f"with {source.key('master_authorized_networks')}",
                                "a private control plane is reached only from authorized networks inside the VPC; "
                                "list the ranges pulumi and kubectl run from"))
    if cluster.lustre_legacy_port and "lustre" not in cluster.csi_drivers:
        problems.append(Problem(source.path("lustre_legacy_port"), True, f"with lustre in {source.key('csi_drivers')}",
                                "the port is a setting of the Lustre CSI driver's add-on"))
    problems += _maintenance_exclusion_problems(cluster.maintenance_exclusion, source.at("maintenance_exclusion"))
    if cluster.cpu_pool.min_nodes > cluster.cpu_pool.max_nodes:
        problems.append(Problem(source.path("cpu_pool", "min_nodes"), cluster.cpu_pool.min_nodes,
                                f"at most {source.key('max_nodes', CpuPool)} ({cluster.cpu_pool.max_nodes})"))
    if cluster.autoprovisioning is not None and not source.stack:  # a stack judges it with all its pools
        problems += autoprovisioning_problems(cluster.autoprovisioning, source.at("autoprovisioning"),
                                              pools=[cpu_pool_reach(cluster)], group_chips={})
    return problems


def cpu_pool_reach(cluster: ClusterSpec) -> PoolReach:
    return PoolReach(CPU_POOL_NAME, cluster.cpu_pool.machine_type, cluster.cpu_pool.max_nodes)


def _maintenance_exclusion_problems(exclusion: MaintenanceExclusion | None, source: Source) -> list[Problem]:
    """GKE's rules: the window ends after it starts; NO_UPGRADES needs an end at most 30 days on."""
    if exclusion is None:
        return []
    start, end_path = datetime.fromisoformat(exclusion.start_time), source.path("end_time")
    start_key = source.key("start_time")
    if exclusion.end_time is None:
        if exclusion.scope == "NO_UPGRADES":
            return [Problem(end_path, None, f"an end time at most 30 days after {start_key} with scope "
                            "NO_UPGRADES", "only NO_MINOR_UPGRADES and NO_MINOR_OR_NODE_UPGRADES may last until "
                            "the end of the version's support")]
        return []
    end = datetime.fromisoformat(exclusion.end_time)
    if end <= start:
        return [Problem(end_path, exclusion.end_time, f"a time after {start_key} ({exclusion.start_time})")]
    if exclusion.scope == "NO_UPGRADES" and end - start > timedelta(days=30):
        return [Problem(end_path, exclusion.end_time, f"at most 30 days after {start_key} with scope NO_UPGRADES",
                        "use NO_MINOR_OR_NODE_UPGRADES for a longer freeze")]
    return []


def read_cluster(raw: object, source: Source, *, supplied: dict | None = None) -> ClusterSpec:
    """`TpuClusterArgs`, or the `tpuplane:cluster` section (the stack supplies its project and region)."""
    return read_checked(ClusterSpec, raw, source, cluster_problems, supplied=supplied)


def needs_multi_networking(pools: Iterable[SlicePoolSpec]) -> bool:
    """Pools with automated accelerator networking need a multi-networking cluster."""
    return any(accelerator_networking(pool) for pool in pools)


@dataclass(frozen=True)
class ClusterPlan:
    name: str
    location: str  # the region for a regional control plane, else the zone
    node_locations: tuple[str, ...]  # of the cluster; pools always pin the TPU zone
    workload_pool: str
    service_account_id: str
    resource_labels: dict[str, str]
    multi_networking: bool  # required by pools with automated accelerator networking
    addons: dict[str, dict[str, bool]]  # `addons_config` blocks turned on, each with its settings
    autoprovisioning: AutoprovisioningPlan | None
    managed_prometheus: bool


def cluster_addons(c: ClusterSpec) -> dict[str, dict[str, bool]]:
    """The `addons_config` blocks the cluster turns on, each with its settings: Cloud Storage FUSE, and the storage
    kinds' CSI drivers, Lustre's on GKE's legacy port when asked."""
    blocks = {block: {"enabled": True}
              for block in sorted({*ALWAYS_ON_ADDONS, *(CSI_DRIVER_ADDONS[kind] for kind in c.csi_drivers)})}
    if c.lustre_legacy_port:
        blocks[CSI_DRIVER_ADDONS["lustre"]] = {"enabled": True, "enable_legacy_lustre_port": True}
    return blocks


def plan_cluster(c: ClusterSpec) -> ClusterPlan:
    return ClusterPlan(
        name=c.name,
        location=c.location,
        # A zonal cluster's own zone must not be listed again (the provider would diff forever).
        node_locations=(c.zone,) if c.regional else (),
        workload_pool=f"{c.project}{WORKLOAD_POOL_SUFFIX}",
        service_account_id=node_service_account_id(c.name),
        resource_labels={"managed-by": "tpuplane", PRODUCTION_LABEL: str(c.production).lower()},
        multi_networking=c.multi_networking,
        addons=cluster_addons(c),
        autoprovisioning=plan_autoprovisioning(c.autoprovisioning, [c.zone]) if c.autoprovisioning else None,
        managed_prometheus=c.managed_prometheus,
    )


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
