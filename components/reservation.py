"""`TpuReservation`: a Compute Engine specific reservation sized in whole slices of one TPU type."""

from typing import NotRequired, Optional, TypedDict

import pulumi
import pulumi_gcp as gcp

from tpuplane.components.options import child_options
from tpuplane.infra.args import Source
from tpuplane.infra.fleet.cluster import reservation_deletion_policy
from tpuplane.infra.fleet.reservations import RESERVATION_ARGS, ReservationSpec, read_reservation


class TpuReservationArgs(TypedDict):
    """Whole slices of one TPU type, reserved in one zone for the pools that name the reservation."""

    project: str
    """The project of the reservation."""
    zone: str
    """The zone of the reserved VMs: the TPU pools' zone."""
    tpu_type: str
    """A TPU type `tpuplane catalog` knows, e.g. `v5p-128`."""
    slices: NotRequired[int]
    """How many whole slices (default 1)."""
    name: NotRequired[str]
    """The reservation's name; default: the component's name."""
    machine_type: NotRequired[str]
    """Only for the single-host 8-chip machines of 2x4 shapes."""
    maintenance_interval: NotRequired[str]
    """AS_NEEDED (default) or PERIODIC; the pools that consume it must match."""
    keep_on_delete: NotRequired[bool]
    """Keep the reservation when the program stops declaring it (production: capacity given back is rarely
    given again). Default false."""


class TpuReservation(pulumi.ComponentResource):
    """A specific reservation only pools that name it consume. Child: `reservation` (gcp.compute.Reservation);
    give its `reservation_name` as `TpuSlicePoolArgs.reservation`, and the pools wait for it."""

    reservation_name: pulumi.Output[str]
    """The reservation's name, for `TpuSlicePoolArgs.reservation`."""
    vm_count: pulumi.Output[int]
    """The VMs it holds: whole slices of its TPU type."""

    def __init__(self, name: str, args: TpuReservationArgs, opts: Optional[pulumi.ResourceOptions] = None):
        # every check before the component registers anything (Args a stack config already read pass as they are)
        res = read_reservation(args, Source.args(RESERVATION_ARGS, ReservationSpec), supplied={"name": name})
        super().__init__("tpuplane:index:TpuReservation", name, {}, opts)
        self.reservation = gcp.compute.Reservation(
            res.name,
            name=res.name,
            project=res.project,
            zone=res.zone,
            deletion_policy=reservation_deletion_policy(res.keep_on_delete),
            # Only pools that name it consume it: a training reservation must not leak to stray VMs.
            specific_reservation_required=True,
            specific_reservation=gcp.compute.ReservationSpecificReservationArgs(
                count=res.vms,
                instance_properties=gcp.compute.ReservationSpecificReservationInstancePropertiesArgs(
                    machine_type=res.spec.machine_type,
                    # Only PERIODIC is sent; absent means GKE's AS_NEEDED. Pools must match it.
                    maintenance_interval="PERIODIC" if res.maintenance_interval == "PERIODIC" else None)),
            opts=child_options(self, opts))
        self.reservation_name = self.reservation.name
        self.vm_count = pulumi.Output.from_input(res.vms)
        self.register_outputs({"reservation_name": self.reservation_name, "vm_count": self.vm_count})
