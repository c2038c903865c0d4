"""Strict config values: numbers are numbers (finite, bounded per field), booleans are booleans, text is ASCII
where GCP and Kubernetes want it, CIDRs are canonical, and the node limit counts every pool."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from tpuplane.infra.batch.experiments import ExperimentSpec, experiment_problems, load_experiment
from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError


def problem_paths(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load_stack_config(config)
    return [p.path for p in caught.value.problems]


def with_team(raw_config: dict[str, Any], **team: Any) -> dict[str, Any]:
    raw_config["tpuplane:kueue"] = {"teams": [{"name": "research", "share": 1.0, **team}]}
    return raw_config


@pytest.mark.parametrize("share", [True, "0.5", "1", math.nan, math.inf])
def test_team_share_takes_only_a_finite_number(raw_config, share):
    assert problem_paths(with_team(raw_config, share=share)) == ["tpuplane:kueue.teams[0].share"]


@pytest.mark.parametrize("limit", [math.inf, -math.inf, math.nan, True])
def test_team_borrowing_limit_is_finite(raw_config, limit):
    assert problem_paths(with_team(raw_config, borrowingLimit=limit)) == ["tpuplane:kueue.teams[0].borrowingLimit"]


@pytest.mark.parametrize("value", [True, "5", 5.5, 10 ** 30, 10 ** 5000], ids=["bool", "str", "float", "1e30", "5000-digits"])
def test_cpu_pool_max_nodes_takes_a_bounded_integer(raw_config, value):
    raw_config["tpuplane:cluster"]["cpuPool"] = {"maxNodes": value}
    assert problem_paths(raw_config) == ["tpuplane:cluster.cpuPool.maxNodes"]


@pytest.mark.parametrize("section", ["tpuplane:tpuPools", "tpuplane:reservations"])
def test_slices_are_bounded_by_what_a_cluster_can_hold(raw_config, section):
    raw_config[section][0]["slices"] = 10 ** 30
    assert f"{section}[0].slices" in problem_paths(raw_config)


def test_boolean_field_refuses_strings_and_numbers(raw_config):
    raw_config["tpuplane:cluster"]["deletionProtection"] = "yes"
    assert problem_paths(raw_config) == ["tpuplane:cluster.deletionProtection"]


@pytest.mark.parametrize("region", ["us-east٥", "us-east５", "us-\u0435ast5"])
def test_region_is_ascii(raw_config, region):
    raw_config["gcp:region"] = region
    assert "gcp:region" in problem_paths(raw_config)


@pytest.mark.parametrize("duration", ["٣600s", "36\u00a000s", "1" * 5000 + "s"], ids=["arabic", "nbsp", "long"])
def test_max_run_duration_is_ascii_digits_of_bounded_length(raw_config, duration):
    raw_config["tpuplane:tpuPools"][0].update(capacity="flex-start", maxRunDuration=duration)
    assert problem_paths(raw_config) == ["tpuplane:tpuPools[0].maxRunDuration"]


@pytest.mark.parametrize("cidr", ["0.0.0.0/00", "999.999.999.999/99", "10.0.0.1/8", "01.2.3.0/24", "::/0",
                                  "10.0.0.0/8 ", "１0.0.0.0/8"])
def test_authorized_network_cidr_is_canonical_ipv4(raw_config, cidr):
    raw_config["tpuplane:cluster"]["masterAuthorizedNetworks"] = [{"cidr": cidr}]
    assert problem_paths(raw_config) == ["tpuplane:cluster.masterAuthorizedNetworks[0].cidr"]


def test_node_limit_counts_the_cpu_pool(raw_config):
    raw_config["tpuplane:tpuPools"] = [{"name": "train", "tpuType": "v6e-16", "slices": 3748, "capacity": "spot"}]
    raw_config["tpuplane:reservations"] = []
    raw_config["tpuplane:cluster"]["cpuPool"] = {"maxNodes": 8}  # 14,992 TPU VMs + 8 CPU nodes: exactly 15,000
    load_stack_config(raw_config)
    raw_config["tpuplane:cluster"]["cpuPool"] = {"maxNodes": 9}
    assert problem_paths(raw_config) == ["tpuplane:tpuPools"]


def test_experiment_grid_is_counted_before_it_is_expanded():
    exp = ExperimentSpec.model_validate({
        "name": "sweep", "grid": {k: list(range(10)) for k in "abcdefghijklmnopqrst"},  # 10^20 trials
        "jobs": [{"tpuType": "v6e-16", "image": "img:1", "command": "python train.py"}]})
    (problem,) = experiment_problems(exp)
    assert problem.given == f"{10 ** 20} trials"


def test_experiment_file_with_duplicate_grid_key_names_both_lines(tmp_path: Path):
    path = tmp_path / "exp.yaml"
    path.write_text("name: sweep\ngrid:\n  lr: [0.1]\n  lr: [0.2]\njobs: []\n")
    with pytest.raises(ConfigError, match="line 3"):
        load_experiment(path)


@pytest.mark.parametrize("key, value", [
    ("requirements", "/etc/passwd"), ("requirements", "../.env"), ("requirements", "sidecar/../../.env"),
    ("context", ".."), ("constraints", "~/constraints.txt"), ("requirements", "C:/x.txt"),
    ("requirements", "sidecar\\requirements.txt"),
])
def test_sidecar_paths_stay_inside_the_project(raw_config, key, value):
    raw_config["tpuplane:pathways"] = {"name": "pw", "tpuPool": "big", "jaxVersion": "0.9.0",
                                       "sidecar": {"jaxVersion": "0.9.0", key: value}}
    assert f"tpuplane:pathways.sidecar.{key}" in problem_paths(raw_config)
