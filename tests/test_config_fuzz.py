"""Config fuzzing: any stack config either plans cleanly or is rejected with the project's ConfigError.

Hypothesis draws configs over the whole config space (every TPU type, capacity mode, slice counts,
reservation shapes, teams, Pathways settings): valid by construction, a third with one fault injected. A config that loads must plan under
the mocks (GCP and Kubernetes cannot exist here) with every rendered manifest valid against the project's
schemas, every name within its limits, and Kueue's quota equal to the capacity it stands for. Any other
exception is a bug.

A local run draws 60 fresh examples; CI (`.ci/run`) draws 500, the same on every run; a long hunt draws more:
`TPUPLANE_FUZZ_EXAMPLES=5000 pytest tests/test_config_fuzz.py`.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

import pulumi
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpuplane.infra.fleet.catalog import all_tpu_names, allowed_machine_types, resolve_tpu_type
from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.k8s_validation import manifest_errors
from tpuplane.infra.batch.kueue_config import PRIORITIES
from tpuplane.infra.pathways.service import PATHWAYS_GENERATIONS
from tpuplane.infra.naming import COMPUTE_NAME_MAX, DNS_LABEL, GKE_NAME_MAX, K8S_LABEL_VALUE_MAX, SERVICE_ACCOUNT_ID_MAX
from tpuplane.infra.review.policies import check_plan

EXAMPLES = int(os.environ.get("TPUPLANE_FUZZ_EXAMPLES", "60"))
TPU_NAMES = all_tpu_names()
# Rules every plan tpuplane makes must keep; the others depend on choices the config leaves to the user.
INVARIANT_POLICIES = {"tpu-pool-has-tpu-taint", "one-capacity-mode-per-pool", "reservation-fits-pools",
                      "kueue-tpu-quota-matches-pools", "workload-identity-enabled", "no-plaintext-secrets"}

pool_capacities = st.sampled_from(["on-demand", "spot", "flex-start", "queued", "reservation"])


@st.composite
def valid_pools(draw: st.DrawFn) -> list[dict[str, Any]]:
    """1-3 pool groups that satisfy every rule, with any TPU type and capacity mode."""
    names = draw(st.lists(st.sampled_from(["train", "big", "eval", "serve", "p" * 36]), min_size=1, max_size=3,
                          unique=True))
    pools = []
    for name in names:
        tpu_type = draw(st.sampled_from(TPU_NAMES))
        pool: dict[str, Any] = {"name": name, "tpuType": tpu_type, "slices": draw(st.integers(1, 4 if len(name) < 36
                                                                                                  else 9)),
                                "capacity": draw(pool_capacities)}
        if resolve_tpu_type(tpu_type).topology == "2x4" and draw(st.booleans()):
            pool["machineType"] = allowed_machine_types(tpu_type)[-1]  # the single-host 8-chip machine
        if pool["capacity"] == "reservation":
            pool["reservation"] = draw(st.sampled_from([f"res-{name[:20]}", "projects/acme-ml/reservations/ext",
                                                        "projects/x-proj/reservations/ext/reservationBlocks/b1"]))
        if pool["capacity"] in ("flex-start", "queued") and draw(st.booleans()):
            pool["maxRunDuration"] = "86400s"
        pools.append(pool)
    return pools


@st.composite
def valid_configs(draw: st.DrawFn) -> dict[str, Any]:
    pools = draw(valid_pools())
    cfg: dict[str, Any] = {
        "gcp:project": "acme-ml",
        "gcp:region": "us-east5",
        "tpuplane:cluster": {"name": draw(st.sampled_from(["fleet", "f" * 24])), "zone": "us-east5-b",
                             "cpuPool": {"machineType": "n2-standard-64"}},
        "tpuplane:tpuPools": pools,
    }
    # Each pool that names a reservation of this stack gets one that fits it, sometimes with room to spare.
    cfg["tpuplane:reservations"] = [
        {"name": p["reservation"], "tpuType": p["tpuType"], "slices": p["slices"] + draw(st.integers(0, 2)),
         **({"machineType": p["machineType"]} if "machineType" in p else {})}
        for p in pools if p.get("reservation", "").startswith("res-")]
    if draw(st.booleans()):
        names = draw(st.lists(st.sampled_from(["research", "evals", "infra"]), max_size=3, unique=True))
        shares = draw(st.sampled_from({0: [[]], 1: [[1.0], [0.5]], 2: [[0.5, 0.5], [0.25, 0.75]],
                                       3: [[0.25, 0.25, 0.5], [0.1, 0.2, 0.3]]}[len(names)]))
        cfg["tpuplane:kueue"] = {"teams": [{"name": n, "share": share, "priority": draw(st.sampled_from(list(PRIORITIES)))}
                                           for n, share in zip(names, shares)]}
    servable = [p for p in pools if p["capacity"] != "queued"
                and resolve_tpu_type(p["tpuType"], machine_type=p.get("machineType")).generation in PATHWAYS_GENERATIONS]
    if servable and draw(st.booleans()):
        pool = draw(st.sampled_from(servable))
        cfg["tpuplane:pathways"] = {"name": "pw", "tpuPool": pool["name"], "jaxVersion": "0.10.0",
                                    **draw(st.sampled_from([{}, {"slices": 1},
                                                            {"sidecar": {"image": "us-docker.pkg.dev/p/r/s:v1"}}]))}
    return cfg


# One fault at a time, each a rule the config must enforce.
FAULTS: dict[str, Any] = {
    "slices below one": lambda c: c["tpuplane:tpuPools"][0].update(slices=0),
    "unknown TPU type": lambda c: c["tpuplane:tpuPools"][0].update(tpuType="v5p-9"),
    "unknown capacity": lambda c: c["tpuplane:tpuPools"][0].update(capacity="preemptible"),
    "reservation without capacity reservation": lambda c: c["tpuplane:tpuPools"][0].update(
        capacity="spot", reservation="res"),
    "reservation missing": lambda c: (c["tpuplane:tpuPools"][0].update(capacity="reservation"),
                                      c["tpuplane:tpuPools"][0].pop("reservation", None)),
    "8-chip machine on another shape": lambda c: c["tpuplane:tpuPools"][0].update(tpuType="v6e-16",
                                                                                   machineType="ct6e-standard-8t"),
    "pool name too long": lambda c: c["tpuplane:tpuPools"][0].update(name="p" * 39, slices=10),
    "duplicate pool": lambda c: c["tpuplane:tpuPools"].append(dict(c["tpuplane:tpuPools"][0])),
    "cluster name too long": lambda c: c["tpuplane:cluster"].update(name="f" * 25),
    "zone outside region": lambda c: c["tpuplane:cluster"].update(zone="us-central1-a"),
    "typo in a key": lambda c: c["tpuplane:cluster"].update(zonee="us-east5-b"),
    "reservation too small": lambda c: c["tpuplane:tpuPools"].append(
        {"name": "extra", "tpuType": "v5p-128", "slices": 3, "capacity": "reservation", "reservation": "tiny"})
        or c.setdefault("tpuplane:reservations", []).append({"name": "tiny", "tpuType": "v5p-128", "slices": 1}),
    "team shares above capacity": lambda c: c.update({"tpuplane:kueue": {"teams": [
        {"name": "a", "share": 0.75}, {"name": "b", "share": 0.5}]}}),
    "unknown priority": lambda c: c.update({"tpuplane:kueue": {"teams": [
        {"name": "a", "share": 0.5, "priority": "urgent"}]}}),
    "pathways on a missing pool": lambda c: c.update({"tpuplane:pathways": {"name": "pw", "tpuPool": "missing",
                                                                             "jaxVersion": "0.10.0"}}),
}


@st.composite
def stack_configs(draw: st.DrawFn) -> dict[str, Any]:
    """Mostly valid configs; a third of them with one fault injected."""
    cfg = draw(valid_configs())
    if draw(st.integers(0, 2)) == 0:
        FAULTS[draw(st.sampled_from(sorted(FAULTS)))](cfg)
    return cfg


@functools.cache
def _errors_of(manifest_json: str) -> tuple[str, ...]:
    return tuple(manifest_errors(json.loads(manifest_json)))


def manifest_errors_once(manifest: dict[str, Any]) -> tuple[str, ...]:
    """`manifest_errors`, computed once per distinct manifest: most examples render the same Kueue, JobSet
    and RBAC objects, and kubernetes-validate reads its schema files anew on every call."""
    return _errors_of(json.dumps(manifest, sort_keys=True))


def names_out_of_limits(plan) -> list[str]:
    """Every name the plan gives GCP or Kubernetes, checked against the limit of where it lands."""
    bad = []
    for r in plan.resources:
        inputs = r.inputs
        if r.type == "gcp:container/nodePool:NodePool" and not (
                DNS_LABEL.fullmatch(inputs["name"]) and len(inputs["name"]) <= GKE_NAME_MAX):
            bad.append(f"node pool {inputs['name']}")
        if r.type in ("gcp:compute/reservation:Reservation", "gcp:compute/resourcePolicy:ResourcePolicy") \
                and len(inputs["name"]) > COMPUTE_NAME_MAX:
            bad.append(f"{r.type} {inputs['name']}")
        if r.type == "gcp:serviceaccount/account:Account" and len(inputs["accountId"]) > SERVICE_ACCOUNT_ID_MAX:
            bad.append(f"service account {inputs['accountId']}")
    for m in plan.kubernetes_manifests():
        meta = m["metadata"]
        if len(meta["name"]) > K8S_LABEL_VALUE_MAX and m["kind"] not in ("ClusterRole", "ClusterRoleBinding"):
            bad.append(f"{m['kind']} {meta['name']}")
        bad += [f"{m['kind']} {meta['name']} label {k}={v}" for k, v in (meta.get("labels") or {}).items()
                if len(str(v)) > K8S_LABEL_VALUE_MAX]
    return bad


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(stack_configs())
def test_any_stack_config_plans_cleanly_or_fails_with_a_config_error(plan_stack, config):
    try:
        load_stack_config(config)
    except ConfigError:
        # The same config through the real program fails the same way, before any resource exists.
        try:
            plan_stack(config)
        except pulumi.RunError as exc:
            assert isinstance(exc.__cause__, ConfigError)
            return
        raise AssertionError("the program accepted a config that load_stack_config rejects")

    plan = plan_stack(config)

    errors = [e for m in plan.kubernetes_manifests() for e in manifest_errors_once(m)]
    assert errors == []
    assert names_out_of_limits(plan) == []
    violations = [v for v in check_plan(plan) if v.policy in INVARIANT_POLICIES]
    assert violations == []
