"""The scheduling check's facts read from a live cluster instead of a stack: its Kueue objects and its nodes.

`tpuplane workload submit` without `--stack` and `tpuplane workload why` judge a JobSet with the very simulation
`workload check` runs (`tpuplane.infra.batch.schedule_check`), on what the cluster holds: ResourceFlavors,
ClusterQueues, LocalQueues and WorkloadPriorityClasses as they are, and node pools gathered from the nodes (GKE's
`gke-nodepool` label; a node without one is a pool of its own). A pool's labels are those all its nodes share; its
allocatable is its smallest node's, so a pod that fits the pool fits every node of it. Cordoned nodes take no pods
and are left out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from tpuplane.infra.batch.api_objects import Obj, field, items, labels, meta, quantity, text
from tpuplane.infra.batch.schedule_check import NodePoolFacts, StackFacts
from tpuplane.infra.fleet.scheduling import NODEPOOL_LABEL, TPU_RESOURCE

_MIB = Decimal(2**20)


def _with_resource_groups(queue: Obj) -> dict[str, Any]:
    """A ClusterQueue as the simulation reads it: `spec.resourceGroups` always a list."""
    spec = dict(field(queue, "spec") or {})
    spec["resourceGroups"] = [
        {"coveredResources": [text(r) for r in (g.get("coveredResources") or [])],
         "flavors": [{"name": text(f.get("name")), "resources": items(f.get("resources"))} for f in items(g.get("flavors"))]}
        for g in items(spec.get("resourceGroups"))]
    return {"metadata": {"name": meta(queue, "name")}, "spec": spec}


def _shared_labels(nodes: list[Obj]) -> dict[str, str]:
    common = dict(labels(nodes[0]))
    for node in nodes[1:]:
        mine = labels(node)
        common = {k: v for k, v in common.items() if mine.get(k) == v}
    return {k: text(v) for k, v in sorted(common.items())}


def _smallest(nodes: list[Obj], resource: str) -> Decimal | None:
    values = [quantity(a.get(resource)) for n in nodes if isinstance(a := field(n, "status", "allocatable"), Mapping)
              and a.get(resource) is not None]
    return min(values) if values and len(values) == len(nodes) else None


def node_pools(nodes: Iterable[Obj]) -> tuple[NodePoolFacts, ...]:
    """The schedulable nodes grouped into pools, sorted by name."""
    pools: dict[str, list[Obj]] = {}
    for node in nodes:
        if field(node, "spec", "unschedulable") is True:
            continue
        pools.setdefault(text(labels(node).get(NODEPOOL_LABEL)) or meta(node, "name"), []).append(node)
    facts = []
    for name, members in sorted(pools.items()):
        taints = {(text(t.get("key")), text(t.get("value")), text(t.get("effect"))): t
                  for n in members for t in items(field(n, "spec", "taints"))}
        chips = _smallest(members, TPU_RESOURCE)
        memory = _smallest(members, "memory")
        facts.append(NodePoolFacts(
            name=name, labels=_shared_labels(members),
            taints=tuple({"key": k, "value": v, "effect": e} for k, v, e in sorted(taints)),
            nodes=len(members), tpu_chips=int(chips) if chips is not None else 0,
            cpu=_smallest(members, "cpu"), memory_mib=None if memory is None else memory / _MIB))
    return tuple(facts)


def as_manifest(obj: Obj) -> dict[str, Any]:
    """A live object as it was submitted, for the check: what the server adds to metadata, and status, left out
    (the spec keeps the webhooks' defaults, which the check accepts)."""
    kept = {k: field(obj, "metadata", k) for k in ("name", "namespace", "labels", "annotations")}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "metadata": {k: v for k, v in kept.items() if v is not None}, "spec": field(obj, "spec")}


def cluster_facts(flavors: Iterable[Obj], cluster_queues: Iterable[Obj], local_queues: Iterable[Obj],
                  nodes: Iterable[Obj], priority_classes: Iterable[Obj] | None = None,
                  claims: Iterable[Obj] | None = None) -> StackFacts:
    """What the scheduling check needs, from the objects the API server returned (WorkloadPriorityClasses or
    PersistentVolumeClaims None when they could not be read: the check then takes any priority, or any claim)."""
    namespaces_of: dict[str, set[str]] = {}
    for claim in claims or ():
        namespaces_of.setdefault(meta(claim, "name"), set()).add(meta(claim, "namespace"))
    return StackFacts(
        flavors={meta(f, "name"): {"metadata": {"name": meta(f, "name")}, "spec": dict(field(f, "spec") or {})}
                 for f in flavors},
        cluster_queues={meta(q, "name"): _with_resource_groups(q) for q in cluster_queues},
        local_queues={(meta(q, "namespace"), meta(q, "name")): text(field(q, "spec", "clusterQueue"))
                      for q in local_queues},
        pools=node_pools(nodes),
        priority_classes=None if priority_classes is None else frozenset(meta(c, "name") for c in priority_classes),
        claims=None if claims is None else {name: tuple(sorted(where)) for name, where in sorted(namespaces_of.items())},
    )
