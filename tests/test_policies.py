"""The policy pack: each guard rail passes a compliant fleet and names the resource and the fix otherwise."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from plan_factory import (
    cluster,
    cluster_queue,
    cpu_pool,
    node_pool,
    patch,
    plan,
    reservation,
    reserved_pool,
)
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import unknown_checking_proxy

from tpuplane.infra.review.plan import parse_plan
from tpuplane.infra.review.policies import (
    check_plan,
    cluster_node_limit,
    control_plane_not_public,
    deletion_protection_in_production,
    kueue_tpu_quota_matches_pools,
    no_plaintext_secrets,
    one_capacity_mode_per_pool,
    reservation_fits_pools,
    tpu_pool_has_tpu_taint,
    workload_identity_enabled,
)

REPO = Path(__file__).resolve().parents[1]
PACK_DIR = REPO / "policy"


def check(rule, res: dict[str, Any]):
    """Run a resource rule the way the engine calls it: type, camelCase props, URN."""
    return rule(res["type"], res["inputs"], res["urn"])


def check_stack(rule, *resources: dict[str, Any], **config: Any):
    return rule(parse_plan(plan(*resources)).resources, **config)


def messages(violations) -> str:
    return "\n".join(v.message for v in violations)


# --- TPU taint -----------------------------------------------------------------------------------------------


def test_tpu_taint_present_passes():
    assert check(tpu_pool_has_tpu_taint, node_pool()) == []


def test_tpu_taint_missing_names_the_pool_and_the_taint_to_add():
    [violation] = check(tpu_pool_has_tpu_taint, patch(node_pool(), {"nodeConfig": {"taints": []}}))
    assert violation.resource.endswith("::train-0") and violation.policy == "tpu-pool-has-tpu-taint"
    assert 'key: "google.com/tpu"' in violation.message and "NO_SCHEDULE" in violation.message


def test_tpu_taint_is_not_required_on_cpu_pools():
    assert check(tpu_pool_has_tpu_taint, cpu_pool()) == []


# --- capacity modes ------------------------------------------------------------------------------------------

FLEX_START = {"nodeCount": None, "autoscaling": {"minNodeCount": 0, "maxNodeCount": 4, "locationPolicy": "ANY"},
              "management": {"autoRepair": False},
              "nodeConfig": {"spot": None, "flexStart": True, "maxRunDuration": "3600s"}}
QUEUED = {"nodeCount": None, "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 4},
          "queuedProvisioning": {"enabled": True}, "nodeConfig": {"spot": None}}


@pytest.mark.parametrize("changes", [
    {},  # spot
    FLEX_START,
    QUEUED,
    {"nodeConfig": {"spot": None, "reservationAffinity": None}},  # on-demand
], ids=["spot", "flex-start", "queued", "on-demand"])
def test_capacity_mode_well_formed_pool_passes(changes):
    assert check(one_capacity_mode_per_pool, patch(node_pool(), changes)) == []


def test_capacity_mode_specific_reservation_passes():
    assert check(one_capacity_mode_per_pool, reserved_pool("big-0", "v6e-res")) == []


@pytest.mark.parametrize(("changes", "expected"), [
    ({"nodeConfig": {"reservationAffinity": None}}, "spot node pools must not consume reservations"),
    ({"nodeConfig": {"reservationAffinity": {"consumeReservationType": "ANY_RESERVATION"}}},
     "combines capacity modes reservation, spot"),
    ({**FLEX_START, "nodeConfig": {**FLEX_START["nodeConfig"], "spot": True}},
     "combines capacity modes spot, flex-start"),
    ({**FLEX_START, "management": {"autoRepair": True}}, "management.autoRepair = false"),
    ({**FLEX_START, "nodeCount": 4}, "remove nodeCount"),
    ({**FLEX_START, "nodeConfig": {**FLEX_START["nodeConfig"], "reservationAffinity": None}},
     "flex-start node pools must not consume reservations"),
    ({**QUEUED, "nodeConfig": {"spot": True}}, "combines capacity modes spot, queued provisioning"),
    ({**FLEX_START, "queuedProvisioning": {"enabled": True}}, "don't support TPUs with queued provisioning"),
    ({**QUEUED, "nodeConfig": {"spot": None, "reservationAffinity": None}},
     "queued provisioning node pools must not consume reservations"),
])
def test_capacity_mode_broken_rule_is_named_with_its_fix(changes, expected):
    assert expected in messages(check(one_capacity_mode_per_pool, patch(node_pool(), changes)))


def test_capacity_mode_flex_start_with_queued_provisioning_is_one_mode_on_gpu_pools():
    gpu = patch(cpu_pool(), {**FLEX_START, "queuedProvisioning": {"enabled": True},
                             "nodeConfig": {**FLEX_START["nodeConfig"], "machineType": "a3-highgpu-8g",
                                            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"}}})
    assert check(one_capacity_mode_per_pool, gpu) == []


def test_capacity_mode_specific_reservation_names_exactly_one_reservation():
    pool = patch(reserved_pool("big-0", "a"), {"nodeConfig": {"reservationAffinity": {"values": ["a", "b"]}}})
    assert "names exactly one reservation" in messages(check(one_capacity_mode_per_pool, pool))


# --- reservations fit ----------------------------------------------------------------------------------------


def test_reservation_fit_pools_within_count_pass():
    full_path = "projects/acme-ml/reservations/v6e-res"
    assert check_stack(reservation_fits_pools, reservation(count=8),
                       reserved_pool("big-0", "v6e-res"), reserved_pool("big-1", full_path)) == []


def test_reservation_fit_pools_over_count_flag_the_reservation():
    [violation] = check_stack(reservation_fits_pools, reservation(count=6),
                              reserved_pool("big-0", "v6e-res"), reserved_pool("big-1", "v6e-res"))
    assert violation.resource.endswith("::v6e-res")
    assert "holds 6 VMs but its pools need 8: big-0 (4), big-1 (4)" in violation.message


def test_reservation_fit_machine_type_mismatch_flags_the_pool():
    [violation] = check_stack(reservation_fits_pools, reservation(machine_type="ct5p-hightpu-4t"),
                              reserved_pool("big-0", "v6e-res"))
    assert violation.resource.endswith("::big-0") and "machine type ct5p-hightpu-4t" in violation.message


def test_reservation_fit_zone_mismatch_flags_the_pool():
    [violation] = check_stack(reservation_fits_pools, reservation(zone="us-east5-a"), reserved_pool("big-0", "v6e-res"))
    assert 'set nodeLocations = ["us-east5-a"]' in violation.message


def test_reservation_fit_ignores_reservations_outside_the_plan():
    assert check_stack(reservation_fits_pools, reserved_pool("big-0", "projects/other/reservations/shared")) == []


# --- Kueue quota ---------------------------------------------------------------------------------------------


def test_kueue_quota_equal_to_pool_chips_passes():
    assert check_stack(kueue_tpu_quota_matches_pools, node_pool("a"), node_pool("b"), cpu_pool(),
                       cluster_queue(tpu_quota=32)) == []


def test_kueue_quota_given_as_a_string_counts():
    assert check_stack(kueue_tpu_quota_matches_pools, node_pool("a"), cluster_queue(tpu_quota="16")) == []


def test_kueue_quota_in_the_api_servers_canonical_form_counts():
    assert check_stack(kueue_tpu_quota_matches_pools, node_pool("a"), node_pool("b"),
                       cluster_queue(tpu_quota="32000m")) == []


@pytest.mark.parametrize("quota", ["1500m", "16Gx", "-16"])
def test_kueue_quota_that_is_not_whole_chips_is_named(quota):
    violations = check_stack(kueue_tpu_quota_matches_pools, node_pool("a"), cluster_queue(tpu_quota=quota))
    assert f"nominalQuota {quota!r} of google.com/tpu is not a whole number of chips" in violations[0].message


def test_kueue_quota_short_of_pool_chips_names_the_right_quota():
    [violation] = check_stack(kueue_tpu_quota_matches_pools, node_pool("a"), node_pool("b"),
                              cluster_queue(tpu_quota=16))
    assert violation.resource.endswith("::tpu-queue")
    assert "admit 16 google.com/tpu chips but the TPU node pools hold 32 (a 16, b 16)" in violation.message
    assert "set the nominalQuota to 32" in violation.message


def test_kueue_quota_not_checked_without_cluster_queues():
    assert check_stack(kueue_tpu_quota_matches_pools, node_pool("a")) == []


# --- Workload Identity ---------------------------------------------------------------------------------------


def test_workload_identity_on_cluster_and_pool_passes():
    assert check(workload_identity_enabled, cluster()) == [] and check(workload_identity_enabled, node_pool()) == []


def test_workload_identity_missing_pool_flags_the_cluster():
    [violation] = check(workload_identity_enabled, patch(cluster(), {"workloadIdentityConfig": None}))
    assert "workloadIdentityConfig.workloadPool" in violation.message


def test_workload_identity_gce_metadata_flags_the_node_pool():
    pool = patch(node_pool(), {"nodeConfig": {"workloadMetadataConfig": {"mode": "GCE_METADATA"}}})
    [violation] = check(workload_identity_enabled, pool)
    assert "GCE_METADATA" in violation.message and 'mode = "GKE_METADATA"' in violation.message


# --- control plane -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("changes", [
    {},  # authorized networks
    {"masterAuthorizedNetworksConfig": None, "privateClusterConfig": {"enablePrivateEndpoint": True}},
])
def test_control_plane_private_or_authorized_passes(changes):
    assert check(control_plane_not_public, patch(cluster(), changes)) == []


@pytest.mark.parametrize(("changes", "expected"), [
    ({"masterAuthorizedNetworksConfig": None}, "public to the whole internet"),
    ({"masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "0.0.0.0/0"}]}}, "0.0.0.0/0"),
])
def test_control_plane_public_is_flagged(changes, expected):
    assert expected in messages(check(control_plane_not_public, patch(cluster(), changes)))


def authorized(*cidrs: str) -> dict[str, Any]:
    return patch(cluster(), {"masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": c} for c in cidrs]}})


@pytest.mark.parametrize("cidrs", [("0.0.0.0/1", "128.0.0.0/1"), ("10.0.0.0/8", "11.0.0.0/8"),
                                   tuple(f"{i}.0.0.0/9" for i in range(1, 4))])
def test_control_plane_cidrs_covering_more_than_a_slash_8_together_are_flagged(cidrs):
    assert "more than a /8" in messages(check(control_plane_not_public, authorized(*cidrs)))


def test_control_plane_overlapping_cidrs_count_once():
    assert check(control_plane_not_public, authorized("10.0.0.0/8", "10.1.0.0/16", "10.0.0.0/9")) == []


@pytest.mark.parametrize("cidr", ["0.0.0.0/00", "999.999.999.999/99", "10.0.0.1/8", "corp", ""])
def test_control_plane_malformed_cidr_is_flagged(cidr):
    [violation] = check(control_plane_not_public, authorized("10.0.0.0/8", cidr))
    assert "cidrBlocks[1] is not a CIDR block" in violation.message


# --- node limit ----------------------------------------------------------------------------------------------


def test_cluster_node_limit_counts_the_cpu_pool():
    pools = [node_pool(f"train-{i}", node_count=1000) for i in range(15)]  # 15,000 TPU VMs: at the limit
    assert check_stack(cluster_node_limit, cluster(), *pools) == []
    [violation] = check_stack(cluster_node_limit, cluster(), *pools, cpu_pool())
    assert "15001 nodes" in violation.message


def test_cluster_node_limit_counts_autoscaling_ceilings_in_every_zone():
    regional = patch(cpu_pool(), {"nodeCount": None, "nodeLocations": ["us-east5-a", "us-east5-b", "us-east5-c"],
                                  "autoscaling": {"maxNodeCount": 5001}})
    [violation] = check_stack(cluster_node_limit, cluster(), regional)
    assert "15003 nodes" in violation.message


# --- secret-looking values anywhere ----------------------------------------------------------------------------


@pytest.mark.parametrize("inputs", [
    {"name": "ghp_0123456789abcdefghijABCDEFGHIJKLMN"},
    {"metadata": {"labels": {"version": "AKIAIOSFODNN7EXAMPLE"}}},
    {"spec": {"image": "repo/app:xoxb-1234-5678-abcdefgh"}},
    {"spec": {"args": ["--index-url=https://user:pw@pypi.example.invalid/simple"]}},
])
def test_secrets_token_shaped_values_are_flagged_whatever_their_key(inputs):
    [violation] = check(no_plaintext_secrets, {"type": "kubernetes:apps/v1:Deployment", "inputs": inputs,
                                               "urn": "urn:x::d"})
    assert all(token not in violation.message for token in ("ghp_0123", "AKIAIOSF", "xoxb-1234", ":pw@"))


# --- deletion protection -------------------------------------------------------------------------------------


def test_deletion_protection_on_production_stack_passes():
    assert check_stack(deletion_protection_in_production, cluster(production=True), reservation()) == []


def test_deletion_protection_missing_on_labelled_production_cluster_is_flagged():
    unprotected = patch(cluster(production=True), {"deletionProtection": False})
    [violation] = check_stack(deletion_protection_in_production, unprotected)
    assert "deletionProtection = true" in violation.message


def test_deletion_protection_production_config_covers_unlabelled_stacks():
    res = patch(reservation(), {"deletionPolicy": None})
    assert check_stack(deletion_protection_in_production, cluster(), res) == []
    [violation] = check_stack(deletion_protection_in_production, cluster(), res, production=True)
    assert violation.resource.endswith("::v6e-res") and '"PREVENT"' in violation.message


# --- secrets -------------------------------------------------------------------------------------------------

PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----\n"
SA_KEY = '{"type": "service_account", "project_id": "acme-ml", "private_key": "' + PEM.replace("\n", "\\n") + '"}'


def test_secrets_references_and_engine_secrets_pass():
    inputs = {"spec": {"volumes": [{"secret": {"secretName": "hf-token"}}]},
              "tokenSecretRef": "projects/acme-ml/secrets/hf/versions/1",
              "values": {"apiKey": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
                                    "value": "engine-marked"}}}
    assert check(no_plaintext_secrets, {"type": "kubernetes:helm.sh/v3:Release", "inputs": inputs,
                                        "urn": "urn:x::r"}) == []


@pytest.mark.parametrize(("inputs", "path"), [
    ({"values": {"wandb": {"apiKey": "abc123"}}}, "values.wandb.apiKey"),
    ({"stringData": {"HF_TOKEN": "hf_abc"}}, "stringData.HF_TOKEN"),
    ({"metadata": {"annotations": {"note": PEM}}}, "metadata.annotations.note"),
    ({"data": {"key.json": SA_KEY}}, 'data["key.json"]'),
    ({"credentials": {"type": "service_account", "private_key": "k"}}, "credentials"),
])
def test_secrets_plaintext_is_reported_by_path_never_by_value(inputs, path):
    secret = {"type": "kubernetes:core/v1:Secret", "inputs": inputs, "urn": "urn:x::s"}
    [violation] = check(no_plaintext_secrets, secret)
    assert f"`{path}`" in violation.message
    assert all(secret not in violation.message for secret in ("abc123", "hf_abc", "MIIEvQ", '"k"'))


# --- the whole plan ------------------------------------------------------------------------------------------


def compliant_plan() -> dict[str, Any]:
    return plan(cluster(production=True), node_pool("train-0"), node_pool("train-1"), reservation(),
                reserved_pool("big-0", "v6e-res"), cluster_queue(tpu_quota=48))


def test_check_plan_compliant_plan_has_no_violations():
    assert check_plan(parse_plan(compliant_plan())) == []


def test_check_plan_runs_resource_and_stack_rules():
    broken = compliant_plan()
    broken["resources"][1] = patch(broken["resources"][1], {"nodeConfig": {"taints": []}})
    broken["resources"][-1] = cluster_queue(tpu_quota=8)
    assert sorted(v.policy for v in check_plan(parse_plan(broken))) == ["kueue-tpu-quota-matches-pools", "tpu-pool-has-tpu-taint"]


def test_check_plan_production_flag_applies_deletion_rules():
    unlabelled = plan(patch(cluster(), {"deletionProtection": None}))
    assert check_plan(parse_plan(unlabelled)) == []
    assert [v.policy for v in check_plan(parse_plan(unlabelled), production=True)] == ["deletion-protection-in-production"]


# --- the pulumi-policy pack ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pack():
    """policy/tpuplane_pack.py: the wrappers, loaded without constructing the PolicyPack (which blocks)."""
    spec = importlib.util.spec_from_file_location("tpuplane_pack", PACK_DIR / "tpuplane_pack.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {p.name: p for p in module.pulumi_policies()}, module


def _opts() -> PolicyResourceOptions:
    return PolicyResourceOptions(protect=False, ignore_changes=[], delete_before_replace=None, aliases=[],
                                 custom_timeouts=PolicyCustomTimeouts(0, 0, 0), additional_secret_outputs=[])


def test_pack_resource_policy_reports_through_pulumi_policy(pack):
    policies, _ = pack
    res = patch(node_pool(), {"nodeConfig": {"taints": []}})
    # Props reach validators wrapped in pulumi-policy's read-only proxy, as the analyzer server passes them.
    args = ResourceValidationArgs(res["type"], unknown_checking_proxy(res["inputs"]), res["urn"], res["name"],
                                  _opts(), None, config={})
    reported: list[tuple[str, str | None]] = []
    policies["tpu-pool-has-tpu-taint"].validate(args, lambda message, urn=None: reported.append((message, urn)))
    assert reported == [(m.message, None) for m in check(tpu_pool_has_tpu_taint, res)] and len(reported) == 1


def test_pack_secret_policy_walks_proxied_lists(pack):
    policies, _ = pack
    inputs = {"env": [{"name": "A", "apiToken": "plain"}]}
    args = ResourceValidationArgs("kubernetes:apps/v1:Deployment", unknown_checking_proxy(inputs), "urn:x::d", "d",
                                  _opts(), None)
    reported: list[str] = []
    policies["no-plaintext-secrets"].validate(args, lambda message, urn=None: reported.append(message))
    assert len(reported) == 1 and "`env[0].apiToken`" in reported[0]


def test_pack_stack_policy_reads_config_and_reports_the_resource(pack):
    policies, _ = pack
    res = patch(cluster(), {"deletionProtection": False})
    resource = PolicyResource(res["type"], res["inputs"], res["urn"], res["name"], _opts(), None, None, [], {})
    reported: list[tuple[str, str | None]] = []
    report = lambda message, urn=None: reported.append((message, urn))  # noqa: E731
    policy = policies["deletion-protection-in-production"]
    policy.validate(StackValidationArgs([resource], config={}), report)
    assert reported == []
    policy.validate(StackValidationArgs([resource], config={"production": True, "enforcementLevel": "mandatory"}),
                    report)
    assert reported == [("production cluster without deletion protection: set deletionProtection = true.", res["urn"])]
    assert policy.config_schema.properties["production"]["type"] == "boolean"


def test_pack_serves_every_policy_over_grpc():
    """Runs policy/__main__.py as Pulumi would and asks the analyzer server for its policies over gRPC."""
    proc = subprocess.Popen([sys.executable, str(PACK_DIR)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        port = int(proc.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            props = struct_pb2.Struct()
            props.update(patch(node_pool(), {"nodeConfig": {"taints": []}})["inputs"])
            result = stub.Analyze(analyzer_pb2.AnalyzeRequest(
                type="gcp:container/nodePool:NodePool", properties=props, urn="urn:pulumi:dev::tpuplane::np::np",
                name="np"), timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert info.name == "tpuplane"
    assert {p.name for p in info.policies} >= {"tpu-pool-has-tpu-taint", "kueue-tpu-quota-matches-pools",
                                                "deletion-protection-in-production", "no-plaintext-secrets"}
    assert [d.policyName for d in result.diagnostics] == ["tpu-pool-has-tpu-taint"]
