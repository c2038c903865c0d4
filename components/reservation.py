"""`TpuReservation`: a Compute Engine specific reservation sized in whole slices of one TPU type."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from tpuplane.infra.fleet.cluster import reservation_deletion_policy, reservation_vm_count
from tpuplane.infra.config import ReservationConfig, StackConfig
from tpuplane.infra.errors import Problem
from tpuplane.infra.fleet.reservations import ReservationFacts, external_reservations, reservation_problems


class TpuReservation(pulumi.ComponentResource):
    reservation: gcp.compute.Reservation

    def __init__(self, name: str, res: ReservationConfig, cfg: StackConfig,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuplane:index:TpuReservation", name, {}, opts)
        self.reservation = gcp.compute.Reservation(
            res.name,
            name=res.name,
            project=cfg.project,
            zone=res.zone or cfg.cluster.zone,
            deletion_policy=reservation_deletion_policy(cfg),
            # Only pools that name it consume it: a training reservation must not leak to stray VMs.
            specific_reservation_required=True,
            specific_reservation=gcp.compute.ReservationSpecificReservationArgs(
                count=reservation_vm_count(res),
                instance_properties=gcp.compute.ReservationSpecificReservationInstancePropertiesArgs(
                    machine_type=res.spec.machine_type,
                    # Only PERIODIC is sent; absent means GKE's AS_NEEDED. Pools must match it.
                    maintenance_interval="PERIODIC" if res.maintenance_interval == "PERIODIC" else None)),
            opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"name": self.reservation.name})



def external_reservation_problems(cfg: StackConfig) -> list[Problem]:
    """Look up every reservation the pools consume that this stack does not create, and judge each.

    Compute Engine reports a missing reservation as an invoke error. Under the offline plan's mocks the answer
    is empty and the reservation is not judged: there is no cloud to ask.
    """
    problems = []
    for lookup in external_reservations(cfg):
        try:
            found = gcp.compute.get_reservation(name=lookup.name, project=lookup.project, zone=lookup.zone)
        except Exception as exc:  # noqa: BLE001 - the provider's error type is not part of its API
            if "404" not in str(exc) and "not found" not in str(exc).lower():
                raise
            facts = None
        else:
            if not found.status:
                continue  # no answer: offline
            specific = (found.specific_reservations or [None])[0]
            properties = (specific.instance_properties or [None])[0] if specific else None
            facts = ReservationFacts(status=found.status, zone=found.zone or lookup.zone,
                                     machine_type=properties.machine_type if properties else "",
                                     count=int(specific.count or 0) if specific else 0,
                                     in_use=int(specific.in_use_count or 0) if specific else 0)
        problems += reservation_problems(lookup, cfg.tpu_pools[lookup.pool_index], facts)
    return problems
