"""`TpuCluster`: a GKE cluster for TPU fleets, its node identity and its CPU system pool."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from tpuplane.infra.fleet.cluster import (
    CPU_POOL_NAME,
    NODE_OAUTH_SCOPES,
    NODE_SERVICE_ACCOUNT_ROLES,
    plan_cluster,
    render_kubeconfig,
)
from tpuplane.infra.config import StackConfig


class TpuCluster(pulumi.ComponentResource):
    """VPC-native, Dataplane V2, Workload Identity, GCS FUSE; the default pool removed; a dedicated node SA."""

    cluster: gcp.container.Cluster
    cpu_pool: gcp.container.NodePool
    node_service_account: gcp.serviceaccount.Account
    provider: k8s.Provider

    def __init__(self, name: str, cfg: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuplane:index:TpuCluster", name, {}, opts)
        plan = plan_cluster(cfg)
        c = cfg.cluster
        child = pulumi.ResourceOptions(parent=self)

        self.node_service_account = gcp.serviceaccount.Account(
            f"{name}-nodes", project=cfg.project, account_id=plan.service_account_id,
            display_name=f"GKE nodes of {c.name} (tpuplane)", opts=child)
        grants = [
            gcp.projects.IAMMember(f"{name}-nodes-{role.split('/')[1]}", project=cfg.project, role=role,
                                   member=self.node_service_account.member, opts=child)
            for role in NODE_SERVICE_ACCOUNT_ROLES
        ]

        exclusion = c.maintenance_exclusion
        self.cluster = gcp.container.Cluster(
            name,
            name=c.name,
            project=cfg.project,
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
            addons_config=gcp.container.ClusterAddonsConfigArgs(
                gcs_fuse_csi_driver_config=gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)),
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
            opts=pulumi.ResourceOptions(parent=self, depends_on=grants, ignore_changes=["nodeConfig"]),
        )

        self.cpu_pool = gcp.container.NodePool(
            f"{name}-{CPU_POOL_NAME}",
            name=CPU_POOL_NAME,
            project=cfg.project,
            cluster=self.cluster.name,
            location=plan.location,
            node_locations=[cfg.cluster.zone],
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
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["initialNodeCount"]),
        )

        kubeconfig = pulumi.Output.all(self.cluster.name, self.cluster.endpoint,
                                       self.cluster.master_auth.cluster_ca_certificate).apply(
            lambda a: render_kubeconfig(a[0], a[1], a[2]))
        # Kubernetes objects wait for the CPU pool: controllers and webhooks need somewhere to run.
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig,
                                     opts=pulumi.ResourceOptions(parent=self, depends_on=[self.cpu_pool]))

        self.register_outputs({"cluster_name": self.cluster.name, "endpoint": self.cluster.endpoint,
                               "node_service_account": self.node_service_account.email})
