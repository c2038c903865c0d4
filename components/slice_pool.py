"""`TpuSlicePool`: one GKE node pool per TPU slice of a pool group, from `infra.nodepools` plans."""

from __future__ import annotations

from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from tpuplane.infra.fleet.cluster import NODE_OAUTH_SCOPES
from tpuplane.infra.fleet.nodepools import PoolGroupPlan, SlicePoolPlan


def _node_pool_args(plan: SlicePoolPlan, *, project: str, location: str, zone: str,
                    cluster: pulumi.Input[str], service_account: pulumi.Input[str],
                    policy_name: pulumi.Input[str] | None) -> dict:
    """SlicePoolPlan -> NodePool keyword arguments, field for field; every decision was made in the plan."""
    affinity = plan.reservation_affinity
    placement = None
    if plan.workload_policy is not None:
        # GKE reads a workload-policy pool back with an empty `type`; sending "" keeps preview free of a
        # perpetual COMPACT diff that would roll every pool on each apply.
        placement = gcp.container.NodePoolPlacementPolicyArgs(type="", policy_name=policy_name,
                                                              tpu_topology=plan.tpu_topology)
    elif plan.placement_type is not None:
        placement = gcp.container.NodePoolPlacementPolicyArgs(type=plan.placement_type,
                                                              tpu_topology=plan.tpu_topology)
    return dict(
        name=plan.name,
        project=project,
        cluster=cluster,
        location=location,
        node_locations=[zone],
        node_count=plan.node_count,
        initial_node_count=0 if plan.autoscaling else None,
        autoscaling=gcp.container.NodePoolAutoscalingArgs(
            min_node_count=plan.autoscaling.min_node_count, max_node_count=plan.autoscaling.max_node_count,
            location_policy=plan.autoscaling.location_policy) if plan.autoscaling else None,
        placement_policy=placement,
        queued_provisioning=gcp.container.NodePoolQueuedProvisioningArgs(enabled=True)
        if plan.queued_provisioning else None,
        max_pods_per_node=plan.max_pods_per_node,
        network_config=gcp.container.NodePoolNetworkConfigArgs(
            accelerator_network_profile=plan.accelerator_network_profile) if plan.accelerator_network_profile else None,
        management=gcp.container.NodePoolManagementArgs(auto_repair=plan.auto_repair, auto_upgrade=plan.auto_upgrade),
        upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
            strategy=plan.upgrade.strategy, max_surge=plan.upgrade.max_surge,
            max_unavailable=plan.upgrade.max_unavailable),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=plan.machine_type,
            spot=plan.spot or None,
            flex_start=plan.flex_start or None,
            max_run_duration=plan.max_run_duration,
            reservation_affinity=gcp.container.NodePoolNodeConfigReservationAffinityArgs(
                consume_reservation_type=affinity.consume_reservation_type, key=affinity.key,
                values=list(affinity.values) or None) if affinity else None,
            labels=plan.labels or None,
            taints=[gcp.container.NodePoolNodeConfigTaintArgs(**t) for t in plan.taints],
            host_maintenance_policy=gcp.container.NodePoolNodeConfigHostMaintenancePolicyArgs(
                maintenance_interval=plan.maintenance_interval),
            service_account=service_account,
            oauth_scopes=list(NODE_OAUTH_SCOPES),
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
            disk_size_gb=plan.disk_size_gb,
            disk_type=plan.disk_type,
        ),
    )


class TpuSlicePool(pulumi.ComponentResource):
    """All slices of one pool group; multi-slice = N node pools, named by slice index."""

    node_pools: list[gcp.container.NodePool]
    workload_policy: pulumi.CustomResource | None  # a ResourcePolicy; Pulumi resolves this, naming it loads gcp.compute

    def __init__(self, name: str, plan: PoolGroupPlan, *, project: str, region: str, location: str, zone: str,
                 cluster: pulumi.Input[str], service_account: pulumi.Input[str],
                 reservation: pulumi.Resource | None = None, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuplane:index:TpuSlicePool", name, {}, opts)
        self.workload_policy = None
        policy_name = None
        if plan.workload_policy is not None:
            self.workload_policy = gcp.compute.ResourcePolicy(
                plan.workload_policy.name, name=plan.workload_policy.name, project=project, region=region,
                workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                    type="HIGH_THROUGHPUT", accelerator_topology=plan.workload_policy.accelerator_topology),
                opts=pulumi.ResourceOptions(parent=self))
            policy_name = self.workload_policy.name
        depends: Sequence[pulumi.Resource] = [r for r in (reservation, self.workload_policy) if r is not None]
        self.node_pools = [
            gcp.container.NodePool(
                pool.name,
                **_node_pool_args(pool, project=project, location=location, zone=zone, cluster=cluster,
                                  service_account=service_account, policy_name=policy_name),
                # Pools that scale from zero are sized by the autoscaler; only their first size is ours.
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends),
                                            ignore_changes=["initialNodeCount"] if pool.autoscaling else None))
            for pool in plan.pools
        ]
        self.register_outputs({"node_pools": [p.name for p in self.node_pools]})
