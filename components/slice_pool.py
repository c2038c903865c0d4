"""`TpuSlicePool`: one GKE node pool per TPU slice of a group, from `infra.fleet.nodepools` plans, on any cluster."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp
from pydantic import ValidationError

from tpuplane.infra.config import TpuPoolConfig, pool_problems
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.cluster import NODE_OAUTH_SCOPES
from tpuplane.infra.fleet.nodepools import PoolGroupPlan, SlicePoolPlan, plan_slice_group


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


@dataclass
class TpuSlicePoolArgs:
    """One group of identical TPU slices on a GKE cluster: tpuplane's `TpuCluster`, or one that exists already
    (made by your own Terraform or Pulumi), given by name and location. One node pool per slice, `<group>-<i>`."""

    project: str
    """The cluster's project."""
    location: str
    """The cluster's location: its region (regional control plane) or its zone."""
    zone: str
    """The zone of the TPU VMs; every slice of the group lives there."""
    cluster: pulumi.Input[str]
    """The cluster's name: `TpuCluster(...).cluster.name`, or the name of an existing cluster."""
    tpu_type: str
    """A TPU type `tpuplane catalog` knows, e.g. `v6e-16`, `v5p-128`, `tpu7x-8`."""
    cluster_name: str | None = None
    """The cluster's name as plain text, for names derived from it (tpu7/tpu7x workload policies); needed only
    when `cluster` is an Output."""
    slices: int = 1
    """How many slices, each its own node pool."""
    capacity: str = "on-demand"
    """on-demand, reservation, spot, flex-start or queued."""
    reservation: str | None = None
    """With capacity reservation: the reservation's name or `projects/P/reservations/R[/reservationBlocks/B]`."""
    machine_type: str | None = None
    """Only to pick the single-host 8-chip machine for 2x4 shapes (`ct6e-standard-8t`, `ct5lp-hightpu-8t`)."""
    max_run_duration: str | None = None
    """`<seconds>s`, with flex-start or queued only."""
    maintenance_interval: str = "AS_NEEDED"
    """AS_NEEDED or PERIODIC (the interval of the reservation the pools consume)."""
    disk_size_gb: int | None = None
    """Boot disk size; GKE's default when unset."""
    disk_type: str | None = None
    """Boot disk type (pd-balanced, hyperdisk-balanced, ...); GKE's default when unset."""
    accelerator_network: bool | None = None
    """GKE's automated accelerator networking; None: on for v6e, off otherwise (the cluster needs
    multi-networking)."""
    service_account: pulumi.Input[str] | None = None
    """The nodes' service account email (least privilege); None: the project's Compute Engine default."""
    group: str | None = None
    """The group name the node pools are named after; default: the component's name."""
    dedicated_slices: int = 0
    """The first slices, held outside Kueue by `dedicated_owner` (a Shared Pathways Service)."""
    dedicated_owner: str | None = None
    """The service that holds `dedicated_slices`: its name labels and taints those pools."""
    reservation_resource: pulumi.Resource | None = None
    """A reservation created in the same program, so the pools wait for it."""


def _pool_config(name: str, args: TpuSlicePoolArgs) -> TpuPoolConfig:
    """The Args as the group's config, checked with the stack config's own rules; errors name Args fields."""
    fields = {"name": name, "tpu_type": args.tpu_type, "slices": args.slices, "capacity": args.capacity,
              "reservation": args.reservation, "machine_type": args.machine_type,
              "max_run_duration": args.max_run_duration, "maintenance_interval": args.maintenance_interval,
              "disk_size_gb": args.disk_size_gb, "disk_type": args.disk_type,
              "accelerator_network": args.accelerator_network}
    try:
        pool = TpuPoolConfig(**fields)
    except ValidationError as exc:
        raise ConfigError([Problem(f"TpuSlicePoolArgs.{'.'.join(map(str, e['loc']))}", e.get("input"),
                                   e["msg"].removeprefix("Value error, ")) for e in exc.errors()]) from None
    problems = pool_problems(pool, "TpuSlicePoolArgs", cluster_name=_cluster_name(args) or "",
                             project=args.project)
    if not problems and pool.spec.needs_workload_policy and not _cluster_name(args):
        problems.append(Problem("TpuSlicePoolArgs.cluster_name", None, "the cluster's name as plain text",
                                f"{pool.tpu_type} slices need a workload policy named after the cluster"))
    if problems:
        raise ConfigError([dataclasses.replace(p, path=_args_path(p.path)) for p in problems])
    if args.dedicated_slices and not 0 <= args.dedicated_slices <= args.slices:
        raise ConfigError.at("TpuSlicePoolArgs.dedicated_slices", args.dedicated_slices,
                             f"0 to slices ({args.slices})")
    return pool


def _cluster_name(args: TpuSlicePoolArgs) -> str | None:
    return args.cluster_name or (args.cluster if isinstance(args.cluster, str) else None)


def _args_path(path: str) -> str:
    """`TpuSlicePoolArgs.tpuType` (the config rules speak camelCase) -> `TpuSlicePoolArgs.tpu_type`."""
    head, _, field = path.partition(".")
    return f"{head}.{re.sub(r'(?<!^)(?=[A-Z])', '_', field).lower()}" if field else path


class TpuSlicePool(pulumi.ComponentResource):
    """All slices of one group; multi-slice = N node pools, named by slice index. Works on any cluster."""

    node_pools: list[pulumi.CustomResource]
    """The node pools (gcp.container.NodePool), one per slice."""
    workload_policy: pulumi.CustomResource | None  # a ResourcePolicy; Pulumi resolves this, naming it loads gcp.compute
    """tpu7/tpu7x multi-host groups: the HIGH_THROUGHPUT workload policy their pools use."""
    plan: PoolGroupPlan
    """What was planned: machine type, topology, chips, labels and taints of every pool."""

    def __init__(self, name: str, args: TpuSlicePoolArgs, opts: pulumi.ResourceOptions | None = None):
        group = args.group or name
        pool = _pool_config(group, args)  # every check before the component registers anything
        plan = plan_slice_group(pool, cluster_name=_cluster_name(args) or "",
                                dedicated_slices=args.dedicated_slices, dedicated_owner=args.dedicated_owner)
        super().__init__("tpuplane:index:TpuSlicePool", name, {}, opts)
        self.plan = plan
        region = args.zone.rsplit("-", 1)[0]
        self.workload_policy = None
        policy_name = None
        if plan.workload_policy is not None:
            self.workload_policy = gcp.compute.ResourcePolicy(
                plan.workload_policy.name, name=plan.workload_policy.name, project=args.project, region=region,
                workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                    type="HIGH_THROUGHPUT", accelerator_topology=plan.workload_policy.accelerator_topology),
                opts=pulumi.ResourceOptions(parent=self))
            policy_name = self.workload_policy.name
        depends: Sequence[pulumi.Resource] = [r for r in (args.reservation_resource, self.workload_policy)
                                              if r is not None]
        self.node_pools = [
            gcp.container.NodePool(
                slice_pool.name,
                **_node_pool_args(slice_pool, project=args.project, location=args.location, zone=args.zone,
                                  cluster=args.cluster, service_account=args.service_account,
                                  policy_name=policy_name),
                # Pools that scale from zero are sized by the autoscaler; only their first size is ours.
                opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends),
                                            ignore_changes=["initialNodeCount"] if slice_pool.autoscaling else None))
            for slice_pool in plan.pools
        ]
        self.register_outputs({"node_pools": [p.name for p in self.node_pools]})
