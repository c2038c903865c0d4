"""The stack program checks the whole config before its first resource: a bad config registers nothing, and the
error names the user's config path. Pulumi's mocks stand in for GCP and Kubernetes (which cannot exist here); the
registrations are counted at the mock monitor."""

from __future__ import annotations

import copy

import pulumi
import pytest
from conftest import STACKS, stack_file_config

from tpuplane.components import offline
from tpuplane.infra.errors import ConfigError


def plan_error(config: dict) -> ConfigError:
    with pytest.raises(pulumi.RunError) as raised:
        offline.run_program_file(STACKS / "__main__.py", config, project="tpuplane", stack="test")
    assert isinstance(raised.value.__cause__, ConfigError)
    return raised.value.__cause__


def pathways_config(**changes) -> dict:
    config = copy.deepcopy(stack_file_config("pathways"))
    for key, value in changes.items():
        section, field = key.split(".")
        config[f"tpuplane:{section}"][field] = value
    return config


def test_stack_program_team_name_too_long_for_the_proxy_janitor_registers_nothing(registrations):
    config = pathways_config()
    config["tpuplane:kueue"]["teams"][0]["name"] = long_name = "research" + "x" * 50
    storage = config["tpuplane:storage"]  # the team's storage and roles follow its new name
    for volume in storage["volumes"]:
        volume["teams"] = [long_name if team == "research" else team for team in volume["teams"]]
    storage["roles"] = {long_name: storage["roles"].pop("research")}

    error = plan_error(config)

    assert [p.path for p in error.problems] == ["tpuplane:kueue.teams[0].name"]
    assert registrations == []


def test_stack_program_sidecar_requirement_conflict_registers_nothing(registrations):
    error = plan_error(pathways_config(**{"pathways.jaxVersion": "0.6.2"}))

    assert {p.path for p in error.problems} == {"tpuplane:pathways.jaxVersion"}
    assert registrations == []


def test_stack_program_bad_pool_registers_nothing(registrations):
    config = copy.deepcopy(stack_file_config("dev"))
    config["tpuplane:tpuPools"][0]["slices"] = 0

    error = plan_error(config)

    assert error.problems[0].path == "tpuplane:tpuPools[0].slices"
    assert registrations == []


def test_stack_program_good_config_registers_its_resources(registrations):
    offline.run_program_file(STACKS / "__main__.py", stack_file_config("dev"), project="tpuplane", stack="test")

    assert any(r.startswith("gcp:container/nodePool:NodePool::") for r in registrations)
