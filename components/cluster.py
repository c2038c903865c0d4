"""`TpuCluster`: a GKE cluster for TPU fleets, its node identity and its CPU system pool."""

from typing import NotRequired, Optional, TypedDict

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from tpuplane.components.options import child_options
from tpuplane.infra.args import Source
from tpuplane.infra.fleet.autoscaling import AutoprovisioningPlan
from tpuplane.infra.fleet.cluster import (
    CLUSTER_ARGS,
    CPU_POOL_NAME,
    NODE_OAUTH_SCOPES,
    NODE_SERVICE_ACCOUNT_ROLES,
    ClusterPlan,
    ClusterSpec,
    plan_cluster,
    read_cluster,
    render_kubeconfig,
)


class MaintenanceExclusionArgs(TypedDict):
    """A window without upgrades (e.g. during a long training run)."""

    start_time: str
    """RFC 3339 time with a zone, e.g. 2026-12-01T00:00:00Z."""
    end_time: NotRequired[str]
    """RFC 3339; unset: until the minor version's end of support (NO_MINOR_* scopes only)."""
    name: NotRequired[str]
    """The exclusion's name (default `training-freeze`)."""
    scope: NotRequired[str]
    """NO_UPGRADES, NO_MINOR_UPGRADES or NO_MINOR_OR_NODE_UPGRADES (default)."""


class AuthorizedNetworkArgs(TypedDict):
    """A range allowed to reach the control plane."""

    cidr: str
    """An IPv4 network, e.g. 10.0.0.0/8."""
    name: NotRequired[str]
    """A display name."""


class CpuPoolArgs(TypedDict):
    """The system pool: Kueue, JobSet, the Pathways head and client proxies run here."""

    machine_type: NotRequired[str]
    """Default n2-standard-16."""
    min_nodes: NotRequired[int]
    """Default 1."""
    max_nodes: NotRequired[int]
    """Default 10."""


class AutoprovisioningArgs(TypedDict):
    """Node auto-provisioning: GKE creates node pools for pending pods within these limits, which count every node
    of the cluster (the slice groups' too)."""

    cpu: int
    """vCPUs of all nodes together: at least what the cluster's own pools reach at their maximum."""
    memory_gb: int
    """GB of memory of all nodes together: at least what the cluster's own pools reach."""
    tpu_chips: NotRequired[dict[str, int]]
    """TPU chips per generation (v4, v5e, v5p, v6e, tpu7x), e.g. `{"v6e": 64}`; default none: NAP makes no TPU
    pool."""


class TpuClusterArgs(TypedDict):
    """A GKE cluster for TPU fleets: VPC-native, Dataplane V2, Workload Identity, GCS FUSE, a least-privilege node
    service account, the default pool removed and a CPU system pool."""

    project: str
    """The project of the cluster."""
    region: str
    """The region: the control plane's location when `regional`."""
    name: str
    """The cluster's name (a DNS label)."""
    zone: str
    """The zone of the TPU and CPU nodes (a zone of `region`)."""
    regional: NotRequired[bool]
    """A regional control plane (default true, xpk's layout); false: zonal."""
    release_channel: NotRequired[str]
    """RAPID, REGULAR (default), STABLE or EXTENDED."""
    min_master_version: NotRequired[str]
    """The lowest control plane version to accept."""
    maintenance_exclusion: NotRequired[MaintenanceExclusionArgs]
    """A window without upgrades."""
    deletion_protection: NotRequired[bool]
    """Refuse to delete the cluster (default true)."""
    production: NotRequired[bool]
    """Labels the cluster as production, for the policy pack (default false)."""
    network: NotRequired[str]
    """The VPC (default `default`)."""
    subnetwork: NotRequired[str]
    """The subnetwork; default: the network's auto subnet."""
    private_endpoint: NotRequired[bool]
    """A private control plane and private nodes (default false); needs `master_authorized_networks`."""
    master_authorized_networks: NotRequired[list[AuthorizedNetworkArgs]]
    """Ranges allowed to reach the control plane."""
    cpu_pool: NotRequired[CpuPoolArgs]
    """The CPU system pool."""
    multi_networking: NotRequired[bool]
    """GKE multi-networking, needed by TPU pools with automated accelerator networking (v6e by default); default
    false."""
    csi_drivers: NotRequired[list[str]]
    """The CSI drivers to turn on besides Cloud Storage FUSE (always on), by storage kind: filestore,
    parallelstore, lustre, disk; default none. Turning on Lustre's has GKE recreate nodes that cannot mount it."""
    lustre_legacy_port: NotRequired[bool]
    """With lustre in `csi_drivers`: its driver runs LNet on port 6988 (GKE's `enable_legacy_lustre_port`), for
    instances created with gke-support-enabled or nodes older than GKE 1.33.2-gke.4655000; default false."""
    autoprovisioning: NotRequired[AutoprovisioningArgs]
    """Node auto-provisioning and its limits; default off."""
    managed_prometheus: NotRequired[bool]
    """Managed Service for Prometheus collection, which `FleetDashboard` reads Kueue's metrics through (default
    false: GKE's own default applies)."""


_ADDON_ARGS = {
    "gcs_fuse_csi_driver_config": gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs,
    "gcp_filestore_csi_driver_config": gcp.container.ClusterAddonsConfigGcpFilestoreCsiDriverConfigArgs,
    "parallelstore_csi_driver_config": gcp.container.ClusterAddonsConfigParallelstoreCsiDriverConfigArgs,
    "lustre_csi_driver_config": gcp.container.ClusterAddonsConfigLustreCsiDriverConfigArgs,
    "gce_persistent_disk_csi_driver_config": gcp.container.ClusterAddonsConfigGcePersistentDiskCsiDriverConfigArgs,
}


def _addons(plan: ClusterPlan) -> gcp.container.ClusterAddonsConfigArgs:
    return gcp.container.ClusterAddonsConfigArgs(
        **{block: _ADDON_ARGS[block](**settings) for block, settings in plan.addons.items()})


def _autoprovisioning(plan: AutoprovisioningPlan | None, service_account: pulumi.Input[str]
                      ) -> gcp.container.ClusterClusterAutoscalingArgs | None:
    """NAP's limits; the pools it makes run as the nodes' least-privilege service account, as every pool does."""
    if plan is None:
        return None
    return gcp.container.ClusterClusterAutoscalingArgs(
        enabled=True,
        resource_limits=[gcp.container.ClusterClusterAutoscalingResourceLimitArgs(
            resource_type=limit.resource_type, minimum=limit.minimum, maximum=limit.maximum)
            for limit in plan.resource_limits],
        auto_provisioning_locations=list(plan.locations),
        autoscaling_profile=plan.autoscaling_profile,
        auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
            service_account=service_account, oauth_scopes=list(NODE_OAUTH_SCOPES),
            management=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsManagementArgs(
                auto_repair=True, auto_upgrade=True)))


class TpuCluster(pulumi.ComponentResource):
    """VPC-native, Dataplane V2, Workload Identity, GCS FUSE; the default pool removed; a dedicated node SA.

    Children: `cluster` (gcp.container.Cluster), `cpu_pool`, `node_service_account` and `provider`, a Kubernetes
    provider for the new cluster that waits for the CPU pool (pass it to `BatchStack` and the workloads)."""

    cluster_name: pulumi.Output[str]
    """The cluster's name."""
    location: pulumi.Output[str]
    """The cluster's location: its region, or its zone when zonal (what `TpuSlicePoolArgs.location` takes)."""
    endpoint: pulumi.Output[str]
    """The control plane's IP address."""
    node_service_account_email: pulumi.Output[str]
    """The least-privilege service account every node pool runs as."""
    kubeconfig: pulumi.Output[str]
    """A kubeconfig without credentials (gke-gcloud-auth-plugin fetches short-lived tokens)."""

    def __init__(self, name: str, args: TpuClusterArgs, opts: Optional[pulumi.ResourceOptions] = None):
        # every check before the component registers anything (Args a stack config already read pass as they are)
        c = read_cluster(args, Source.args(CLUSTER_ARGS, ClusterSpec))
        project = c.project
        plan = plan_cluster(c)
        super().__init__("tpuplane:index:TpuCluster", name, {}, opts)
        child = child_options(self, opts)

        self.node_service_account = gcp.serviceaccount.Account(
            f"{name}-nodes", project=project, account_id=plan.service_account_id,
            display_name=f"GKE nodes of {c.name} (tpuplane)", opts=child)
        grants = [
            gcp.projects.IAMMember(f"{name}-nodes-{role.split('/')[1]}", project=project, role=role,
                                   member=self.node_service_account.member, opts=child)
            for role in NODE_SERVICE_ACCOUNT_ROLES
        ]

        exclusion = c.maintenance_exclusion
        self.cluster = gcp.container.Cluster(
            name,
            name=c.name,
            project=project,
            location=plan.location,
            node_locations=list(plan.node_locations) or None,
            remove_default_node_pool=True,
            initial_node_count=1,
            # The short-lived default pool still runs as the least-privilege account, never the compute default.
            node_config=gcp.container.ClusterNodeConfigArgs(
                service_account=self.node_service_account.email, oauth_scopes=list(NODE_OAUTH_SCOPES),
                workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA")),
            network=c.network,
            subnetwork=c.subnetwork,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(),
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=plan.multi_networking or None,  # Dataplane V2 above is its prerequisite
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(workload_pool=plan.workload_pool),
            addons_config=_addons(plan),
            cluster_autoscaling=_autoprovisioning(plan.autoprovisioning, self.node_service_account.email),
            monitoring_config=gcp.container.ClusterMonitoringConfigArgs(
                managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True))
            if plan.managed_prometheus else None,
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=c.release_channel),
            min_master_version=c.min_master_version,
            maintenance_policy=gcp.container.ClusterMaintenancePolicyArgs(
                daily_maintenance_window=gcp.container.ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
                    start_time="03:00"),
                maintenance_exclusions=[gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                    exclusion_name=exclusion.name, start_time=exclusion.start_time, end_time=exclusion.end_time,
                    exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope=exclusion.scope,
                        end_time_behavior=None if exclusion.end_time else "UNTIL_END_OF_SUPPORT"))]
                if exclusion else None),
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=c.private_endpoint, enable_private_endpoint=c.private_endpoint)
            if c.private_endpoint else None,
            master_authorized_networks_config=gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=n.cidr, display_name=n.name or None) for n in c.master_authorized_networks])
            if c.master_authorized_networks else None,
            deletion_protection=c.deletion_protection,
            resource_labels=plan.resource_labels,
            # The default pool's node config only lives until that pool is removed; reading it back afterwards
            # must not propose replacing the cluster (the GKE modules' `ignore_changes = [node_config]`).
            opts=child_options(self, opts, depends_on=grants, ignore_changes=["nodeConfig"]),
        )

        self.cpu_pool = gcp.container.NodePool(
            f"{name}-{CPU_POOL_NAME}",
            name=CPU_POOL_NAME,
            project=project,
            cluster=self.cluster.name,
            location=plan.location,
            node_locations=[c.zone],
            initial_node_count=c.cpu_pool.min_nodes,
            autoscaling=gcp.container.NodePoolAutoscalingArgs(
                min_node_count=c.cpu_pool.min_nodes, max_node_count=c.cpu_pool.max_nodes),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=c.cpu_pool.machine_type,
                service_account=self.node_service_account.email,
                oauth_scopes=list(NODE_OAUTH_SCOPES),
                workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
                shielded_instance_config=gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
                    enable_secure_boot=True, enable_integrity_monitoring=True),
            ),
            # The autoscaler owns the size; a changed initial count must not replace the system pool.
            opts=child_options(self, opts, ignore_changes=["initialNodeCount"]),
        )

        self.kubeconfig = pulumi.Output.all(self.cluster.name, self.cluster.endpoint,
                                            self.cluster.master_auth.cluster_ca_certificate).apply(
            lambda a: render_kubeconfig(a[0], a[1], a[2]))
        # Kubernetes objects wait for the CPU pool: controllers and webhooks need somewhere to run.
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig,
                                     opts=child_options(self, opts, depends_on=[self.cpu_pool]))

        self.cluster_name = self.cluster.name
        self.location = pulumi.Output.from_input(plan.location)
        self.endpoint = self.cluster.endpoint
        self.node_service_account_email = self.node_service_account.email
        self.register_outputs({"cluster_name": self.cluster_name, "location": self.location,
                               "endpoint": self.endpoint, "node_service_account_email": self.node_service_account_email,
                               "kubeconfig": self.kubeconfig})
