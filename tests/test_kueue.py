"""Kueue renderers: flavors, quotas equal to pool capacity, team splits, priorities, controllers, webhook gate."""

from __future__ import annotations

import copy
import itertools
from fractions import Fraction
from typing import Any

import pytest
import yaml
from kubernetes.utils import parse_quantity
from hypothesis import given, settings
from hypothesis import strategies as st

from tpuplane.infra.batch import kueue
from tpuplane.infra.fleet.machines import gke_allocatable, machine_shape
from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.k8s_validation import manifest_errors
from tpuplane.infra.fleet.catalog import resolve_tpu_type
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.scheduling import TPU_RESOURCE
from tpuplane.infra.quantity import canonical_quantity

BASE: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
}

POOL_CONFIGS = {
    "one-spot-pool": [{"name": "train", "tpuType": "v6e-16", "slices": 4, "capacity": "spot"}],
    "same-shape-two-pools": [{"name": "a", "tpuType": "v6e-16", "slices": 3},
                             {"name": "b", "tpuType": "v6e-16", "slices": 2, "capacity": "flex-start"}],
    "mixed": [{"name": "spot", "tpuType": "v6e-16", "slices": 4, "capacity": "spot"},
              {"name": "queued", "tpuType": "v6e-16", "slices": 2, "capacity": "queued"},
              {"name": "big", "tpuType": "v5p-128", "slices": 2},
              {"name": "small", "tpuType": "tpu7x-8", "slices": 5},
              {"name": "lite", "tpuType": "v5litepod-16", "slices": 1, "capacity": "spot"}],
}
TEAMS = [{"name": "research", "share": 0.5, "borrowingLimit": 0.25},
         {"name": "prod", "namespace": "serving", "share": 0.3, "lendingLimit": 0.5, "priority": "high"}]


# A Shared Pathways Service holding the first 2 of 3 v6e-16 slices: Kueue owns only the third.
PATHWAYS = {"name": "pw", "tpuPool": "serve", "slices": 2, "jaxVersion": "0.10.0"}
DEDICATED_POOLS = [{"name": "serve", "tpuType": "v6e-16", "slices": 3},
                   {"name": "batch", "tpuType": "v6e-16", "slices": 2, "capacity": "spot"}]


def stack(pools: list[dict[str, Any]], teams: list[dict[str, Any]] | None = None, pathways=None, **kueue_cfg: Any):
    raw = copy.deepcopy(BASE) | {"tpuplane:tpuPools": copy.deepcopy(pools)}
    if teams is not None or kueue_cfg:
        raw["tpuplane:kueue"] = {**kueue_cfg, **({"teams": copy.deepcopy(teams)} if teams is not None else {})}
    if pathways is not None:
        raw["tpuplane:pathways"] = copy.deepcopy(pathways)
        raw["tpuplane:cluster"]["cpuPool"] = {"machineType": "n2-standard-32"}  # room for the service's proxies
    return load_stack_config(raw)


def tpu_quota(cq: dict[str, Any]) -> dict[str, int]:
    """TPU flavor name -> its google.com/tpu nominal quota (the CPU flavor's zero left out)."""
    return {name: entry["nominalQuota"] for name, entry in tpu_entries([cq])[cq["metadata"]["name"]].items()}


def chips(entry: dict[str, Any]) -> dict[str, Any]:
    """A quota entry with its amounts as numbers of chips (they are written as quantities)."""
    return {key: int(parse_quantity(value)) if key != "name" else value for key, value in entry.items()}


def tpu_entries(cqs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """ClusterQueue name -> TPU flavor name -> its google.com/tpu quota entry, amounts in chips."""
    return {cq["metadata"]["name"]: {f["name"]: chips(r) for g in cq["spec"]["resourceGroups"] for f in g["flavors"]
                                     if f["name"] != kueue.CPU_FLAVOR for r in f["resources"]
                                     if r["name"] == TPU_RESOURCE}
            for cq in cqs}


def pool_capacity(cfg) -> dict[str, int]:
    """The catalog's chips per slice times the slices Kueue admits to, per flavor."""
    capacity: dict[str, int] = {}
    for pool in cfg.tpu_pools:
        name = kueue.pool_flavor_name(cfg.batch, pool)
        chips = resolve_tpu_type(pool.tpu_type, machine_type=pool.machine_type).chips * pool.queued_slices
        if chips:
            capacity[name] = capacity.get(name, 0) + chips
    return capacity


@pytest.mark.parametrize("teams", [None, TEAMS], ids=["single-queue", "teams"])
@pytest.mark.parametrize("pools", POOL_CONFIGS.values(), ids=POOL_CONFIGS.keys())
def test_cluster_queues_quota_equals_pool_capacity_for_every_flavor(pools, teams):
    cfg = stack(pools, teams)
    assert pool_capacity(cfg)  # every config has capacity to split
    totals: dict[str, int] = {}
    for cq in kueue.render_cluster_queues(cfg.batch):
        for flavor, chips in tpu_quota(cq).items():
            totals[flavor] = totals.get(flavor, 0) + chips
    assert totals == pool_capacity(cfg)


@pytest.mark.parametrize("teams", [None, TEAMS], ids=["single-queue", "teams"])
def test_cluster_queues_quota_leaves_out_slices_dedicated_to_a_service(teams):
    cfg = stack(DEDICATED_POOLS, teams, pathways=PATHWAYS)
    totals: dict[str, int] = {}
    for cq in kueue.render_cluster_queues(cfg.batch):
        for flavor, chips in tpu_quota(cq).items():
            totals[flavor] = totals.get(flavor, 0) + chips
    assert totals == pool_capacity(cfg) == {"tpu-v6e-slice-4x4": 16, "tpu-v6e-slice-4x4-spot": 32}


def test_pool_wholly_dedicated_to_a_service_has_no_flavor():
    cfg = stack(DEDICATED_POOLS, pathways={**PATHWAYS, "slices": 3})
    assert [f.name for f in kueue.tpu_flavors(cfg.batch)] == ["tpu-v6e-slice-4x4-spot"]


def test_team_quotas_are_whole_slices():
    """4 slices of 16 chips at 0.5 / 0.3 / 0.2: 2 / 1.2 / 0.8 slices -> 2 / 1 / 1, never 32 / 19 / 13 chips."""
    teams = [{"name": "a", "share": 0.5}, {"name": "b", "share": 0.3}]
    quotas = tpu_entries(kueue.render_cluster_queues(stack(POOL_CONFIGS["one-spot-pool"], teams).batch))
    assert {q: e["tpu-v6e-slice-4x4-spot"]["nominalQuota"] for q, e in quotas.items()} == {
        "a": 32, "b": 16, "unassigned": 16}


@settings(max_examples=40, deadline=None)
@given(shares=st.lists(st.integers(1, 100), min_size=1, max_size=4), slack=st.integers(0, 100),
       big=st.integers(1, 6), small=st.integers(1, 9))
def test_team_quotas_are_multiples_of_the_flavor_slice(shares, slack, big, small):
    total = sum(shares) + slack
    teams = [{"name": f"t{i}", "share": s / total, "borrowingLimit": 0.5, "lendingLimit": 0.5}
             for i, s in enumerate(shares)]
    pools = [{"name": "big", "tpuType": "v5p-128", "slices": big}, {"name": "small", "tpuType": "tpu7x-8",
                                                                      "slices": small}]
    try:
        cfg = stack(pools, teams)
    except ConfigError:  # a team with less than a slice of every flavor is refused (tested below)
        return
    per_slice = {"tpu-v5p-slice-4x4x4": 64, "tpu7x-2x2x1": 4}
    for entries in tpu_entries(kueue.render_cluster_queues(cfg.batch)).values():
        for flavor, entry in entries.items():
            for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                assert entry.get(key, 0) % per_slice[flavor] == 0


def test_team_limits_are_whole_slices_rounded_down():
    teams = [{"name": "a", "share": 0.5, "borrowingLimit": 0.3, "lendingLimit": 0.75}]  # of 4 x 16 chips
    entry = tpu_entries(kueue.render_cluster_queues(stack(POOL_CONFIGS["one-spot-pool"], teams).batch))["a"]
    # borrowing 0.3 x 4 = 1.2 -> 1 slice; lending 0.75 x 2 = 1.5 -> 1 slice
    assert entry["tpu-v6e-slice-4x4-spot"] == {"name": TPU_RESOURCE, "nominalQuota": 32, "borrowingLimit": 16,
                                               "lendingLimit": 16}


def test_team_with_less_than_a_slice_of_every_flavor_is_refused():
    teams = [{"name": "a", "share": 0.9}, {"name": "tiny", "share": 0.1, "borrowingLimit": 0}]
    with pytest.raises(ConfigError) as exc:
        stack([{"name": "p", "tpuType": "v6e-16", "slices": 2}], teams)  # tiny: 0.2 slices -> 0
    [problem] = exc.value.problems
    assert problem.path == "tpuplane:kueue.teams[1].share"
    assert "tpu-v6e-slice-4x4 has 2" in problem.hint


def test_team_with_a_slice_of_some_flavor_is_accepted():
    teams = [{"name": "a", "share": 0.9}, {"name": "tiny", "share": 0.1, "borrowingLimit": 0}]
    pools = [{"name": "p", "tpuType": "v6e-16", "slices": 2}, {"name": "q", "tpuType": "tpu7x-8", "slices": 10}]
    quotas = tpu_entries(kueue.render_cluster_queues(stack(pools, teams).batch))["tiny"]
    assert {f: e["nominalQuota"] for f, e in quotas.items()} == {"tpu-v6e-slice-4x4": 0, "tpu7x-2x2x1": 4}


def test_team_with_less_than_a_slice_but_free_to_borrow_is_accepted():
    teams = [{"name": "a", "share": 0.9}, {"name": "tiny", "share": 0.1}]  # no borrowing limit
    quotas = tpu_entries(kueue.render_cluster_queues(stack([{"name": "p", "tpuType": "v6e-16", "slices": 2}],
                                                           teams).batch))
    assert quotas["tiny"]["tpu-v6e-slice-4x4"]["nominalQuota"] == 0


def test_flavors_one_per_shape_and_capacity_mode_in_capacity_order():
    """On-demand and flex-start pools of one shape get two flavors: their nodes differ, and a workload asks
    for one of them."""
    cfg = stack(POOL_CONFIGS["mixed"] + POOL_CONFIGS["same-shape-two-pools"])
    names = [f["metadata"]["name"] for f in kueue.render_flavors(cfg.batch)]
    assert names == ["tpu-v5p-slice-4x4x4", "tpu-v6e-slice-4x4", "tpu7x-2x2x1", "tpu-v6e-slice-4x4-flex-start",
                     "tpu-v5-lite-podslice-4x4-spot", "tpu-v6e-slice-4x4-spot", "tpu-v6e-slice-4x4-queued", "cpu"]


def test_reservation_pool_gets_its_own_flavor_selecting_reservation_nodes():
    cfg = load_stack_config(copy.deepcopy(BASE) | {
        "tpuplane:tpuPools": [{"name": "od", "tpuType": "v6e-16", "slices": 1},
                              {"name": "res", "tpuType": "v6e-16", "slices": 2, "capacity": "reservation",
                               "reservation": "r"}],
        "tpuplane:reservations": [{"name": "r", "tpuType": "v6e-16", "slices": 2}]})
    flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"]["tpuplane.dev/capacity"]
               for f in kueue.render_flavors(cfg.batch)[:-1]}
    assert flavors == {"tpu-v6e-slice-4x4-reservation": "reservation", "tpu-v6e-slice-4x4": "on-demand"}


def test_spot_flavor_selects_spot_nodes_and_tolerates_tpu_taint():
    flavor = kueue.render_flavors(stack(POOL_CONFIGS["one-spot-pool"]).batch)[0]
    assert flavor["spec"]["nodeLabels"] == {"cloud.google.com/gke-spot": "true",
                                            "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                            "cloud.google.com/gke-tpu-topology": "4x4",
                                            "node.kubernetes.io/instance-type": "ct6e-standard-4t",
                                            "tpuplane.dev/capacity": "spot"}
    assert flavor["spec"]["tolerations"] == [{"key": "google.com/tpu", "operator": "Equal", "value": "present",
                                              "effect": "NoSchedule"}]


def test_one_shape_on_two_machine_types_gets_two_flavors():
    """v6e-8 (2x4) on two ct6e-standard-4t VMs and on one ct6e-standard-8t VM share the TPU node labels."""
    pools = [{"name": "two", "tpuType": "v6e-8", "slices": 2},
             {"name": "one", "tpuType": "v6e-8", "machineType": "ct6e-standard-8t", "slices": 3}]
    cfg = stack(pools)
    flavors = {f["metadata"]["name"]: f["spec"]["nodeLabels"]["node.kubernetes.io/instance-type"]
               for f in kueue.render_flavors(cfg.batch)[:-1]}
    assert flavors == {"tpu-v6e-slice-2x4-ct6e-standard-4t": "ct6e-standard-4t",
                       "tpu-v6e-slice-2x4-ct6e-standard-8t": "ct6e-standard-8t"}
    [cq] = kueue.render_cluster_queues(cfg.batch)
    assert tpu_quota(cq) == {"tpu-v6e-slice-2x4-ct6e-standard-4t": 16, "tpu-v6e-slice-2x4-ct6e-standard-8t": 24}


def test_cpu_flavor_selects_the_named_cpu_pool():
    cpu = kueue.render_flavors(stack([]).batch.model_copy(update={"cpu_pool_name": "system"}))[-1]
    assert cpu["spec"] == {"nodeLabels": {"cloud.google.com/gke-nodepool": "system"}}


def test_single_queue_is_xpks_cluster_queue_and_multislice_queue_in_default():
    cfg = stack(POOL_CONFIGS["one-spot-pool"])
    [cq] = kueue.render_cluster_queues(cfg.batch)
    [lq] = kueue.render_local_queues(cfg.batch)
    assert cq["metadata"]["name"] == "cluster-queue"
    assert cq["spec"]["namespaceSelector"] == {}
    assert cq["spec"]["preemption"] == {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"}
    assert "cohortName" not in cq["spec"]
    assert lq["metadata"] == {"name": "multislice-queue", "namespace": "default"}
    assert lq["spec"] == {"clusterQueue": "cluster-queue"}


def test_cluster_queue_cpu_flavor_comes_first_with_the_cpu_pool_and_no_tpu():
    cfg = stack([], None)  # default cpu pool: n2-standard-16, up to 10 nodes
    [cq] = kueue.render_cluster_queues(cfg.batch)
    [group] = cq["spec"]["resourceGroups"]
    assert group["coveredResources"] == [TPU_RESOURCE, "cpu", "memory"]
    assert group["flavors"][0] == {"name": "cpu", "resources": [  # 10 x n2-standard-16: 160 cores, 640 GiB
        {"name": TPU_RESOURCE, "nominalQuota": "0"}, {"name": "cpu", "nominalQuota": "160"},
        {"name": "memory", "nominalQuota": "640Gi"}]}


def test_cluster_queue_tpu_flavor_carries_cpu_and_memory_of_its_host_vms():
    """A TPU pod that also asks for cpu/memory gets all three from its TPU flavor (one resource group), so Kueue
    never merges the CPU pool's node label into its selector: 2 slices of v6e-16 = 8 ct6e-standard-4t hosts."""
    [cq] = kueue.render_cluster_queues(stack(POOL_CONFIGS["one-spot-pool"]).batch)
    [group] = cq["spec"]["resourceGroups"]
    [tpu] = [f for f in group["flavors"] if f["name"] == "tpu-v6e-slice-4x4-spot"]
    host = gke_allocatable(machine_shape("ct6e-standard-4t"))
    assert [chips(r) if r["name"] == TPU_RESOURCE else r for r in tpu["resources"]] == [
        {"name": TPU_RESOURCE, "nominalQuota": 64},
        {"name": "cpu", "nominalQuota": f"{16 * host.millicores}m"},
        {"name": "memory", "nominalQuota": f"{16 * host.memory_mib}Mi"}]


@pytest.mark.parametrize("pools", list(POOL_CONFIGS.values()), ids=list(POOL_CONFIGS))
def test_cluster_queue_quotas_are_written_as_kueue_stores_them(pools):
    """Kueue's webhook rewrites every quantity into its canonical form; anything else is changed again on each
    apply and the next preview never settles."""
    for cq in kueue.render_cluster_queues(stack(pools, TEAMS).batch):
        for flavor in cq["spec"]["resourceGroups"][0]["flavors"]:
            for entry in flavor["resources"]:
                for key in ("nominalQuota", "borrowingLimit", "lendingLimit"):
                    if key in entry:
                        assert entry[key] == canonical_quantity(entry[key]), (flavor["name"], entry)


def test_cluster_queue_flavors_list_every_covered_resource_in_order():
    for cq in kueue.render_cluster_queues(stack(POOL_CONFIGS["mixed"], TEAMS).batch):
        for group in cq["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]


def test_resource_appears_in_one_group_only():
    for cq in kueue.render_cluster_queues(stack(POOL_CONFIGS["mixed"], TEAMS).batch):
        covered = [r for g in cq["spec"]["resourceGroups"] for r in g["coveredResources"]]
        assert len(covered) == len(set(covered))


def test_teams_get_cohort_namespace_selector_and_reclaim():
    cqs = {cq["metadata"]["name"]: cq for cq in kueue.render_cluster_queues(stack(POOL_CONFIGS["mixed"], TEAMS).batch)}
    assert sorted(cqs) == ["prod", "research", "unassigned"]
    assert {cq["spec"]["cohortName"] for cq in cqs.values()} == {"tpuplane"}
    assert cqs["prod"]["spec"]["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "serving"}}
    assert cqs["research"]["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert "namespaceSelector" not in cqs["unassigned"]["spec"]  # lends only; Kueue's nil selector matches nothing


def test_team_limits_are_fractions_in_whole_slices():
    entries = tpu_entries(kueue.render_cluster_queues(stack(POOL_CONFIGS["one-spot-pool"], TEAMS).batch))
    # 4 slices of 16 chips: research 0.5 -> 2 slices, borrowing 0.25 x 4 -> 1; prod 0.3 -> 1.2 -> 1 slice,
    # lending 0.5 x 1 -> 0; unassigned 0.2 -> 0.8 -> 1 (the largest remainder).
    assert entries["research"]["tpu-v6e-slice-4x4-spot"] == {"name": TPU_RESOURCE, "nominalQuota": 32,
                                                             "borrowingLimit": 16}
    assert entries["prod"]["tpu-v6e-slice-4x4-spot"] == {"name": TPU_RESOURCE, "nominalQuota": 16,
                                                         "lendingLimit": 0}
    assert entries["unassigned"]["tpu-v6e-slice-4x4-spot"] == {"name": TPU_RESOURCE, "nominalQuota": 16}


def test_team_local_queues_live_in_team_namespaces():
    cfg = stack(POOL_CONFIGS["one-spot-pool"], TEAMS)
    assert [(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"])
            for q in kueue.render_local_queues(cfg.batch)] == [("research", "research", "research"),
                                                         ("serving", "prod", "prod")]
    assert [n["metadata"]["name"] for n in kueue.render_team_namespaces(cfg.batch)] == ["research", "serving"]


def test_full_shares_leave_no_unassigned_queue():
    teams = [{"name": "a", "share": 0.25}, {"name": "b", "share": 0.75}]
    names = [cq["metadata"]["name"] for cq in kueue.render_cluster_queues(stack(POOL_CONFIGS["mixed"], teams).batch)]
    assert names == ["a", "b"]


def test_queued_flavor_gets_provisioning_check_through_admission_checks_strategy():
    cfg = stack(POOL_CONFIGS["mixed"])
    [cq] = kueue.render_cluster_queues(cfg.batch)
    assert "admissionChecks" not in cq["spec"]  # v1beta2 has only the strategy
    assert cq["spec"]["admissionChecksStrategy"] == {
        "admissionChecks": [{"name": "dws-prov", "onFlavors": ["tpu-v6e-slice-4x4-queued"]}]}
    prc, check = kueue.render_provisioning(cfg.batch)
    assert prc["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert prc["spec"]["managedResources"] == [TPU_RESOURCE]
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == prc["metadata"]["name"]


def test_no_queued_pool_no_provisioning_objects():
    cfg = stack(POOL_CONFIGS["one-spot-pool"])
    assert kueue.render_provisioning(cfg.batch) == []
    assert "admissionChecksStrategy" not in kueue.render_cluster_queues(cfg.batch)[0]["spec"]


def test_priorities_exist_for_kueue_and_for_pods():
    objs = kueue.render_priority_classes()
    values = {(o["kind"], o["metadata"]["name"]): o["value"] for o in objs}
    expected = {"very-low": 100, "low": 250, "medium": 500, "high": 750, "very-high": 1000}
    assert values == {**{("WorkloadPriorityClass", k): v for k, v in expected.items()},
                      **{("PriorityClass", k): v for k, v in expected.items()}}
    assert all("globalDefault" not in o for o in objs if o["kind"] == "PriorityClass")  # unset: not the default


@given(total=st.integers(0, 100_000),
       raw=st.lists(st.integers(1, 1000), min_size=1, max_size=12))
def test_largest_remainder_sums_exactly_and_stays_within_one_unit(total, raw):
    weights = [Fraction(w, sum(raw)) for w in raw]
    parts = kueue.largest_remainder(total, weights)
    assert sum(parts) == total
    assert all(abs(p - total * w) < 1 for p, w in zip(parts, weights))


@settings(max_examples=40, deadline=None)
@given(shares=st.lists(st.integers(1, 100), min_size=1, max_size=6), slack=st.integers(0, 100),
       slices=st.integers(1, 9))
def test_team_split_sums_to_capacity_for_any_shares(shares, slack, slices):
    total = sum(shares) + slack
    teams = [{"name": f"t{i}", "share": s / total} for i, s in enumerate(shares)]
    cfg = stack([{"name": "p", "tpuType": "v6e-16", "slices": slices}], teams)
    quotas = kueue.cluster_queue_quotas(cfg.batch)
    assert sum(q.slices["tpu-v6e-slice-4x4"] for q in quotas) == slices
    assert sum(q.cpu for q in quotas) == kueue.cpu_pool_quota(cfg.batch)[0]
    assert sum(q.memory_mib for q in quotas) == kueue.cpu_pool_quota(cfg.batch)[1]


def test_controller_sizing_follows_xpks_formula():
    # 4 slices x 4 VMs + 2 slices x 16 VMs + 10 CPU nodes = 58 nodes: the floors apply.
    cfg = stack([{"name": "a", "tpuType": "v6e-16", "slices": 4}, {"name": "b", "tpuType": "v5p-128", "slices": 2}])
    assert kueue.controller_node_count(cfg.batch) == 58
    values = kueue.kueue_helm_values(cfg.batch)["controllerManager"]["manager"]["resources"]
    assert values["limits"] == {"cpu": "2", "memory": "4096Mi"}
    big = stack([{"name": "a", "tpuType": "v5p-128", "slices": 200}])  # 3200 + 10 nodes
    assert kueue.kueue_helm_values(big.batch)["controllerManager"]["manager"]["resources"]["limits"] == {
        "cpu": "13", "memory": "102720Mi"}
    assert kueue.jobset_helm_values(big.batch)["controller"]["resources"]["limits"]["memory"] == "4096Mi"
    huge = stack([{"name": "a", "tpuType": "v5p-128", "slices": 300}])  # 4810 nodes x 1.2 MiB
    assert kueue.jobset_helm_values(huge.batch)["controller"]["resources"]["limits"]["memory"] == "5772Mi"


def manager_config(cfg) -> dict[str, Any]:
    return yaml.safe_load(kueue.kueue_helm_values(cfg.batch)["managerConfig"]["controllerManagerConfigYaml"])


def test_kueue_configuration_enables_jobset_integration():
    config = manager_config(stack([]))
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]


def test_kueue_configuration_leaves_system_and_controller_namespaces_unmanaged():
    """The chart copies this selector onto Kueue's Job webhooks: the gate Job in kueue-system is never refused."""
    config = manager_config(stack([]))
    assert config["manageJobsWithoutQueueName"] is False
    assert config["managedJobsNamespaceSelector"] == {"matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
         "values": ["jobset-system", "kube-system", "kueue-system"]}]}
    *_, gate = kueue.render_webhook_probe("0.19.2")
    assert gate["metadata"]["namespace"] in config["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"]


def test_kueue_configuration_leaves_the_pathways_service_namespace_unmanaged():
    config = manager_config(stack(DEDICATED_POOLS, pathways=PATHWAYS))
    assert "pw" in config["managedJobsNamespaceSelector"]["matchExpressions"][0]["values"]


def test_controllers_tolerate_gke_managed_components_and_run_on_cpu_pool():
    cfg = stack([])
    kueue_release, jobset_release = kueue.controller_releases(cfg.batch)
    for placement in (kueue_release.values["controllerManager"], jobset_release.values["controller"]):
        assert placement["tolerations"] == [kueue.GKE_MANAGED_TOLERATION]
        assert placement["nodeSelector"] == {"cloud.google.com/gke-nodepool": "cpu"}
    assert (kueue_release.chart, kueue_release.version, kueue_release.namespace) == (
        "oci://registry.k8s.io/kueue/charts/kueue", "0.19.2", "kueue-system")
    assert (jobset_release.chart, jobset_release.version, jobset_release.namespace) == (
        "oci://registry.k8s.io/jobset/charts/jobset", "0.12.0", "jobset-system")


def test_versions_are_configurable():
    kueue_release, jobset_release = kueue.controller_releases(
        stack([], version="0.18.0", jobsetVersion="0.11.1").batch)
    assert (kueue_release.version, jobset_release.version) == ("0.18.0", "0.11.1")


def test_webhook_probe_dry_run_creates_a_resource_flavor_with_least_privilege():
    *setup, job = kueue.render_webhook_probe("0.19.2")
    role = next(o for o in setup if o["kind"] == "ClusterRole")
    assert role["rules"] == [{"apiGroups": ["kueue.x-k8s.io"], "resources": ["resourceflavors"], "verbs": ["create"]}]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert "--dry-run=server" in container["command"]
    assert job["metadata"]["namespace"] == "kueue-system"
    assert job["spec"]["template"]["metadata"]["annotations"] == {"tpuplane.dev/kueue-version": "0.19.2"}
    configmap = next(o for o in setup if o["kind"] == "ConfigMap")
    assert yaml.safe_load(configmap["data"]["resourceflavor.yaml"])["kind"] == "ResourceFlavor"


@pytest.mark.parametrize("teams", [None, TEAMS], ids=["single-queue", "teams"])
def test_every_rendered_object_is_valid(teams):
    cfg = stack(POOL_CONFIGS["mixed"], teams)
    objs = (kueue.render_queue_objects(cfg.batch) + kueue.render_priority_classes()
            + kueue.render_team_namespaces(cfg.batch) + kueue.render_webhook_probe(cfg.batch.kueue_version))
    assert [e for o in objs for e in manifest_errors(o)] == []


def test_rendering_does_not_depend_on_pool_or_team_order():
    teams = [{"name": "a", "share": 0.25}, {"name": "b", "share": 0.25}, {"name": "c", "share": 0.25}]  # ties
    pools = POOL_CONFIGS["mixed"] + [{"name": "two", "tpuType": "v6e-8", "slices": 3},
                                     {"name": "one", "tpuType": "v6e-8", "machineType": "ct6e-standard-8t"}]
    pool_orders = [pools, pools[::-1], pools[3:] + pools[:3], pools[::2] + pools[1::2]]

    def render(cfg) -> str:
        return yaml.safe_dump_all(kueue.render_queue_objects(cfg.batch) + [kueue.kueue_helm_values(cfg.batch)],
                                  sort_keys=True)

    renders = {render(stack(p, list(t))) for p in pool_orders for t in itertools.permutations(teams)}
    assert len(renders) == 1


def test_flavors_of_one_shape_select_disjoint_nodes_by_capacity_class():
    """An on-demand flavor must not match spot nodes of the same shape (Kueue injects these selectors)."""
    pools = [{"name": "od", "tpuType": "v6e-16", "capacity": "on-demand"},
             {"name": "sp", "tpuType": "v6e-16", "capacity": "spot"}]
    standard, spot = [f["spec"]["nodeLabels"] for f in kueue.render_flavors(stack(pools).batch)[:2]]
    assert standard["tpuplane.dev/capacity"] != spot["tpuplane.dev/capacity"]
