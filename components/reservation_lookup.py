"""Look up the reservations a stack's pools consume but do not create, before any resource is registered.

Compute Engine answers through the provider's `getReservation` invoke; `tpuplane.infra.fleet.reservations` judges
the answer (pure, tested without Pulumi). Specific, aggregate (All Capacity), shared and block reservations all
come back through the same invoke, in the shape turned into `ReservationFacts` here.
"""

from __future__ import annotations

from typing import Any

import pulumi_gcp as gcp

from tpuplane.infra.args import Source
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.pools import SlicePoolSpec
from tpuplane.infra.fleet.reservations import ReservationFacts, external_reservations, lookup_problems
from tpuplane.infra.stack import POOLS, StackConfig


def reservation_facts(found: Any, zone: str) -> ReservationFacts:
    """The invoke's answer (a `GetReservationResult`) as the facts the judge reads."""
    specific = (found.specific_reservations or [None])[0]
    properties = (specific.instance_properties or [None])[0] if specific else None
    share = (found.share_settings or [None])[0]
    shared_with: list[str] = []
    if share is not None:
        shared_with += list(share.projects or [])
        shared_with += [m.project_id for m in share.project_maps or [] if m.project_id]
    return ReservationFacts(
        status=found.status, zone=found.zone or zone, specific=specific is not None,
        machine_type=(properties.machine_type or "") if properties else "",
        count=int(specific.count or 0) if specific else 0,
        in_use=int(specific.in_use_count or 0) if specific else 0,
        share_type=(share.share_type or "LOCAL") if share else "LOCAL",
        shared_with=tuple(sorted(set(shared_with))),
        blocks=tuple(found.block_names or ()))


def external_reservation_problems(cfg: StackConfig) -> list[Problem]:
    """Look up every reservation the pools consume that this stack does not create, and judge each.

    Compute Engine reports a missing reservation as an invoke error. Under the offline plan's mocks the answer
    is empty and the reservation is not judged: there is no cloud to ask.
    """
    problems = []
    for lookup in external_reservations(cfg.tpu_pools, {res.name for res in cfg.reservations}):
        try:
            found = gcp.compute.get_reservation(name=lookup.name, project=lookup.project, zone=lookup.zone)
        except Exception as exc:  # noqa: BLE001 - the provider's error type is not part of its API
            if "404" not in str(exc) and "not found" not in str(exc).lower():
                raise
            facts = None
        else:
            if not found.status:
                continue  # no answer: offline
            facts = reservation_facts(found, lookup.zone)
        problems += lookup_problems(lookup, cfg.tpu_pools[lookup.pool_index], facts,
                                    Source.config(f"{POOLS}[{lookup.pool_index}]", SlicePoolSpec))
    return problems
