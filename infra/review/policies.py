"""The fleet's guard rails as plain functions over engine-shaped resources (camelCase Pulumi inputs).

The same functions run in two places: `policy/` wraps them into a pulumi-policy pack for `pulumi preview
--policy-pack policy` in CI, and `check_plan` runs them over an offline plan (`tpuplane plan --policy`), so
a PR is checked without the Pulumi CLI or cloud credentials. Each check yields what is wrong and how to
fix it; it never prints a secret value.

Resource checks take `(resource_type, props, urn)`; stack checks take the list of resources (plus their
config) because their rules span resources: Kueue quota against pool capacity, pools against the
reservation they consume, deletion guards on production stacks.
"""

from __future__ import annotations

import functools
import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tpuplane.infra.redaction import redact_text, sensitive_paths
from tpuplane.infra.review.plan import CLUSTER, NODE_POOL, RESERVATION, Plan, PlannedResource, pool_vms, tpu_pool

from tpuplane.infra.fleet.cluster import PRODUCTION_LABEL, WORKLOAD_POOL_SUFFIX
from tpuplane.infra.fleet.nodepools import RESERVATION_KEY as RESERVATION_NAME_KEY
from tpuplane.infra.naming import GKE_MAX_NODES
from tpuplane.infra.quantity import whole_amount
from tpuplane.infra.fleet.scheduling import DEDICATED_KEY, TPU_RESOURCE, TPU_TAINT_KEY


@dataclass(frozen=True)
class Violation:
    """A broken rule on one resource (its URN), with how to fix it."""

    policy: str
    resource: str
    message: str

    def __str__(self) -> str:
        return f"[{self.policy}] {redact_text(self.resource.rsplit('::', 1)[-1])}: {redact_text(self.message)}"


ResourceCheck = Callable[[str, Mapping[str, Any], str], list[Violation]]
StackCheck = Callable[..., list[Violation]]


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    check: ResourceCheck


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    check: StackCheck
    # JSON-schema properties of the rule's config; each becomes a keyword argument of `check`.
    config_schema: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


RESOURCE_RULES: list[ResourceRule] = []
STACK_RULES: list[StackRule] = []


def _resource_rule(name: str, description: str) -> Callable[[Callable[..., Iterable[str]]], ResourceCheck]:
    """Register a check that yields messages; the registered function returns Violations."""
    def register(check: Callable[..., Iterable[str]]) -> ResourceCheck:
        @functools.wraps(check)
        def run(resource_type: str, props: Mapping[str, Any], urn: str) -> list[Violation]:
            return [Violation(name, urn, message) for message in check(resource_type, props)]
        RESOURCE_RULES.append(ResourceRule(name, description, run))
        return run
    return register


def _stack_rule(name: str, description: str, config_schema: Mapping[str, Mapping[str, Any]] | None = None
                ) -> Callable[[Callable[..., Iterable[tuple[str, str]]]], StackCheck]:
    """Register a check that yields (urn, message); the registered function returns Violations."""
    def register(check: Callable[..., Iterable[tuple[str, str]]]) -> StackCheck:
        @functools.wraps(check)
        def run(resources: Sequence[PlannedResource], **config: Any) -> list[Violation]:
            return [Violation(name, urn, message) for urn, message in check(resources, **config)]
        STACK_RULES.append(StackRule(name, description, run, config_schema or {}))
        return run
    return register


def _node_config(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return props.get("nodeConfig") or {}


def _affinity(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return _node_config(props).get("reservationAffinity") or {}


# ---------------------------------------------------------------------------------------------------------
# Node pools


@_resource_rule("tpu-pool-has-tpu-taint",
                "TPU node pools carry the google.com/tpu NoSchedule taint, so only TPU workloads land there.")
def tpu_pool_has_tpu_taint(resource_type: str, props: Mapping[str, Any]) -> Iterator[str]:
    if resource_type != NODE_POOL or tpu_pool(props) is None:
        return
    taints = _node_config(props).get("taints") or []
    if not any(t.get("key") == TPU_TAINT_KEY and t.get("effect") in ("NO_SCHEDULE", "NO_EXECUTE") for t in taints):
        yield (f"TPU node pool has no `{TPU_TAINT_KEY}` taint, so CPU pods can take its nodes. Add "
               f'nodeConfig.taints [{{key: "{TPU_TAINT_KEY}", value: "present", effect: "NO_SCHEDULE"}}] '
               "and tolerate it in TPU workloads.")


def _capacity_modes(props: Mapping[str, Any]) -> list[str]:
    config = _node_config(props)
    modes = []
    if _affinity(props).get("consumeReservationType") in ("SPECIFIC_RESERVATION", "ANY_RESERVATION"):
        modes.append("reservation")
    if config.get("spot") or config.get("preemptible"):
        modes.append("spot")
    if config.get("flexStart"):
        modes.append("flex-start")
    if (props.get("queuedProvisioning") or {}).get("enabled"):
        modes.append("queued provisioning")
    return modes


_NO_RESERVATION_FIX = "set nodeConfig.reservationAffinity.consumeReservationType = \"NO_RESERVATION\""


@_resource_rule("one-capacity-mode-per-pool",
                "A node pool uses exactly one capacity mode (on-demand, reservation, spot, flex-start, queued "
                "provisioning) and the settings GKE requires for it.")
def one_capacity_mode_per_pool(resource_type: str, props: Mapping[str, Any]) -> Iterator[str]:
    if resource_type != NODE_POOL:
        return
    modes = _capacity_modes(props)
    is_tpu = tpu_pool(props) is not None
    exclusive = list(modes)
    if not is_tpu and "flex-start" in modes and "queued provisioning" in modes:
        exclusive.remove("queued provisioning")  # GPU DWS: flex-start with queued provisioning is one mode
    if len(exclusive) > 1:
        extra = (" (GKE: \"Flex start node pools don't support TPUs with queued provisioning\")"
                 if is_tpu and "flex-start" in modes and "queued provisioning" in modes else "")
        yield (f"node pool combines capacity modes {', '.join(exclusive)}{extra}; choose exactly one and "
               "split the capacity into one pool per mode.")
    no_reservation = _affinity(props).get("consumeReservationType") == "NO_RESERVATION"
    for mode in ("spot", "flex-start", "queued provisioning"):
        if mode in modes and not no_reservation:
            yield f"{mode} node pools must not consume reservations: {_NO_RESERVATION_FIX}."
    if "flex-start" in modes:
        if (props.get("management") or {}).get("autoRepair") is not False:
            yield "flex-start node pools need auto-repair off: set management.autoRepair = false."
        if props.get("nodeCount") is not None:
            yield ("flex-start node pools have no static size: remove nodeCount and use autoscaling "
                   "{minNodeCount: 0, maxNodeCount: <VMs per slice>, locationPolicy: \"ANY\"}.")
    if _affinity(props).get("consumeReservationType") == "SPECIFIC_RESERVATION":
        affinity = _affinity(props)
        values = affinity.get("values") or []
        if affinity.get("key") != RESERVATION_NAME_KEY or len(values) != 1:
            yield ("a SPECIFIC_RESERVATION pool names exactly one reservation: set reservationAffinity "
                   f"{{key: \"{RESERVATION_NAME_KEY}\", values: [\"[projects/P/reservations/]NAME\"]}}.")


# ---------------------------------------------------------------------------------------------------------
# Cluster and identity


@_resource_rule("workload-identity-enabled",
                "Pods reach Google APIs through Workload Identity, never through the node service account.")
def workload_identity_enabled(resource_type: str, props: Mapping[str, Any]) -> Iterator[str]:
    if resource_type == CLUSTER:
        pool = (props.get("workloadIdentityConfig") or {}).get("workloadPool")
        if not isinstance(pool, str) or not pool.endswith(WORKLOAD_POOL_SUFFIX):
            yield (f"cluster has no Workload Identity pool: set workloadIdentityConfig.workloadPool = "
                   f"\"<project>{WORKLOAD_POOL_SUFFIX}\".")
    elif resource_type == NODE_POOL:
        mode = (_node_config(props).get("workloadMetadataConfig") or {}).get("mode")
        if mode != "GKE_METADATA":
            yield (f"node pool exposes the node's metadata server (mode {mode or 'unset'}): set "
                   "nodeConfig.workloadMetadataConfig.mode = \"GKE_METADATA\".")


@_resource_rule("control-plane-not-public",
                "The cluster control plane is private, or reachable only from authorized networks.")
def control_plane_not_public(resource_type: str, props: Mapping[str, Any]) -> Iterator[str]:
    if resource_type != CLUSTER:
        return
    if (props.get("privateClusterConfig") or {}).get("enablePrivateEndpoint") is True:
        return
    blocks = (props.get("masterAuthorizedNetworksConfig") or {}).get("cidrBlocks") or []
    cidrs = [b.get("cidrBlock") if isinstance(b, Mapping) else b for b in blocks]
    if not cidrs:
        yield ("the control plane is public to the whole internet: set privateClusterConfig.enablePrivateEndpoint"
               " = true, or list the allowed ranges in masterAuthorizedNetworksConfig.cidrBlocks.")
        return
    networks = []
    for i, cidr in enumerate(cidrs):
        network = _canonical_network(cidr)
        if network is None:
            yield (f"masterAuthorizedNetworksConfig.cidrBlocks[{i}] is not a CIDR block GKE takes: write a network "
                   "such as 203.0.113.0/24 (address bits beyond the prefix zero).")
        else:
            networks.append(network)
    covered = sum(n.num_addresses for n in ipaddress.collapse_addresses(networks))
    if covered > _MAX_AUTHORIZED_ADDRESSES:
        listed = ", ".join(str(n) for n in networks[:8]) + (", ..." if len(networks) > 8 else "")
        yield (f"masterAuthorizedNetworksConfig.cidrBlocks ({listed}) together authorize {covered} addresses, "
               f"more than a /8 "
               f"({_MAX_AUTHORIZED_ADDRESSES}): a control plane reachable from that much of the internet is public. "
               "List only your office, VPN or CI ranges.")


_MAX_AUTHORIZED_ADDRESSES = 1 << 24  # a /8


def _canonical_network(cidr: Any) -> ipaddress.IPv4Network | None:
    """The IPv4 network a cidrBlock names, or None when GKE would refuse it (or it is not canonical)."""
    if not isinstance(cidr, str):
        return None
    try:
        network = ipaddress.IPv4Network(cidr, strict=True)
    except ValueError:
        return None
    return network if str(network) == cidr else None


@_resource_rule("no-plaintext-secrets",
                "No input holds a plaintext secret: passwords, tokens, API keys, private keys, service-account keys.")
def no_plaintext_secrets(resource_type: str, props: Mapping[str, Any]) -> Iterator[str]:
    for path in sensitive_paths(props):
        yield (f"input `{path}` holds a plaintext secret (value not shown): pass it as a Pulumi secret "
               "(`pulumi config set --secret`, `pulumi.Output.secret`) or reference Secret Manager, and rotate it "
               "if it was committed.")


# ---------------------------------------------------------------------------------------------------------
# Stack rules

_RESERVATION_PATH = re.compile(
    r"(?:projects/(?P<project>[^/]+)/reservations/)?(?P<name>[^/]+)(?:/reservationBlocks/.+)?")


def _reservation_key(resource: PlannedResource) -> str:
    return str(resource.inputs.get("name") or resource.name)


def _last_segment(value: Any) -> str:
    return str(value or "").rsplit("/", 1)[-1]


def _consumed_reservation(pool: PlannedResource, reservations: Mapping[str, PlannedResource]) -> PlannedResource | None:
    """The reservation of this plan a SPECIFIC_RESERVATION pool consumes, if it is declared here."""
    affinity = _affinity(pool.inputs)
    values = affinity.get("values") or []
    if affinity.get("consumeReservationType") != "SPECIFIC_RESERVATION" or len(values) != 1:
        return None
    match = _RESERVATION_PATH.fullmatch(str(values[0]))
    reservation = reservations.get(match["name"]) if match else None
    if reservation is None:
        return None
    project = reservation.inputs.get("project")
    if match and match["project"] and project and match["project"] != project:
        return None
    return reservation


@_stack_rule("reservation-fits-pools",
             "Node pools consuming a reservation declared in the stack match its machine type and zone, and "
             "together fit in its count.")
def reservation_fits_pools(resources: Sequence[PlannedResource]) -> Iterator[tuple[str, str]]:
    reservations = {_reservation_key(r): r for r in resources if r.type == RESERVATION}
    consumers: dict[str, list[PlannedResource]] = {}
    for pool in (r for r in resources if r.type == NODE_POOL):
        reservation = _consumed_reservation(pool, reservations)
        if reservation is not None:
            consumers.setdefault(reservation.urn, []).append(pool)
    for reservation in reservations.values():
        pools = consumers.get(reservation.urn, [])
        specific = reservation.inputs.get("specificReservation") or {}
        machine_type = _last_segment((specific.get("instanceProperties") or {}).get("machineType"))
        zone = reservation.inputs.get("zone")
        for pool in pools:
            pool_machine = _node_config(pool.inputs).get("machineType")
            if machine_type and pool_machine != machine_type:
                yield pool.urn, (f"consumes reservation {_reservation_key(reservation)} of machine type "
                                 f"{machine_type}, but the pool uses {pool_machine}: use a reservation of "
                                 f"{pool_machine} or change the pool's machine type.")
            locations = pool.inputs.get("nodeLocations") or []
            if zone and locations and zone not in locations:
                yield pool.urn, (f"consumes reservation {_reservation_key(reservation)} in zone {zone}, but its "
                                 f"nodes are in {', '.join(locations)}: set nodeLocations = [\"{zone}\"].")
        count = specific.get("count")
        needed = sum(pool_vms(p.read()) for p in pools)
        if isinstance(count, int) and needed > count:
            names = ", ".join(f"{p.name} ({pool_vms(p.read())})" for p in pools)
            yield reservation.urn, (f"reservation holds {count} VMs but its pools need {needed}: {names}. "
                                    "Reduce the slices, or raise specificReservation.count.")


def _is_cluster_queue(resource_type: str) -> bool:
    return resource_type.startswith("kubernetes:kueue.x-k8s.io/") and resource_type.endswith(":ClusterQueue")


def _tpu_quotas(queue: PlannedResource) -> Iterator[Any]:
    for group in (queue.inputs.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for resource in flavor.get("resources") or []:
                if resource.get("name") == TPU_RESOURCE:
                    yield resource.get("nominalQuota")


@_stack_rule("kueue-tpu-quota-matches-pools",
             "The google.com/tpu nominalQuota of the Kueue ClusterQueues equals the chips the TPU node pools hold, "
             "less the pools dedicated to a service (label tpuplane.dev/dedicated).")
def kueue_tpu_quota_matches_pools(resources: Sequence[PlannedResource]) -> Iterator[tuple[str, str]]:
    queues = [r for r in resources if _is_cluster_queue(r.type)]
    if not queues:
        return  # Kueue is not managed by this stack
    quota = 0
    for queue in queues:
        for quantity in _tpu_quotas(queue):
            chips = whole_amount(quantity)
            if chips is None:
                yield queue.urn, (f"nominalQuota {quantity!r} of {TPU_RESOURCE} is not a whole number of chips: "
                                  "write it as an integer.")
            else:
                quota += chips
    pools = [(r, tpu) for r in resources if r.type == NODE_POOL and (tpu := tpu_pool(r.read())) is not None
             and DEDICATED_KEY not in ((r.inputs.get("nodeConfig") or {}).get("labels") or {})]
    capacity = sum(tpu.chips for _, tpu in pools)  # pools dedicated to a service are not Kueue's to admit
    if quota != capacity:
        detail = ", ".join(f"{r.name} {tpu.chips}" for r, tpu in pools) or "no TPU pools"
        yield queues[0].urn, (f"ClusterQueues admit {quota} {TPU_RESOURCE} chips but the TPU node pools hold "
                              f"{capacity} ({detail}): set the nominalQuota to {capacity} so Kueue admits "
                              "exactly what the pools can run.")


def is_production(resources: Sequence[PlannedResource]) -> bool:
    """A stack is production when its Cluster carries the `tpuplane-production: "true"` resource label."""
    return any(
        r.type == CLUSTER and (r.inputs.get("resourceLabels") or {}).get(PRODUCTION_LABEL) == "true"
        for r in resources
    )


@_stack_rule("deletion-protection-in-production",
             "On production stacks the cluster has deletion protection and reservations are never deleted.",
             config_schema={"production": {"type": "boolean", "default": False,
                                           "description": "Treat the stack as production."}})
def deletion_protection_in_production(resources: Sequence[PlannedResource], *, production: bool = False
                                      ) -> Iterator[tuple[str, str]]:
    if not (production or is_production(resources)):
        return
    for r in resources:
        if r.type == CLUSTER and r.inputs.get("deletionProtection") is not True:
            yield r.urn, "production cluster without deletion protection: set deletionProtection = true."
        if r.type == RESERVATION and r.inputs.get("deletionPolicy") not in ("PREVENT", "ABANDON"):
            yield r.urn, ("production reservation would be released on delete: set deletionPolicy = "
                          "\"PREVENT\" (or \"ABANDON\" to keep it outside the stack).")


def _pool_nodes(inputs: Mapping[str, Any]) -> int:
    """Nodes a pool may hold: its static size, else the autoscaling ceiling; per-zone counts (`nodeCount`,
    `maxNodeCount`) times its zones."""
    autoscaling = inputs.get("autoscaling") or {}
    zones = len(inputs.get("nodeLocations") or []) or 1
    total = autoscaling.get("totalMaxNodeCount")
    if isinstance(total, int) and not isinstance(total, bool):
        return total
    for per_zone in (inputs.get("nodeCount"), autoscaling.get("maxNodeCount"), inputs.get("initialNodeCount")):
        if isinstance(per_zone, int) and not isinstance(per_zone, bool):
            return per_zone * zones
    return 0


@_stack_rule("cluster-node-limit",
             f"A cluster's node pools together hold at most {GKE_MAX_NODES} nodes (GKE's limit), CPU pools included.")
def cluster_node_limit(resources: Sequence[PlannedResource]) -> Iterator[tuple[str, str]]:
    nodes: dict[str, int] = {}
    for r in resources:
        if r.type == NODE_POOL:
            cluster = str(r.inputs.get("cluster") or "")
            nodes[cluster] = nodes.get(cluster, 0) + _pool_nodes(r.inputs)
    for r in resources:
        if r.type == CLUSTER:
            total = nodes.get(str(r.inputs.get("name") or r.name), 0)
            if total > GKE_MAX_NODES:
                yield r.urn, (f"the node pools of this cluster hold up to {total} nodes, more than GKE's "
                              f"{GKE_MAX_NODES}: remove pools or slices, or split the fleet into clusters.")


# ---------------------------------------------------------------------------------------------------------
# Offline plan


def check_plan(plan: Plan, *, production: bool = False) -> list[Violation]:
    """Every violation in an offline plan: resource rules per resource, then stack rules."""
    violations = [
        v for r in plan.resources for rule in RESOURCE_RULES for v in rule.check(r.type, r.inputs, r.urn)
    ]
    config = {"production": production}
    for rule in STACK_RULES:
        violations += rule.check(plan.resources, **{k: config[k] for k in rule.config_schema if k in config})
    return violations
