"""Specification of the stack config: what `load_stack_config` accepts, and every `ConfigError` it raises.

Each rejected config breaks ONE field of the issue's minimal config (fixture `raw_config`) and names the
problem exactly: the config path the user typed, the value given, and what is allowed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from conftest import config_problems

from tpuplane.infra.fleet.pools import Capacity
from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError

DELETE = object()  # an edit that removes the key


def edit(config: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """Apply `{'tpuplane:tpuPools[1].slices': 0, ...}` to `config` in place; `[len]` appends, DELETE removes."""
    for path, value in changes.items():
        steps = [int(i) if i else key for key, i in re.findall(r"([^.\[\]]+)|\[(\d+)\]", path)]
        target = config
        for step in steps[:-1]:
            target = target[step]
        last = steps[-1]
        if value is DELETE:
            del target[last]
        elif isinstance(target, list) and last == len(target):
            target.append(value)
        else:
            target[last] = value
    return config


# --- accepted configs --------------------------------------------------------------------------------------


def test_load_stack_config_accepts_the_minimal_config_as_is(raw_config):
    cfg = load_stack_config(raw_config)

    assert (cfg.project, cfg.region) == ("acme-ml", "us-east5")
    assert (cfg.cluster.name, cfg.cluster.zone) == ("fleet", "us-east5-b")
    assert [(p.name, p.spec.name, p.slices, p.capacity) for p in cfg.tpu_pools] == [
        ("train", "v6e-16", 4, Capacity.SPOT),
        ("big", "v5p-128", 2, Capacity.RESERVATION),
    ]
    assert cfg.pool_by_name("big").reservation == "v5p-res"
    assert cfg.stack_reservation(cfg.tpu_pools[1]).spec.machine_type == "ct5p-hightpu-4t"


def test_load_stack_config_defaults_are_safe_for_production(raw_config):
    cluster = load_stack_config(raw_config).cluster

    assert cluster.deletion_protection is True
    assert cluster.release_channel == "REGULAR"
    assert cluster.maintenance_exclusion is None


def test_load_stack_config_names_one_node_pool_per_slice(raw_config):
    cfg = load_stack_config(raw_config)

    assert cfg.pool_by_name("train").node_pool_names == ["train-0", "train-1", "train-2", "train-3"]


@pytest.mark.parametrize("path", [
    "projects/shared-tpu/reservations/r1",
    "projects/acme-ml/reservations/r1/reservationBlocks/b1",
    "projects/acme-ml/reservations/r1/reservationBlocks/b1/reservationSubBlocks/sb1",
])
def test_load_stack_config_accepts_full_external_reservation_paths(raw_config, path):
    cfg = load_stack_config(edit(raw_config, {"tpuplane:tpuPools[1].reservation": path}))

    assert cfg.tpu_pools[1].reservation == path


def test_load_stack_config_accepts_max_run_duration_on_queued_pools(raw_config):
    cfg = load_stack_config(edit(raw_config, {"tpuplane:tpuPools[0].capacity": "queued",
                                              "tpuplane:tpuPools[0].maxRunDuration": "3600s"}))

    assert cfg.tpu_pools[0].max_run_duration == "3600s"


def test_load_stack_config_leaves_other_namespaces_to_their_providers(raw_config):
    raw_config.update({"gcp:zone": "us-east5-b", "kubernetes:enableServerSideApply": "true"})

    assert load_stack_config(raw_config).cluster.zone == "us-east5-b"


@pytest.mark.parametrize(("name", "slices"), [("a" * 38, 10), ("a" * 37, 11)])
def test_load_stack_config_accepts_pool_names_that_fit_exactly_with_their_suffix(raw_config, name, slices):
    cfg = load_stack_config(edit(raw_config, {"tpuplane:tpuPools[0].name": name,
                                              "tpuplane:tpuPools[0].slices": slices}))

    assert max(len(n) for n in cfg.tpu_pools[0].node_pool_names) == 40


def test_load_stack_config_accepts_a_24_character_cluster_name(raw_config):
    assert load_stack_config(edit(raw_config, {"tpuplane:cluster.name": "a" * 24})).cluster.name == "a" * 24


# --- every config error: (edits, path, given, a phrase of the allowed text) --------------------------------

V5P_RES = {"name": "v5p-res", "tpuType": "v5p-128", "slices": 2}

CONFIG_ERRORS = [
    pytest.param({"tpuplane:tpuPools[0].tpuType": "v6e-17"},
                 "tpuplane:tpuPools[0].tpuType", "v6e-17", "v6e-<N|AxB>", id="unknown-tpu-type"),
    pytest.param({"tpuplane:tpuPools[0].machineType": "ct6e-standard-8t"},
                 "tpuplane:tpuPools[0].machineType", "ct6e-standard-8t", "ct6e-standard-4t for v6e-16 (4x4)",
                 id="machine-type-not-for-the-tpu-type"),
    pytest.param({"tpuplane:tpuPools[1].slices": 0},
                 "tpuplane:tpuPools[1].slices", 0, "greater than or equal to 1", id="zero-slices"),
    pytest.param({"tpuplane:tpuPools[0].slices": 2.5},
                 "tpuplane:tpuPools[0].slices", 2.5, "valid integer", id="fractional-slices"),
    pytest.param({"tpuplane:tpuPools[0].capacity": "preemptible"},
                 "tpuplane:tpuPools[0].capacity", "preemptible", "'flex-start'", id="unknown-capacity"),
    pytest.param({"tpuplane:tpuPools[1].reservation": DELETE},
                 "tpuplane:tpuPools[1].reservation", None, "a reservation name, or projects/P/reservations/R",
                 id="reservation-missing-for-capacity-reservation"),
    pytest.param({"tpuplane:tpuPools[0].reservation": "v5p-res"},
                 "tpuplane:tpuPools[0].reservation", "v5p-res", "no reservation with capacity spot",
                 id="reservation-on-a-spot-pool"),
    pytest.param({"tpuplane:tpuPools[1].capacity": "on-demand"},
                 "tpuplane:tpuPools[1].reservation", "v5p-res", "no reservation with capacity on-demand",
                 id="reservation-on-an-on-demand-pool"),
    pytest.param({"tpuplane:tpuPools[1].reservation": "projects/acme-ml/v5p-res"},
                 "tpuplane:tpuPools[1].reservation", "projects/acme-ml/v5p-res",
                 "NAME or projects/P/reservations/R", id="bad-reservation-path"),
    pytest.param({"tpuplane:tpuPools[0].maxRunDuration": "3600s"},
                 "tpuplane:tpuPools[0].maxRunDuration", "3600s", "only with capacity flex-start or queued",
                 id="max-run-duration-on-a-spot-pool"),
    pytest.param({"tpuplane:tpuPools[0].capacity": "flex-start", "tpuplane:tpuPools[0].maxRunDuration": "1h"},
                 "tpuplane:tpuPools[0].maxRunDuration", "1h", r"[1-9][0-9]{0,9}s", id="max-run-duration-not-in-seconds"),
    pytest.param({"tpuplane:tpuPools[0].capacity": "flex-start", "tpuplane:tpuPools[0].maxRunDuration": "0s"},
                 "tpuplane:tpuPools[0].maxRunDuration", "0s", r"[1-9][0-9]{0,9}s", id="max-run-duration-zero"),
    pytest.param({"tpuplane:tpuPools[0].capacity": "flex-start", "tpuplane:tpuPools[0].maxRunDuration": "604801s"},
                 "tpuplane:tpuPools[0].maxRunDuration", "604801s", "at most 604800s", id="max-run-duration-over-7-days"),
    pytest.param({"tpuplane:tpuPools[1].reservation": "projects/shared-tpu/reservations/r1/reservationBlocks/b1"},
                 "tpuplane:tpuPools[1].reservation", "projects/shared-tpu/reservations/r1/reservationBlocks/b1",
                 "a reservation block of project acme-ml", id="shared-reservation-block"),
    pytest.param({"tpuplane:tpuPools[1].maintenanceInterval": "PERIODIC"},
                 "tpuplane:tpuPools[1].maintenanceInterval", "PERIODIC", "AS_NEEDED, as reservation 'v5p-res' has",
                 id="maintenance-interval-unlike-the-reservation"),
    pytest.param({"tpuplane:tpuPools[0].diskType": "floppy"},
                 "tpuplane:tpuPools[0].diskType", "floppy", "hyperdisk-balanced", id="unknown-disk-type"),
    pytest.param({"tpuplane:tpuPools[0].slices": 3751},
                 "tpuplane:tpuPools", "15036 TPU VMs and 10 CPU nodes", "at most 15000 nodes per cluster",
                 id="more-nodes-than-gke-allows"),
    pytest.param({"tpuplane:cluster.privateEndpoint": True},
                 "tpuplane:cluster.privateEndpoint", True, "with masterAuthorizedNetworks",
                 id="private-endpoint-without-authorized-networks"),
    pytest.param({"tpuplane:cluster.maintenanceExclusion": {"startTime": "tomorrow"}},
                 "tpuplane:cluster.maintenanceExclusion.startTime", "tomorrow", "RFC 3339",
                 id="maintenance-exclusion-not-a-time"),
    pytest.param({"tpuplane:cluster.maintenanceExclusion": {"startTime": "2026-12-01T00:00:00Z",
                                                            "endTime": "2026-11-01T00:00:00Z"}},
                 "tpuplane:cluster.maintenanceExclusion.endTime", "2026-11-01T00:00:00Z", "a time after startTime",
                 id="maintenance-exclusion-ends-before-it-starts"),
    pytest.param({"tpuplane:cluster.maintenanceExclusion": {"startTime": "2026-12-01T00:00:00Z",
                                                            "scope": "NO_UPGRADES"}},
                 "tpuplane:cluster.maintenanceExclusion.endTime", None, "at most 30 days after startTime",
                 id="no-upgrades-exclusion-without-end"),
    pytest.param({"tpuplane:cluster.maintenanceExclusion": {"startTime": "2026-12-01T00:00:00Z",
                                                            "endTime": "2027-01-15T00:00:00Z", "scope": "NO_UPGRADES"}},
                 "tpuplane:cluster.maintenanceExclusion.endTime", "2027-01-15T00:00:00Z", "at most 30 days",
                 id="no-upgrades-exclusion-too-long"),
    pytest.param({"tpuplane:tpuPools[0].maintenanceInterval": "PERIODIC"},
                 "tpuplane:tpuPools[0].maintenanceInterval", "PERIODIC", "AS_NEEDED with capacity spot",
                 id="periodic-maintenance-on-spot"),
    pytest.param({"tpuplane:tpuPools[0].capacity": "flex-start",
                  "tpuplane:tpuPools[0].maintenanceInterval": "PERIODIC"},
                 "tpuplane:tpuPools[0].maintenanceInterval", "PERIODIC", "AS_NEEDED with capacity flex-start",
                 id="periodic-maintenance-on-flex-start"),
    pytest.param({"tpuplane:tpuPools[0].capacity": "queued", "tpuplane:tpuPools[0].maintenanceInterval": "PERIODIC"},
                 "tpuplane:tpuPools[0].maintenanceInterval", "PERIODIC", "AS_NEEDED with capacity queued",
                 id="periodic-maintenance-on-queued"),
    pytest.param({"tpuplane:reservations[0].tpuType": "v6e-16"},
                 "tpuplane:tpuPools[1].reservation", "v5p-res", "a reservation of ct5p-hightpu-4t machines",
                 id="reservation-of-another-machine-type"),
    pytest.param({"tpuplane:reservations[1]": {"name": "v6e-res", "tpuType": "v6e-8"},
                  "tpuplane:tpuPools[2]": {"name": "eval", "tpuType": "v6e-8", "machineType": "ct6e-standard-8t",
                                           "capacity": "reservation", "reservation": "v6e-res"}},
                 "tpuplane:tpuPools[2].reservation", "v6e-res", "a reservation of ct6e-standard-8t machines",
                 id="reservation-of-the-other-host-of-the-same-tpu-type"),
    pytest.param({"tpuplane:reservations[0].slices": 1},
                 "tpuplane:reservations[0].slices", 1, "at least 2 slices", id="reservation-too-small"),
    pytest.param({"tpuplane:tpuPools[2]": {"name": "big2", "tpuType": "v5p-128", "capacity": "reservation",
                                           "reservation": "v5p-res"}},
                 "tpuplane:reservations[0].slices", 2, "at least 3 slices",
                 id="reservation-too-small-for-two-pools-sharing-it"),
    pytest.param({"tpuplane:reservations[0].zone": "us-east5-a"},
                 "tpuplane:reservations[0].zone", "us-east5-a", "the cluster's zone us-east5-b",
                 id="reservation-outside-the-cluster-zone"),
    pytest.param({"tpuplane:reservations[0].name": "V5P"},
                 "tpuplane:reservations[0].name", "V5P", "a lowercase name", id="bad-reservation-name"),
    pytest.param({"tpuplane:tpuPools[0].name": "a" * 38, "tpuplane:tpuPools[0].slices": 11},
                 "tpuplane:tpuPools[0].name", "a" * 38, "at most 37 characters with 11 slices",
                 id="pool-name-too-long-with-two-digit-suffix"),
    pytest.param({"tpuplane:tpuPools[0].name": "a" * 39, "tpuplane:tpuPools[0].slices": 10},
                 "tpuplane:tpuPools[0].name", "a" * 39, "at most 38 characters with 10 slices",
                 id="pool-name-too-long-with-one-digit-suffix"),
    pytest.param({"tpuplane:tpuPools[0].name": "Train"},
                 "tpuplane:tpuPools[0].name", "Train", "lowercase letters", id="pool-name-not-a-dns-label"),
    pytest.param({"tpuplane:cluster.name": "a" * 25},
                 "tpuplane:cluster.name", "a" * 25, "at most 24 characters",
                 id="cluster-name-too-long-for-the-node-service-account"),
    pytest.param({"tpuplane:cluster.name": "Fleet_1"},
                 "tpuplane:cluster.name", "Fleet_1", "a DNS label", id="cluster-name-not-a-dns-label"),
    pytest.param({"tpuplane:cluster.zone": "us-central1-a"},
                 "tpuplane:cluster.zone", "us-central1-a", "a zone of region us-east5", id="zone-not-in-region"),
    pytest.param({"tpuplane:cluster.releaseChannel": "NIGHTLY"},
                 "tpuplane:cluster.releaseChannel", "NIGHTLY", "RAPID|REGULAR|STABLE|EXTENDED",
                 id="unknown-release-channel"),
    pytest.param({"tpuplane:cluster.cpuPool": {"minNodes": 5, "maxNodes": 2}},
                 "tpuplane:cluster.cpuPool.minNodes", 5, "at most maxNodes (2)", id="cpu-pool-min-above-max"),
    pytest.param({"tpuplane:cluster.maintenanceExclusion": {"startTime": "2026-12-01T00:00:00Z", "scope": "ALL"}},
                 "tpuplane:cluster.maintenanceExclusion.scope", "ALL", "NO_MINOR_OR_NODE_UPGRADES",
                 id="unknown-maintenance-exclusion-scope"),
    pytest.param({"tpuplane:cluster.masterAuthorizedNetworks": [{"cidr": "203.0.113.0"}]},
                 "tpuplane:cluster.masterAuthorizedNetworks[0].cidr", "203.0.113.0", "an IPv4 CIDR block",
                 id="authorized-network-without-prefix-length"),
    pytest.param({"tpuplane:tpuPools[0].diskSizeGb": 5},
                 "tpuplane:tpuPools[0].diskSizeGb", 5, "greater than or equal to 10", id="boot-disk-too-small"),
    pytest.param({"tpuplane:tpuPools[1].name": "train"},
                 "tpuplane:tpuPools[1].name", "train", "a name not used by another entry", id="duplicate-pool-names"),
    pytest.param({"tpuplane:reservations[1]": dict(V5P_RES)},
                 "tpuplane:reservations[1].name", "v5p-res", "a name not used by another entry",
                 id="duplicate-reservation-names"),
    pytest.param({"tpuplane:tpuPools[0].tpuTyp": "v6e-16"},
                 "tpuplane:tpuPools[0].tpuTyp", "v6e-16", "no such key", id="typo-in-a-pool-key"),
    pytest.param({"tpuplane:cluster.relaseChannel": "RAPID"},
                 "tpuplane:cluster.relaseChannel", "RAPID", "no such key", id="typo-in-a-cluster-key"),
    pytest.param({"gcp:project": "Acme_ML"},
                 "gcp:project", "Acme_ML", "[a-z][-a-z0-9]{4,28}[a-z0-9]", id="bad-project-id"),
    pytest.param({"gcp:region": "useast"},
                 "gcp:region", "useast", "match pattern", id="bad-region"),
    pytest.param({"tpuplane:tpuPools": {"name": "train"}},
                 "tpuplane:tpuPools", {"name": "train"}, "a valid list", id="pools-not-a-list"),
]


@pytest.mark.parametrize(("edits", "path", "given", "allowed"), CONFIG_ERRORS)
def test_load_stack_config_rejects(raw_config, edits, path, given, allowed):
    problems = config_problems(edit(raw_config, edits))

    assert [(p.path, p.given) for p in problems] == [(path, given)]
    assert allowed in problems[0].allowed


def test_load_stack_config_suggests_the_closest_tpu_names(raw_config):
    (problem,) = config_problems(edit(raw_config, {"tpuplane:tpuPools[0].tpuType": "v6e-17"}))

    assert problem.hint.startswith("closest matches: ")
    assert "v6e-16" in problem.hint.removeprefix("closest matches: ").split(", ")


@pytest.mark.parametrize("key", ["tpuplane:tpuPool", "tpuplane:nodePools"])
def test_load_stack_config_rejects_unknown_tpuplane_keys(raw_config, key):
    raw_config[key] = []

    (problem,) = config_problems(raw_config)

    assert problem.path == key
    assert "tpuplane:tpuPools" in problem.allowed


@pytest.mark.parametrize("path", ["tpuplane:cluster.zone", "tpuplane:tpuPools[0].name", "tpuplane:cluster",
                                  "gcp:region"])
def test_load_stack_config_rejects_a_missing_required_key(raw_config, path):
    problems = config_problems(edit(raw_config, {path: DELETE}))

    assert [(p.path, p.allowed) for p in problems] == [(path, "a value: this key is required")]


def test_load_stack_config_reports_no_value_given_for_a_missing_key(raw_config):
    (problem,) = config_problems(edit(raw_config, {"tpuplane:cluster.zone": DELETE}))

    assert problem.given is None


def test_load_stack_config_reports_several_field_problems_at_once(raw_config):
    problems = config_problems(edit(raw_config, {"gcp:project": "X", "tpuplane:tpuPools[0].slices": 0,
                                             "tpuplane:tpuPools[1].capacity": "preemptible"}))

    assert [p.path for p in problems] == ["gcp:project", "tpuplane:tpuPools[0].slices",
                                          "tpuplane:tpuPools[1].capacity"]


def test_load_stack_config_reports_several_cross_field_problems_at_once(raw_config):
    problems = config_problems(edit(raw_config, {"tpuplane:cluster.zone": "us-central1-a",
                                             "tpuplane:tpuPools[0].maxRunDuration": "3600s",
                                             "tpuplane:reservations[0].slices": 1}))

    assert [p.path for p in problems] == ["tpuplane:cluster.zone", "tpuplane:tpuPools[0].maxRunDuration",
                                          "tpuplane:reservations[0].slices"]


def test_config_error_message_names_path_value_allowed_and_hint(raw_config):
    with pytest.raises(ConfigError) as caught:
        load_stack_config(edit(raw_config, {"tpuplane:tpuPools[1].slices": 0}))

    assert str(caught.value) == ("tpuplane:tpuPools[1].slices: got 0; allowed: Input should be greater than or "
                                 "equal to 1. Hint: a slice is one node pool; use 1 or more")


# --- known bugs: each test states the rule the code should follow ------------------------------------------


@pytest.mark.parametrize(("edits", "path"), [
    ({"tpuplane:reservations[0].tpuType": "v5p-129"}, "tpuplane:reservations[0].tpuType"),
    ({"tpuplane:reservations[0].machineType": "ct6e-standard-8t"}, "tpuplane:reservations[0].machineType"),
])
def test_load_stack_config_points_reservation_tpu_type_errors_at_the_reservation(raw_config, edits, path):
    problems = config_problems(edit(raw_config, edits))

    assert [p.path for p in problems] == [path]


def test_load_stack_config_rejects_a_pool_name_too_long_for_its_workload_policy(raw_config):
    edits = {"tpuplane:cluster.name": "c" * 24, "tpuplane:tpuPools[0].name": "p" * 38,
             "tpuplane:tpuPools[0].tpuType": "tpu7x-16", "tpuplane:tpuPools[0].slices": 1}

    assert [p.path for p in config_problems(edit(raw_config, edits))] == ["tpuplane:tpuPools[0].name"]


@pytest.mark.parametrize("zone", ["us-east5-", "us-east5-b-c"])
def test_load_stack_config_rejects_a_zone_that_is_not_a_zone_name(raw_config, zone):
    problems = config_problems(edit(raw_config, {"tpuplane:cluster.zone": zone}))

    assert [p.path for p in problems] == ["tpuplane:cluster.zone"]


def test_load_stack_config_reports_capacity_rules_beside_an_unknown_tpu_type(raw_config):
    problems = config_problems(edit(raw_config, {"tpuplane:tpuPools[0].tpuType": "v6e-17",
                                             "tpuplane:tpuPools[0].reservation": "v5p-res"}))

    assert sorted(p.path for p in problems) == ["tpuplane:tpuPools[0].reservation", "tpuplane:tpuPools[0].tpuType"]


def test_stack_reservation_finds_a_reservation_of_this_stack_named_by_its_path(raw_config):
    cfg = load_stack_config(edit(raw_config, {"tpuplane:tpuPools[1].reservation": "projects/acme-ml/reservations/v5p-res"}))

    assert cfg.stack_reservation(cfg.tpu_pools[1]).name == "v5p-res"


def test_load_stack_config_checks_a_reservation_named_by_its_path_against_its_pools(raw_config):
    problems = config_problems(edit(raw_config, {"tpuplane:tpuPools[1].reservation": "projects/acme-ml/reservations/v5p-res",
                                             "tpuplane:tpuPools[1].slices": 3}))

    assert [p.path for p in problems] == ["tpuplane:reservations[0].slices"]

