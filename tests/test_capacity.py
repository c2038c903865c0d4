"""The capacity-mode table: one row per mode the config accepts, and the facts GKE requires of each."""

import pytest

from tpuplane.infra.fleet.pools import Capacity
from tpuplane.infra.fleet.capacity import CAPACITY_MODES, capacity_mode


def test_capacity_table_has_a_row_for_every_mode_the_config_accepts():
    assert set(CAPACITY_MODES) == {c.value for c in Capacity}


def test_capacity_table_orders_kueue_flavors_paid_first_queued_last():
    order = sorted(CAPACITY_MODES.values(), key=lambda m: m.kueue_order)
    assert [m.name for m in order] == ["reservation", "on-demand", "flex-start", "spot", "queued"]


@pytest.mark.parametrize("name", ["spot", "flex-start", "queued"])
def test_capacity_preemptible_and_provisioned_modes_refuse_reservations(name):
    assert capacity_mode(name).reservation_affinity == "NO_RESERVATION"


@pytest.mark.parametrize("name, suffix", [("on-demand", ""), ("spot", "-spot"), ("reservation", "-reservation")])
def test_capacity_flavor_suffix_names_the_mode_except_on_demand(name, suffix):
    assert capacity_mode(name).flavor_suffix == suffix


def test_capacity_only_queued_goes_through_a_provisioning_request():
    assert [m.name for m in CAPACITY_MODES.values() if m.provisioning_request] == ["queued"]
