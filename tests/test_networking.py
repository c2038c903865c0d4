"""GKE's automated accelerator networking: on by default for v6e (as xpk sets it), offered for every pool."""

import copy

import pytest

from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.cluster import needs_multi_networking
from tpuplane.infra.fleet.networking import NETWORKING_DRA_LABEL
from tpuplane.infra.fleet.nodepools import plan_tpu_pools


def stack(raw_config, **pool_changes):
    raw = copy.deepcopy(raw_config)
    raw["tpuplane:tpuPools"] = [{"name": "p", "tpuType": "v6e-16", **pool_changes}]
    raw.pop("tpuplane:reservations", None)
    return load_stack_config(raw)


def test_plan_pool_group_v6e_gets_the_auto_accelerator_network_and_the_dranet_label(raw_config):
    [group] = plan_tpu_pools(stack(raw_config).tpu_pools)

    assert group.pools[0].accelerator_network_profile == "auto"
    assert group.pools[0].labels[NETWORKING_DRA_LABEL] == "true"


@pytest.mark.parametrize("tpu_type", ["v5p-128", "tpu7x-8", "v5litepod-16"])
def test_plan_pool_group_other_generations_are_off_by_default(raw_config, tpu_type):
    [group] = plan_tpu_pools(stack(raw_config, tpuType=tpu_type).tpu_pools)

    assert group.pools[0].accelerator_network_profile is None
    assert NETWORKING_DRA_LABEL not in group.pools[0].labels


def test_plan_pool_group_accelerator_network_can_be_turned_on_for_tpu7x(raw_config):
    [group] = plan_tpu_pools(stack(raw_config, tpuType="tpu7x-8", acceleratorNetwork=True).tpu_pools)

    assert group.pools[0].accelerator_network_profile == "auto"


def test_needs_multi_networking_only_when_a_pool_uses_accelerator_networking(raw_config):
    assert needs_multi_networking(stack(raw_config).tpu_pools) is True
    assert needs_multi_networking(stack(raw_config, acceleratorNetwork=False).tpu_pools) is False


def test_stack_config_accelerator_network_takes_a_boolean_only(raw_config):
    with pytest.raises(ConfigError, match="acceleratorNetwork"):
        stack(raw_config, acceleratorNetwork="yes")
