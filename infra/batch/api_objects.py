"""Reading Kubernetes objects as the API server returns them (JSON form, camelCase), defensively.

Every field of a live object may be absent or of the wrong type (an old controller, a hand-made object), so these
readers never raise: a missing condition is None, an unreadable time is None, an unreadable quantity is zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

from tpuplane.infra.quantity import parse_quantity

Obj = Mapping[str, Any]


def field(obj: Any, *path: str) -> Any:
    """`obj[path[0]][path[1]]...`, or None as soon as a step is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def items(value: Any) -> list[Obj]:
    """The mappings of a list field (anything else in it, or a non-list, is ignored)."""
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def text(value: Any) -> str:
    return "" if value is None else str(value)


def meta(obj: Obj, key: str) -> str:
    return text(field(obj, "metadata", key))


def labels(obj: Obj) -> Mapping[str, str]:
    value = field(obj, "metadata", "labels")
    return value if isinstance(value, Mapping) else {}


def condition(obj: Obj | None, kind: str) -> Obj | None:
    """The status condition of type `kind`, if the object has one."""
    return next((c for c in items(field(obj, "status", "conditions")) if c.get("type") == kind), None)


def is_true(obj: Obj | None, kind: str) -> bool:
    return text(field(condition(obj, kind), "status")) == "True"


def timestamp(value: Any) -> float | None:
    """Unix seconds of an API time (`2027-01-15T08:00:00Z`), or None."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def quantity(value: Any) -> Decimal:
    """A Kubernetes quantity (`64`, `500m`, `16Gi`) in base units (cores, bytes, chips); 0 when unreadable."""
    try:
        return parse_quantity(value)
    except ValueError:
        return Decimal(0)


def owned_by(obj: Obj, owner: Obj) -> bool:
    """Does `obj` name `owner` (by uid, else by kind and name) among its ownerReferences?"""
    uid, kind, name = meta(owner, "uid"), text(owner.get("kind")), meta(owner, "name")
    for ref in items(field(obj, "metadata", "ownerReferences")):
        if uid and ref.get("uid") == uid:
            return True
        if not uid and ref.get("kind") == kind and ref.get("name") == name:
            return True
    return False


def by_uid(objects: Iterable[Obj]) -> dict[str, Obj]:
    return {meta(o, "uid"): o for o in objects if meta(o, "uid")}
