"""`TpuSlicePool`: one GKE node pool per TPU slice of a group, from `infra.fleet.nodepools` plans, on any cluster."""

import dataclasses
from typing import Mapping, NotRequired, Optional, TypedDict

import pulumi
import pulumi_gcp as gcp

from tpuplane.components.batch_args import KueuePoolArgs
from tpuplane.components.options import child_options
from tpuplane.components.outputs import checked_when_known
from tpuplane.infra.args import Source
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.cluster import NODE_OAUTH_SCOPES
from tpuplane.infra.fleet.pools import (
    PENDING_RESERVATION,
    POOL_ARGS,
    SlicePoolSpec,
    pending_reservation_problems,
    read_slice_pool,
)
from tpuplane.infra.fleet.nodepools import PoolGroupPlan, SlicePoolPlan, plan_slice_group


def _node_pool_args(plan: SlicePoolPlan, *, project: str, location: str, zone: str,
                    cluster: pulumi.Input[str], service_account: pulumi.Input[str],
                    policy_name: pulumi.Input[str] | None, reservation: pulumi.Output[str] | None) -> dict:
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
        initial_node_count=plan.autoscaling.initial_node_count if plan.autoscaling else None,
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
                values=[reservation] if reservation is not None else list(affinity.values) or None)
            if affinity else None,
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


class SliceAutoscalingArgs(TypedDict):
    """A group that scales: `max_slices` node pools, each between no node and its whole slice (GKE scales a
    multi-host slice as one), the first `min_slices` held at full size. Kueue's quota follows `max_slices`."""

    min_slices: int
    """Slices always there (0: the group scales from zero)."""
    max_slices: int
    """The group's node pools: the most slices it scales to."""


class TpuSlicePoolArgs(TypedDict):
    """One group of identical TPU slices on a GKE cluster: tpuplane's `TpuCluster`, or one that exists already
    (made by your own Terraform or Pulumi), given by name and location. One node pool per slice, `<group>-<i>`."""

    project: str
    """The cluster's project."""
    location: str
    """The cluster's location: its region (regional control plane) or its zone."""
    zone: str
    """The zone of the TPU VMs; every slice of the group lives there."""
    cluster: pulumi.Input[str]
    """The cluster's name: `TpuCluster(...).cluster_name`, or the name of an existing cluster."""
    tpu_type: str
    """A TPU type `tpuplane catalog` knows, e.g. `v6e-16`, `v5p-128`, `tpu7x-8`."""
    cluster_name: NotRequired[str]
    """The cluster's name as plain text, for names derived from it (tpu7/tpu7x workload policies); needed only
    when `cluster` is an Output."""
    slices: NotRequired[int]
    """How many slices, each its own node pool (default 1; with `autoscaling`, its maximum)."""
    capacity: NotRequired[str]
    """on-demand (default), reservation, spot, flex-start or queued."""
    reservation: NotRequired[pulumi.Input[str]]
    """With capacity reservation: the reservation's name or `projects/P/reservations/R[/reservationBlocks/B]`;
    `TpuReservation(...).reservation_name` makes the pools wait for that reservation."""
    machine_type: NotRequired[str]
    """Only to pick the single-host 8-chip machine for 2x4 shapes (`ct6e-standard-8t`, `ct5lp-hightpu-8t`)."""
    max_run_duration: NotRequired[str]
    """`<seconds>s`, with flex-start or queued only."""
    maintenance_interval: NotRequired[str]
    """AS_NEEDED (default) or PERIODIC (the interval of the reservation the pools consume)."""
    disk_size_gb: NotRequired[int]
    """Boot disk size; GKE's default when unset."""
    disk_type: NotRequired[str]
    """Boot disk type (pd-balanced, hyperdisk-balanced, ...); GKE's default when unset."""
    accelerator_network: NotRequired[bool]
    """GKE's automated accelerator networking; unset: on for v6e, off otherwise (the cluster needs
    multi-networking)."""
    service_account: NotRequired[pulumi.Input[str]]
    """The nodes' service account email (least privilege); unset: the project's Compute Engine default."""
    group: NotRequired[str]
    """The group name the node pools are named after; default: the component's name."""
    dedicated_slices: NotRequired[int]
    """The first slices, held outside Kueue by `dedicated_owner` (a Shared Pathways Service); default 0."""
    dedicated_owner: NotRequired[str]
    """The service that holds `dedicated_slices`: its name labels and taints those pools."""
    autoscaling: NotRequired[SliceAutoscalingArgs]
    """Scale the group between `min_slices` and `max_slices` (on-demand, spot and reservation groups; flex-start
    and queued groups scale from zero already); default: a fixed size."""


_SOURCE = Source.args(POOL_ARGS, SlicePoolSpec)


def _read(name: str, args: object) -> SlicePoolSpec:
    """The Args read, the group named after the component unless they name it."""
    try:
        return read_slice_pool(args, _SOURCE, supplied={"group": name})
    except ConfigError as exc:
        if isinstance(args, Mapping) and args.get("group") is None:  # the component's name stood in
            raise ConfigError([dataclasses.replace(p, hint=p.hint or "the group name defaults to the component's name")
                               if p.path == _SOURCE.path("group") else p for p in exc.problems]) from None
        raise


class TpuSlicePool(pulumi.ComponentResource):
    """All slices of one group; multi-slice = N node pools, named by slice index. Works on any cluster.

    Pools wait for a reservation given as `TpuReservation(...).reservation_name`, or for anything in
    `opts.depends_on`."""

    node_pool_names: pulumi.Output[list[str]]
    """The GKE node pools' names, one per slice (`<group>-<i>`)."""
    workload_policy_name: pulumi.Output[str]
    """tpu7/tpu7x multi-host groups: the HIGH_THROUGHPUT workload policy their pools use (else unset)."""

    def __init__(self, name: str, args: TpuSlicePoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        reservation = args.get("reservation") if isinstance(args, Mapping) else None
        pending = isinstance(reservation, pulumi.Output)  # another resource's name, known once it exists
        # every check before the component registers anything (Args a stack config already read pass as they are)
        pool = _read(name, {**args, "reservation": PENDING_RESERVATION} if pending else args)
        if pending:  # the rest of the rules judge it once the other resource gives its name
            reservation = checked_when_known(reservation, SlicePoolSpec, "reservation", _SOURCE, rules=(
                lambda value: pending_reservation_problems(pool, value, _SOURCE),))
        cluster, service_account = (checked_when_known(getattr(pool, field), SlicePoolSpec, field, _SOURCE)
                                    for field in ("cluster", "service_account"))
        plan = plan_slice_group(pool)
        super().__init__("tpuplane:index:TpuSlicePool", name, {}, opts)
        self._plan = plan
        project, zone = pool.project, pool.zone
        self._workload_policy = None
        policy_name = None
        if plan.workload_policy is not None:
            self._workload_policy = gcp.compute.ResourcePolicy(
                plan.workload_policy.name, name=plan.workload_policy.name, project=project,
                region=zone.rsplit("-", 1)[0],
                workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                    type="HIGH_THROUGHPUT", accelerator_topology=plan.workload_policy.accelerator_topology),
                opts=child_options(self, opts))
            policy_name = self._workload_policy.name
        self._node_pools = [
            gcp.container.NodePool(
                slice_pool.name,
                **_node_pool_args(slice_pool, project=project, location=pool.location, zone=zone,
                                  cluster=cluster, service_account=service_account,
                                  policy_name=policy_name, reservation=reservation if pending else None),
                # Pools that scale from zero are sized by the autoscaler; only their first size is ours.
                opts=child_options(self, opts, depends_on=[self._workload_policy] if self._workload_policy else (),
                                   ignore_changes=["initialNodeCount"] if slice_pool.autoscaling else None))
            for slice_pool in plan.pools
        ]
        self.node_pool_names = pulumi.Output.all(*[p.name for p in self._node_pools])
        outputs: dict = {"node_pool_names": self.node_pool_names}
        if policy_name is not None:
            self.workload_policy_name = policy_name
            outputs["workload_policy_name"] = policy_name
        self.register_outputs(outputs)

    @property
    def node_pools(self) -> list[pulumi.CustomResource]:
        """The node pools (`gcp.container.NodePool`), one per slice."""
        return list(self._node_pools)

    @property
    def workload_policy(self) -> pulumi.CustomResource | None:
        """The group's workload policy (`gcp.compute.ResourcePolicy`), for tpu7/tpu7x multi-host slices."""
        return self._workload_policy

    @property
    def plan(self) -> PoolGroupPlan:
        """What was planned: machine type, topology, chips, labels and taints of every pool."""
        return self._plan

    @property
    def kueue_pool(self) -> "KueuePoolArgs":
        """This group as `BatchStackArgs.pools` describes a pool group, so Kueue's quotas follow it."""
        return _kueue_pool_args(self._plan.config)

    @staticmethod
    def describe(name: str, args: TpuSlicePoolArgs) -> "KueuePoolArgs":
        """The group these Args would make, as `BatchStackArgs.pools` describes it, creating nothing: for queues
        on pools that already exist (made by other means, or by another stack). Checked as the component
        checks them."""
        return _kueue_pool_args(_read(name, args))


def _kueue_pool_args(pool: SlicePoolSpec) -> "KueuePoolArgs":
    return KueuePoolArgs(**pool.kueue_pool.model_dump(mode="json", exclude_none=True))
