"""Quota, usage, borrowing and lending per ClusterQueue, LocalQueue and cohort: `tpuplane queues`, and the numbers
`workload why` quotes for a workload waiting for quota.

Read from the queues' specs and their status as Kueue writes it (`flavorsReservation`: quota held by workloads
that reserved it, which is what admission counts). The arithmetic is Kueue's own for a ClusterQueue in a cohort
(`pkg/cache/scheduler/resource_node.go`), for cohorts named by `cohortName` as tpuplane builds them:
- `guaranteed` = nominalQuota - lendingLimit when a lendingLimit is set, else 0: quota no other queue may use;
- the rest of the nominal quota is in the cohort's pool, and usage past `guaranteed` is drawn from the pool;
- `available` (what a workload can be admitted with now) = max(0, guaranteed - used) + the pool's free part,
  which a borrowingLimit caps at (nominal - guaranteed) - (used - guaranteed) + borrowingLimit;
- a queue without a cohort has its nominal quota, no more.
Kueue records what a queue borrows but not from whom. `lent` divides the cohort's borrowed quota among the queues
whose pooled quota sits idle, in proportion to that idle quota (largest remainder, so the parts add up to what
was borrowed): exact whenever a single queue lends, an attribution otherwise. A Cohort object's own quota (the
Cohort API) and nested cohorts are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from tpuplane.infra.batch.api_objects import Obj, field, items, meta, quantity, text
from tpuplane.infra.batch.json_documents import JSON_API_VERSION, closed_object, document_schema
from tpuplane.infra.batch.kueue import largest_remainder

FlavorResource = tuple[str, str]  # (flavor, resource)
ZERO = Decimal(0)
_GIB = Decimal(2**30)


@dataclass(frozen=True)
class Quota:
    """One resource of one flavor of one ClusterQueue."""

    nominal: Decimal
    borrowing_limit: Decimal | None
    lending_limit: Decimal | None
    used: Decimal  # reserved by the queue's workloads, borrowed part included
    borrowed: Decimal  # the part of `used` beyond nominal

    @property
    def guaranteed(self) -> Decimal:
        return max(ZERO, self.nominal - self.lending_limit) if self.lending_limit is not None else ZERO

    @property
    def pooled(self) -> Decimal:
        """Nominal quota the queue puts in its cohort's pool."""
        return self.nominal - self.guaranteed

    @property
    def drawn(self) -> Decimal:
        """Usage drawn from the pool: past the guaranteed part."""
        return max(ZERO, self.used - self.guaranteed)

    @property
    def idle(self) -> Decimal:
        return max(ZERO, self.nominal - self.used)


@dataclass(frozen=True)
class ClusterQueueUsage:
    name: str
    cohort: str
    flavors: tuple[str, ...]  # in the queue's order
    quotas: Mapping[FlavorResource, Quota]
    admitted: int
    reserving: int
    pending: int


@dataclass(frozen=True)
class LocalQueueUsage:
    namespace: str
    name: str
    cluster_queue: str
    used: Mapping[FlavorResource, Decimal]
    admitted: int
    reserving: int
    pending: int


def _count(obj: Obj, key: str) -> int:
    value = field(obj, "status", key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _reservations(obj: Obj) -> dict[FlavorResource, tuple[Decimal, Decimal]]:
    """(total, borrowed) per flavor and resource, from `status.flavorsReservation`."""
    found = {}
    for flavor in items(field(obj, "status", "flavorsReservation")):
        for resource in items(flavor.get("resources")):
            found[(text(flavor.get("name")), text(resource.get("name")))] = (
                quantity(resource.get("total", 0)), quantity(resource.get("borrowed", 0)))
    return found


def _limit(entry: Obj, key: str) -> Decimal | None:
    return quantity(entry[key]) if entry.get(key) is not None else None


def cluster_queue_usage(queue: Obj) -> ClusterQueueUsage:
    used = _reservations(queue)
    quotas: dict[FlavorResource, Quota] = {}
    flavors: list[str] = []
    for group in items(field(queue, "spec", "resourceGroups")):
        for flavor in items(group.get("flavors")):
            name = text(flavor.get("name"))
            flavors.append(name)
            for entry in items(flavor.get("resources")):
                key = (name, text(entry.get("name")))
                total, borrowed = used.get(key, (ZERO, ZERO))
                nominal = quantity(entry.get("nominalQuota", 0))
                quotas[key] = Quota(nominal, _limit(entry, "borrowingLimit"), _limit(entry, "lendingLimit"),
                                    total, borrowed or max(ZERO, total - nominal))
    return ClusterQueueUsage(meta(queue, "name"), text(field(queue, "spec", "cohortName")),
                             tuple(dict.fromkeys(flavors)), quotas, _count(queue, "admittedWorkloads"),
                             _count(queue, "reservingWorkloads"), _count(queue, "pendingWorkloads"))


def local_queue_usage(queue: Obj) -> LocalQueueUsage:
    return LocalQueueUsage(meta(queue, "namespace"), meta(queue, "name"), text(field(queue, "spec", "clusterQueue")),
                           {k: total for k, (total, _) in _reservations(queue).items()},
                           _count(queue, "admittedWorkloads"), _count(queue, "reservingWorkloads"),
                           _count(queue, "pendingWorkloads"))


class QueueBook:
    """Every ClusterQueue and LocalQueue read from the cluster, with Kueue's quota arithmetic over them."""

    def __init__(self, cluster_queues: Iterable[Obj], local_queues: Iterable[Obj] = ()):
        self.cluster_queues = {q.name: q for q in sorted((cluster_queue_usage(o) for o in cluster_queues),
                                                         key=lambda q: q.name)}
        self.local_queues = sorted((local_queue_usage(o) for o in local_queues), key=lambda q: (q.namespace, q.name))

    def members(self, cohort: str) -> list[ClusterQueueUsage]:
        return [q for q in self.cluster_queues.values() if cohort and q.cohort == cohort]

    def cohorts(self) -> list[str]:
        return sorted({q.cohort for q in self.cluster_queues.values() if q.cohort})

    def pool_free(self, cohort: str, key: FlavorResource) -> Decimal:
        quotas = [q.quotas[key] for q in self.members(cohort) if key in q.quotas]
        return sum((q.pooled for q in quotas), ZERO) - sum((q.drawn for q in quotas), ZERO)

    def free_in_others(self, queue: str, key: FlavorResource) -> Decimal:
        """The part of the cohort's free pool that is not `queue`'s own idle quota: what the others could lend."""
        cq = self.cluster_queues[queue]
        quota = cq.quotas.get(key)
        own = max(ZERO, quota.pooled - quota.drawn) if quota is not None else ZERO
        return max(ZERO, self.pool_free(cq.cohort, key) - own) if cq.cohort else ZERO

    def available(self, queue: str, key: FlavorResource) -> Decimal:
        """What a workload of `queue` can be admitted with now, in `key` (Kueue's Available)."""
        cq = self.cluster_queues[queue]
        quota = cq.quotas.get(key)
        if quota is None:
            return ZERO
        if not cq.cohort:
            return max(ZERO, quota.nominal - quota.used)
        from_pool = self.pool_free(cq.cohort, key)
        if quota.borrowing_limit is not None:
            from_pool = min(from_pool, quota.pooled - quota.drawn + quota.borrowing_limit)
        return max(ZERO, max(ZERO, quota.guaranteed - quota.used) + from_pool)

    def from_cohort(self, queue: str, key: FlavorResource) -> Decimal:
        """Of `available`, what only the cohort can give (beyond the queue's own idle quota)."""
        quota = self.cluster_queues[queue].quotas.get(key)
        return ZERO if quota is None else max(ZERO, self.available(queue, key) - quota.idle)

    def most(self, queue: str, key: FlavorResource) -> Decimal:
        """The most the queue could ever hold with the whole cohort idle (Kueue's PotentialAvailable)."""
        cq = self.cluster_queues[queue]
        quota = cq.quotas.get(key)
        if quota is None:
            return ZERO
        if not cq.cohort:
            return quota.nominal
        pool = sum((q.quotas[key].pooled for q in self.members(cq.cohort) if key in q.quotas), ZERO)
        most = quota.guaranteed + pool
        return min(most, quota.nominal + quota.borrowing_limit) if quota.borrowing_limit is not None else most

    def lent(self, queue: str, key: FlavorResource) -> Decimal:
        """The queue's share of what its cohort borrows in `key` (see the module docstring)."""
        cq = self.cluster_queues[queue]
        if not cq.cohort or key not in cq.quotas:
            return ZERO
        members = [q for q in self.members(cq.cohort) if key in q.quotas]
        borrowed = sum((q.quotas[key].borrowed for q in members), ZERO)
        idle = {q.name: min(q.quotas[key].pooled, q.quotas[key].idle) for q in members}
        total = sum(idle.values(), ZERO)
        if not borrowed or not total or not idle[queue]:
            return ZERO
        lent = min(borrowed, total)
        if lent == lent.to_integral_value():
            names = sorted(idle)
            parts = largest_remainder(int(lent), [Fraction(idle[n]) / Fraction(total) for n in names], names)
            return Decimal(parts[names.index(queue)])
        return (lent * idle[queue] / total).quantize(Decimal("0.001"))


# ---------------------------------------------------------------------------------------------------------------
# Presentation: amounts, tables and JSON


def amount_text(resource: str, value: Decimal | None) -> str:
    """`64` chips, `0.5` cores, `16Gi` of memory; `-` for no value."""
    if value is None:
        return "-"
    if resource == "memory":
        gib = (value / _GIB).quantize(Decimal("0.01")).normalize()
        return f"{gib:f}Gi"
    return f"{value.normalize():f}"


def amount_json(value: Decimal | None) -> int | float | None:
    """A JSON number in the resource's base unit (chips, cores, bytes)."""
    if value is None:
        return None
    return int(value) if value == value.to_integral_value() else float(value)


CLUSTER_QUEUE_COLUMNS = ("CLUSTERQUEUE", "COHORT", "FLAVOR", "NOMINAL", "USED", "BORROWED", "LENT", "AVAILABLE",
                         "BORROW LIMIT", "LEND LIMIT", "ADMITTED", "PENDING")
LOCAL_QUEUE_COLUMNS = ("NAMESPACE", "LOCALQUEUE", "CLUSTERQUEUE", "FLAVOR", "USED", "ADMITTED", "PENDING")
COHORT_COLUMNS = ("COHORT", "FLAVOR", "NOMINAL", "USED", "BORROWED", "FREE", "CLUSTERQUEUES")


def _shown_flavors(cq: ClusterQueueUsage, resource: str) -> list[str]:
    """A queue's flavors that have `resource` quota or usage (the CPU flavor's zero TPU quota is noise)."""
    return [f for f in cq.flavors if (q := cq.quotas.get((f, resource))) is not None and (q.nominal or q.used)]


def cluster_queue_rows(book: QueueBook, resource: str, queues: Iterable[str] | None = None) -> list[tuple[str, ...]]:
    """A row per ClusterQueue and flavor holding `resource`; the workload counts on each queue's first row."""
    rows = []
    for cq in book.cluster_queues.values():
        if queues is not None and cq.name not in queues:
            continue
        flavors = _shown_flavors(cq, resource) or [""]
        for i, flavor in enumerate(flavors):
            key = (flavor, resource)
            q = cq.quotas.get(key)
            counts = (str(cq.admitted), str(cq.pending)) if i == 0 else ("", "")
            if q is None:
                rows.append((cq.name, cq.cohort or "-", "-", *("-",) * 7, *counts))
                continue
            rows.append((cq.name, cq.cohort or "-", flavor, amount_text(resource, q.nominal),
                         amount_text(resource, q.used), amount_text(resource, q.borrowed),
                         amount_text(resource, book.lent(cq.name, key)),
                         amount_text(resource, book.available(cq.name, key)),
                         amount_text(resource, q.borrowing_limit) if cq.cohort else "-",
                         amount_text(resource, q.lending_limit) if cq.cohort else "-", *counts))
    return rows


def local_queue_rows(book: QueueBook, resource: str, queues: Iterable[str] | None = None) -> list[tuple[str, ...]]:
    rows = []
    for lq in book.local_queues:
        if queues is not None and lq.cluster_queue not in queues:
            continue
        flavors = [f for (f, r), v in lq.used.items() if r == resource and v] or ["-"]
        for i, flavor in enumerate(sorted(flavors)):
            counts = (str(lq.admitted), str(lq.pending)) if i == 0 else ("", "")
            rows.append((lq.namespace, lq.name, lq.cluster_queue or "-", flavor,
                         amount_text(resource, lq.used.get((flavor, resource), ZERO)), *counts))
    return rows


def _cohort_totals(book: QueueBook, cohort: str, key: FlavorResource) -> tuple[Decimal, Decimal, Decimal]:
    quotas = [q.quotas[key] for q in book.members(cohort) if key in q.quotas]
    return (sum((q.nominal for q in quotas), ZERO), sum((q.used for q in quotas), ZERO),
            sum((q.borrowed for q in quotas), ZERO))


def _cohort_flavors(book: QueueBook, cohort: str, resource: str) -> list[str]:
    return list(dict.fromkeys(f for q in book.members(cohort) for f in _shown_flavors(q, resource)))


def cohort_rows(book: QueueBook, resource: str, cohorts: Iterable[str] | None = None) -> list[tuple[str, ...]]:
    rows = []
    for cohort in book.cohorts():
        if cohorts is not None and cohort not in cohorts:
            continue
        members = ", ".join(q.name for q in book.members(cohort))
        for flavor in _cohort_flavors(book, cohort, resource):
            nominal, used, borrowed = _cohort_totals(book, cohort, (flavor, resource))
            rows.append((cohort, flavor, amount_text(resource, nominal), amount_text(resource, used),
                         amount_text(resource, borrowed),
                         amount_text(resource, max(ZERO, book.pool_free(cohort, (flavor, resource)))), members))
    return rows


_AMOUNT = {"type": "number", "description": "in the resource's base unit: chips, cores, bytes"}
_LIMIT = {"type": ["number", "null"], "description": "null: no limit"}
_WORKLOADS = {"admittedWorkloads": {"type": "integer", "minimum": 0},
              "reservingWorkloads": {"type": "integer", "minimum": 0, "description": "holding quota"},
              "pendingWorkloads": {"type": "integer", "minimum": 0}}
QUEUES_SCHEMA = document_schema("queues", "QueueUsage", {
    "clusterQueues": {"type": "array", "items": closed_object({
        "name": {"type": "string"}, "cohort": {"type": ["string", "null"]}, **_WORKLOADS,
        "flavors": {"type": "array", "items": closed_object({
            "name": {"type": "string"},
            "resources": {"type": "array", "items": closed_object({
                "name": {"type": "string", "description": "google.com/tpu, cpu, memory, ..."},
                "nominal": _AMOUNT, "borrowingLimit": _LIMIT, "lendingLimit": _LIMIT, "used": _AMOUNT,
                "borrowed": _AMOUNT, "lent": {**_AMOUNT, "description": "its share of what the cohort borrows"},
                "available": {**_AMOUNT, "description": "what it could use now: its own free quota and what "
                                                        "the cohort can lend"}})}})}})},
    "localQueues": {"type": "array", "items": closed_object({
        "namespace": {"type": "string"}, "name": {"type": "string"}, "clusterQueue": {"type": ["string", "null"]},
        **_WORKLOADS,
        "used": {"type": "array", "items": closed_object({"flavor": {"type": "string"}, "resource": {"type": "string"},
                                                          "amount": _AMOUNT})}})},
    "cohorts": {"type": "array", "items": closed_object({
        "name": {"type": "string"}, "clusterQueues": {"type": "array", "items": {"type": "string"}},
        "resources": {"type": "array", "items": closed_object({
            "flavor": {"type": "string"}, "resource": {"type": "string"}, "nominal": _AMOUNT, "used": _AMOUNT,
            "borrowed": _AMOUNT, "free": _AMOUNT})}})},
})


def queues_json(book: QueueBook, queues: Iterable[str] | None = None) -> dict[str, Any]:
    """Every resource of every flavor, numbers in base units. `queues` limits it to those ClusterQueues (and the
    LocalQueues and cohorts around them)."""
    chosen = None if queues is None else set(queues)
    cluster_queues = [q for q in book.cluster_queues.values() if chosen is None or q.name in chosen]

    def resources(cq: ClusterQueueUsage, flavor: str) -> list[dict[str, Any]]:
        return [{"name": r, "nominal": amount_json(q.nominal), "borrowingLimit": amount_json(q.borrowing_limit),
                 "lendingLimit": amount_json(q.lending_limit), "used": amount_json(q.used),
                 "borrowed": amount_json(q.borrowed), "lent": amount_json(book.lent(cq.name, (f, r))),
                 "available": amount_json(book.available(cq.name, (f, r)))}
                for (f, r), q in cq.quotas.items() if f == flavor]

    cohorts = sorted({q.cohort for q in cluster_queues if q.cohort})
    return {
        "apiVersion": JSON_API_VERSION, "kind": "QueueUsage",
        "clusterQueues": [{"name": q.name, "cohort": q.cohort or None, "admittedWorkloads": q.admitted,
                           "reservingWorkloads": q.reserving, "pendingWorkloads": q.pending,
                           "flavors": [{"name": f, "resources": resources(q, f)} for f in q.flavors]}
                          for q in cluster_queues],
        "localQueues": [{"namespace": lq.namespace, "name": lq.name, "clusterQueue": lq.cluster_queue or None,
                         "admittedWorkloads": lq.admitted, "reservingWorkloads": lq.reserving,
                         "pendingWorkloads": lq.pending,
                         "used": [{"flavor": f, "resource": r, "amount": amount_json(v)}
                                  for (f, r), v in sorted(lq.used.items())]}
                        for lq in book.local_queues if chosen is None or lq.cluster_queue in chosen],
        "cohorts": [{"name": c, "clusterQueues": [q.name for q in book.members(c)],
                     "resources": [{"flavor": f, "resource": r, "nominal": amount_json(n), "used": amount_json(u),
                                    "borrowed": amount_json(b),
                                    "free": amount_json(max(ZERO, book.pool_free(c, (f, r))))}
                                   for f, r in sorted({k for q in book.members(c) for k in q.quotas})
                                   for n, u, b in [_cohort_totals(book, c, (f, r))]]}
                    for c in cohorts],
    }
