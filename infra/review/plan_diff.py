"""Compare two offline plans (`tpuplane plan --format json`) the way a reviewer needs it in a PR.

A Pulumi preview needs the CLI, provider plugins and cloud credentials; the offline plan needs none, so a
PR can show what would change on every push. The comparison is by URN: a resource is created, deleted,
updated in place or replaced. Replacement matters on a TPU fleet because a replaced node pool is a slice
torn down and provisioned again (jobs die, capacity may not come back), so each property that forces it
carries the reason, and the TPU impact is summed per generation in slices and chips.

Pure: plans in, frozen dataclasses out. Reading files is the CLI's job.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, cast

from tpuplane.infra.redaction import PULUMI_SECRET_SIG, REDACTED, child_path
from tpuplane.infra.review.plan import (
    BUCKET_GRANT, CLUSTER, HELM_RELEASE, NODE_POOL, PERSISTENT_VOLUME, PERSISTENT_VOLUME_CLAIM, PROJECT_GRANT,
    RESERVATION, RESOURCE_POLICY, NodePoolInputs, Plan, PlannedResource, TpuPool, tpu_pool,
)

# ---------------------------------------------------------------------------------------------------------
# Properties that force replacement (values that must never be printed: see tpuplane.infra.redaction)


@dataclass(frozen=True)
class ReplacementRule:
    """A change at `path` (or below it) replaces the resource, or every node of a pool, for `reason`; unless
    `unless` holds of the inputs before and after (the program tells the engine to ignore the change)."""

    path: str
    reason: str
    unless: Callable[[Mapping[str, Any], Mapping[str, Any]], bool] | None = None

    def covers(self, path: str) -> bool:
        """The rule's path is `path`, above it or below it (`nodeConfig` covers `nodeConfig.spot`, and back)."""
        rule = self.path
        if not rule or path == rule:
            return True
        shorter, longer = (rule, path) if len(rule) < len(path) else (path, rule)
        return longer.startswith(shorter) and longer[len(shorter)] in ".["


def _rules(reason: str, *paths: str) -> tuple[ReplacementRule, ...]:
    return tuple(ReplacementRule(p, reason) for p in paths)


_FORCE_NEW = "the provider deletes and re-creates the resource (ForceNew)"
_NODES_RECREATED = ("GKE recreates every node of the pool (the provider updates in place, but a TPU slice "
                    "is torn down and provisioned again)")

def _autoscaled(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """`TpuSlicePool` tells the engine to ignore the initial size of a pool that autoscales (the autoscaler owns
    it), also on the update that turns autoscaling on: the engine keeps the size it has."""
    return bool(after.get("autoscaling"))


REPLACEMENT_RULES: Mapping[str, tuple[ReplacementRule, ...]] = {
    NODE_POOL: (
        ReplacementRule("initialNodeCount", _FORCE_NEW, unless=_autoscaled),
        *_rules(_FORCE_NEW, "cluster", "location", "project", "name", "namePrefix",
                "placementPolicy", "queuedProvisioning", "maxPodsPerNode",
                "networkConfig.additionalNodeNetworkConfigs", "networkConfig.additionalPodNetworkConfigs",
                "networkConfig.acceleratorNetworkProfile",
                "networkConfig.createPodRange", "networkConfig.podRange", "networkConfig.podIpv4CidrBlock"),
        *_rules(_FORCE_NEW, *(f"nodeConfig.{f}" for f in (
            "spot", "preemptible", "flexStart", "maxRunDuration", "reservationAffinity", "serviceAccount",
            "oauthScopes", "guestAccelerators", "localSsdCount", "ephemeralStorageLocalSsdConfig",
            "localNvmeSsdBlockConfig", "secondaryBootDisks", "gvnic", "metadata", "minCpuPlatform",
            "shieldedInstanceConfig", "bootDiskKmsKey", "hostMaintenancePolicy", "advancedMachineFeatures",
            "soleTenantConfig", "nodeGroup", "confidentialNodes", "enableConfidentialStorage"))),
        *_rules(_NODES_RECREATED, "nodeConfig.machineType", "nodeLocations"),
        *_rules("taint edits have been reported to replace the pool (pulumi/pulumi-gcp#1139)", "nodeConfig.taints"),
    ),
    CLUSTER: (
        *_rules(_FORCE_NEW, "location", "project", "name", "network", "subnetwork", "networkingMode",
                "enableMultiNetworking",
                "ipAllocationPolicy", "clusterIpv4Cidr", "defaultMaxPodsPerNode", "datapathProvider",
                "privateClusterConfig.enablePrivateNodes", "privateClusterConfig.masterIpv4CidrBlock",
                "privateClusterConfig.privateEndpointSubnetwork", "enableAutopilot", "enableKubernetesAlpha",
                "initialNodeCount"),
        *_rules("the default node pool's config is ForceNew on the cluster: the whole cluster is replaced",
                "nodeConfig"),
    ),
    RESERVATION: _rules(_FORCE_NEW, "name", "project", "zone", "specificReservation.instanceProperties",
                        "specificReservationRequired"),
    RESOURCE_POLICY: _rules("resource policies are immutable: every change replaces the policy", ""),
    HELM_RELEASE: _rules("a Helm release is identified by its name and namespace", "name", "namespace"),
    BUCKET_GRANT: _rules("an IAM member grant is replaced on any change: the old grant is revoked", ""),
    PROJECT_GRANT: _rules("an IAM member grant is replaced on any change: the old grant is revoked", ""),
}
_KUBERNETES_RULES = _rules("a Kubernetes object is identified by its apiVersion, kind, name and namespace",
                           "apiVersion", "kind", "metadata.name", "metadata.namespace")
# What the Kubernetes provider replaces rather than patches, where tpuplane renders the kind (its `forceNew` table).
_KIND_RULES: Mapping[str, tuple[ReplacementRule, ...]] = {
    PERSISTENT_VOLUME: _rules("a volume's source is immutable: the volume is replaced (its data is kept: Retain)",
                              "spec.csi"),
    PERSISTENT_VOLUME_CLAIM: _rules("a claim's access, class and volume are immutable: the claim is replaced",
                                    "spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
}


def replacement_rules(resource_type: str) -> tuple[ReplacementRule, ...]:
    if resource_type in REPLACEMENT_RULES:
        return REPLACEMENT_RULES[resource_type]
    return _KUBERNETES_RULES + _KIND_RULES.get(resource_type, ()) if resource_type.startswith("kubernetes:") else ()


def _first_key(path: str) -> str:
    return _PATH_STEP.split(path, 1)[0]


_PATH_STEP = re.compile(r"[.\[]")


@functools.lru_cache(maxsize=None)
def _rules_by_first_key(resource_type: str) -> dict[str, tuple[ReplacementRule, ...]]:
    """A type's rules by the first key of their path (a rule covers only paths that start with it, or the whole
    resource when its path is empty), each list in the rules' order."""
    rules = replacement_rules(resource_type)
    everything = [r for r in rules if not r.path]
    keys = {_first_key(r.path) for r in rules if r.path}
    return {key: tuple(r for r in rules if not r.path or _first_key(r.path) == key) for key in keys} | \
        {"": tuple(everything)}


@functools.lru_cache(maxsize=1 << 16)  # the same paths recur in every pool of a fleet
def _covering(resource_type: str, path: str) -> tuple[ReplacementRule, ...]:
    by_key = _rules_by_first_key(resource_type)
    return tuple(r for r in by_key.get(_first_key(path), by_key[""]) if r.covers(path))


def replacement_reason(resource_type: str, path: str, before: Mapping[str, Any] | None = None,
                       after: Mapping[str, Any] | None = None) -> str:
    """Why a change at `path` replaces the resource (the first rule that covers it and that the inputs `before`
    and `after` do not excuse), or "" for an in-place update."""
    return next((r.reason for r in _covering(resource_type, path)
                 if not (r.unless and r.unless(before or {}, after or {}))), "")


# ---------------------------------------------------------------------------------------------------------
# The diff


class Action(str, Enum):
    CREATE = "create"
    UPDATE = "update"
    REPLACE = "replace"
    DELETE = "delete"


@dataclass(frozen=True)
class PropertyChange:
    """One leaf that differs. `before`/`after` are None when the property is added/removed; secrets redacted."""

    path: str
    kind: str  # "add" | "remove" | "change"
    before: Any = None
    after: Any = None
    replaces: str = ""  # why this change forces replacement; empty when it is applied in place


@dataclass(frozen=True)
class ResourceChange:
    urn: str
    type: str
    name: str
    action: Action
    properties: tuple[PropertyChange, ...] = ()


@dataclass(frozen=True)
class TpuImpact:
    """What a change does to one TPU generation's capacity. Recreated slices go down and come back."""

    generation: str
    slices_added: int = 0
    slices_removed: int = 0
    slices_recreated: int = 0
    chips_added: int = 0
    chips_removed: int = 0
    chips_recreated: int = 0


@dataclass(frozen=True)
class PlanDiff:
    base: tuple[str, str]  # (project, stack)
    head: tuple[str, str]
    changes: tuple[ResourceChange, ...]
    tpu_impact: tuple[TpuImpact, ...]

    @property
    def has_changes(self) -> bool:
        return bool(self.changes)

    def count(self, action: Action) -> int:
        return sum(1 for c in self.changes if c.action is action)


_MISSING: Any = object()


def _present(value: Any) -> Any:
    """Pulumi treats a null input as unset."""
    return _MISSING if value is None else value


Key = tuple[str | int, ...]


def _same(before: Any, after: Any) -> bool:
    """Equal as the engine would see it: same type and value; NaN equals NaN (identical plans never differ)."""
    if type(before) is not type(after):
        return False
    if before == after:
        return True
    if type(before) in (str, int, bool):  # only a float (or a container of one) can be unequal to itself
        return False
    dump = lambda v: json.dumps(v, sort_keys=True, default=repr)  # noqa: E731 (NaN dumps as NaN on both sides)
    return dump(before) == dump(after)


def _leaf_changes(before: Any, after: Any, keys: Key = ()) -> Iterator[tuple[Key, Any, Any]]:
    """(keys, before, after) for every differing leaf; containers are walked when both sides agree on the
    container type (or one side is absent), so a new label shows as `nodeConfig.labels.team`. A value the
    engine marks secret is a leaf: it is never walked into."""
    if before is _MISSING and after is _MISSING:
        return
    if type(before) is type(after) and type(before) in (dict, list) and before == after:
        return  # an unchanged subtree, compared at C speed rather than walked
    if PULUMI_SECRET_SIG in (before if isinstance(before, Mapping) else ()) or \
            PULUMI_SECRET_SIG in (after if isinstance(after, Mapping) else ()):
        pass
    elif isinstance(before, Mapping) or isinstance(after, Mapping):
        if all(v is _MISSING or isinstance(v, Mapping) for v in (before, after)):
            b = {} if before is _MISSING else before
            a = {} if after is _MISSING else after
            for key in sorted(set(b) | set(a), key=str):
                yield from _leaf_changes(_present(b.get(key)), _present(a.get(key)), (*keys, str(key)))
            return
    elif isinstance(before, list) or isinstance(after, list):
        if all(v is _MISSING or isinstance(v, list) for v in (before, after)):
            b = [] if before is _MISSING else before
            a = [] if after is _MISSING else after
            for i in range(max(len(b), len(a))):
                yield from _leaf_changes(_present(b[i]) if i < len(b) else _MISSING,
                                         _present(a[i]) if i < len(a) else _MISSING, (*keys, i))
            return
    if before is not _MISSING and after is not _MISSING and _same(before, after):
        return
    yield keys, before, after


def _shown_at(redacted: Any, keys: Key) -> Any:
    """The printable value at `keys` of a redacted tree; a secret higher up hides everything below it."""
    for key in keys:
        if isinstance(redacted, dict) and key in redacted:
            redacted = redacted[key]
        elif isinstance(redacted, list) and isinstance(key, int) and key < len(redacted):
            redacted = redacted[key]
        else:
            return REDACTED
    return redacted


def _path(keys: Key) -> str:
    path = ""
    for key in keys:
        path = child_path(path, key)
    return path


def property_changes(resource_type: str, before: Mapping[str, Any], after: Mapping[str, Any],
                     shown: tuple[Mapping[str, Any], Mapping[str, Any]]) -> tuple[PropertyChange, ...]:
    """Every differing leaf, found on the real values and shown from their redacted copies `shown` (the redaction
    sees whole env entries, args lists and Secret objects, which a single leaf cannot)."""
    shown_before, shown_after = shown
    changes = []
    for keys, b, a in _leaf_changes(dict(before), dict(after)):
        path = _path(keys)
        reason = replacement_reason(resource_type, path, before, after)
        changes.append(PropertyChange(
            path=path,
            kind="add" if b is _MISSING else "remove" if a is _MISSING else "change",
            before=None if b is _MISSING else _shown_at(shown_before, keys),
            after=None if a is _MISSING else _shown_at(shown_after, keys),
            replaces=reason,
        ))
    return tuple(changes)


@dataclass
class _ImpactTally:
    counts: dict[str, dict[str, int]] = field(default_factory=dict)

    def add(self, generation: str, **deltas: int) -> None:
        row = self.counts.setdefault(generation, {})
        for name, value in deltas.items():
            row[name] = row.get(name, 0) + value

    def record(self, before: TpuPool | None, after: TpuPool | None, recreated: bool) -> None:
        if before and after and before.generation == after.generation:
            delta = after.chips - before.chips
            self.add(before.generation, chips_added=max(delta, 0), chips_removed=max(-delta, 0))
            if recreated:
                self.add(before.generation, slices_recreated=1, chips_recreated=before.chips)
            return
        if before:
            self.add(before.generation, slices_removed=1, chips_removed=before.chips)
        if after:
            self.add(after.generation, slices_added=1, chips_added=after.chips)

    def impacts(self) -> tuple[TpuImpact, ...]:
        rows = (TpuImpact(generation, **self.counts[generation]) for generation in sorted(self.counts))
        return tuple(row for row in rows if row != TpuImpact(row.generation))


def _tpu(resource: PlannedResource | None) -> TpuPool | None:
    return tpu_pool(cast(NodePoolInputs, resource.read())) if resource is not None and resource.type == NODE_POOL \
        else None


def diff_plans(base: Plan, head: Plan, redacted: tuple[Plan, Plan] | None = None) -> PlanDiff:
    """Every resource that differs between `base` and `head`, sorted by URN, and the TPU impact: found on the
    plans, shown from their redacted copies (`Plan.redacted`, the one redaction; `redacted` when the caller has
    them already)."""
    base_shown, head_shown = redacted or (base.redacted(), head.redacted())
    before, after = base.by_urn(), head.by_urn()
    shown_before = {r.urn: s for r, s in zip(base.resources, base_shown.resources)}
    shown_after = {r.urn: s for r, s in zip(head.resources, head_shown.resources)}
    for new in head.resources:  # a base resource under an alias of a head one is that resource, moved
        moved = next((alias for alias in new.aliases
                      if alias in before and alias not in after and before[alias].type == new.type), None)
        if new.urn not in before and moved is not None:
            before[new.urn] = before.pop(moved)
            shown_before[new.urn] = shown_before.pop(moved)
    changes: list[ResourceChange] = []
    tally = _ImpactTally()
    for urn in sorted(set(before) | set(after)):
        old, new = before.get(urn), after.get(urn)
        if old is None:
            action, props = Action.CREATE, ()
        elif new is None:
            action, props = Action.DELETE, ()
        else:
            props = property_changes(new.type, old.inputs, new.inputs,
                                     (shown_before[urn].inputs, shown_after[urn].inputs))
            if not props:
                continue
            action = Action.REPLACE if any(p.replaces for p in props) else Action.UPDATE
        shown = shown_after[urn] if new is not None else shown_before[urn]
        changes.append(ResourceChange(shown.urn, shown.type, shown.name, action, props))
        tally.record(_tpu(old), _tpu(new), recreated=action is Action.REPLACE)
    return PlanDiff((base_shown.project, base_shown.stack), (head_shown.project, head_shown.stack), tuple(changes),
                    tally.impacts())
