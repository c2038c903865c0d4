"""`tpuplane:kueue` rules: every bad team layout or version is a ConfigError naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError

BASE: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
    "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "slices": 4}],
}


def problems_for(kueue: dict[str, Any], **cluster: Any) -> list:
    raw = copy.deepcopy(BASE) | {"tpuplane:kueue": kueue}
    raw["tpuplane:cluster"].update(cluster)
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    return exc.value.problems


def test_kueue_config_defaults_pin_versions():
    cfg = load_stack_config(BASE)
    assert (cfg.batch.kueue_version, cfg.batch.jobset_version, cfg.batch.teams) == ("0.19.2", "0.12.0", [])


def test_kueue_config_accepts_teams_in_camel_case():
    cfg = load_stack_config(BASE | {"tpuplane:kueue": {"teams": [
        {"name": "a", "share": 0.5, "borrowingLimit": 0.1, "lendingLimit": 1}]}})
    assert cfg.batch.teams[0].borrowing_limit == 0.1
    assert cfg.batch.teams[0].team_namespace == "a"


def test_kueue_config_team_shares_exceeding_capacity_name_the_overflowing_team():
    [problem] = problems_for({"teams": [{"name": "a", "share": 0.6}, {"name": "b", "share": 0.5}]})
    assert problem.path == "tpuplane:kueue.teams[1].share"
    assert "at most 0.4" in problem.allowed


def test_kueue_config_share_out_of_range_is_a_field_error():
    [problem] = problems_for({"teams": [{"name": "a", "share": 0}]})
    assert problem.path == "tpuplane:kueue.teams[0].share"


def test_kueue_config_two_teams_in_one_namespace():
    [problem] = problems_for({"teams": [{"name": "a", "share": 0.1}, {"name": "b", "namespace": "a", "share": 0.1}]})
    assert problem.path == "tpuplane:kueue.teams[1].namespace"
    assert "team 'a'" in problem.hint


@pytest.mark.parametrize("namespace", ["kube-system", "kueue-system", "jobset-system", "kube-anything"])
def test_kueue_config_system_namespace_is_refused(namespace):
    [problem] = problems_for({"teams": [{"name": "a", "namespace": namespace, "share": 0.1}]})
    assert problem.path == "tpuplane:kueue.teams[0].namespace"
    assert "system namespace" in problem.allowed


def test_kueue_config_team_named_like_a_system_namespace_is_refused():
    [problem] = problems_for({"teams": [{"name": "kueue-system", "share": 0.1}]})
    assert problem.path == "tpuplane:kueue.teams[0].name"


def test_kueue_config_unknown_priority_lists_the_priorities():
    [problem] = problems_for({"teams": [{"name": "a", "share": 0.1, "priority": "urgent"}]})
    assert problem.path == "tpuplane:kueue.teams[0].priority"
    assert "very-low (100), low (250), medium (500), high (750), very-high (1000)" in problem.allowed


def test_kueue_config_duplicate_team_names():
    problems = problems_for({"teams": [{"name": "a", "share": 0.1}, {"name": "a", "namespace": "a2", "share": 0.1}]})
    assert [p.path for p in problems] == ["tpuplane:kueue.teams[1].name"]


@pytest.mark.parametrize("name", ["Research", "ml_team", "-a", "x" * 64])
def test_kueue_config_dns_invalid_team_name(name):
    problems = problems_for({"teams": [{"name": name, "namespace": "ok", "share": 0.1}]})
    assert problems[0].path == "tpuplane:kueue.teams[0].name"


def test_kueue_config_reserved_queue_name():
    [problem] = problems_for({"teams": [{"name": "unassigned", "share": 0.1}]})
    assert problem.path == "tpuplane:kueue.teams[0].name"


@pytest.mark.parametrize("key, value, allowed", [("version", "v0.19.2", "without a leading 'v'"),
                                                 ("version", "0.14.0", "at least 0.15.0"),
                                                 ("jobsetVersion", "latest", "a version such as")])
def test_kueue_config_bad_versions(key, value, allowed):
    [problem] = problems_for({key: value})
    assert problem.path == f"tpuplane:kueue.{key}"
    assert allowed in problem.allowed


def test_kueue_config_cpu_pool_without_known_shape():
    [problem] = problems_for({}, cpuPool={"machineType": "e2-medium"})
    assert problem.path == "tpuplane:cluster.cpuPool.machineType"


def test_kueue_config_unknown_key_is_an_error():
    [problem] = problems_for({"teamz": []})
    assert problem.path == "tpuplane:kueue.teamz"
