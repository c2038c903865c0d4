"""`TpuReservation`: a Compute Engine specific reservation sized in whole slices of one TPU type."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from tpuplane.infra.fleet.cluster import reservation_deletion_policy, reservation_vm_count
from tpuplane.infra.config import ReservationConfig, StackConfig


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
