"""Args given as another resource's output meet the rules of plain values when they resolve: one ConfigError naming
the Args field, carried by a RunError (what Pulumi prints without a traceback), before any resource that takes the
value is registered, never showing a secret value. Pulumi's mocks stand in for GCP and Kubernetes (which cannot exist
here); this is the same SDK code path the real engine runs (an exception raised while an input resolves)."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pulumi
import pytest

from tpuplane.components import SharedPathwaysService, TpuSlicePool
from tpuplane.components.errors import InvalidInput
from tpuplane.components.outputs import _masked
from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.errors import ConfigError, Problem

POOL: dict[str, Any] = {"project": "acme-ml", "location": "us-east5", "zone": "us-east5-b", "cluster": "fleet",
                        "tpu_type": "v6e-16", "slices": 2}
SERVICE: dict[str, Any] = {
    "project": "acme-ml", "region": "us-east5", "cluster_name": "fleet", "service_name": "pw", "jax_version": "0.10.0",
    "pool": {"name": "big", "tpu_type": "v5p-128", "slices": 2}, "client_namespaces": ["research"],
    "node_service_account": "fleet-nodes@acme-ml.iam.gserviceaccount.com", "cpu_machine_type": "n2-standard-32"}


def run(program: Callable[[], object]) -> None:
    run_under_mocks(program, {})


def pool(**changes: Any) -> Callable[[], object]:
    return lambda: TpuSlicePool("train", {**POOL, **changes})


def service(**changes: Any) -> Callable[[], object]:
    return lambda: SharedPathwaysService("pw", {**copy.deepcopy(SERVICE), **changes})


@pytest.mark.parametrize("program, path", [
    (pool(cluster=pulumi.Output.from_input("Not_A_Cluster")), "TpuSlicePoolArgs.cluster"),
    (pool(cluster=pulumi.Output.from_input(5)), "TpuSlicePoolArgs.cluster"),
    (pool(service_account=pulumi.Output.from_input("nodes")), "TpuSlicePoolArgs.service_account"),
    (pool(capacity="reservation", reservation=pulumi.Output.from_input("Bad Name")), "TpuSlicePoolArgs.reservation"),
    (service(node_service_account=pulumi.Output.from_input("not an email")),
     "SharedPathwaysServiceArgs.node_service_account"),
    (service(sidecar_image=pulumi.Output.from_input("no spaces allowed")), "SharedPathwaysServiceArgs.sidecar_image"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_an_output_resolving_to_a_bad_value_is_one_config_error_naming_the_field(program, path):
    with pytest.raises(InvalidInput) as refused:
        run(program)

    assert [p.path for p in refused.value.error.problems] == [path]
    assert str(refused.value).startswith(f"invalid {path.split('.')[0]}:\n{path}: got ")


def test_no_node_pool_takes_a_cluster_name_that_resolved_bad(registrations):
    with pytest.raises(InvalidInput):
        run(pool(cluster=pulumi.Output.from_input("Not_A_Cluster")))

    assert registrations == ["tpuplane:index:TpuSlicePool::train"]


def test_a_secret_output_resolving_to_a_bad_value_is_never_shown():
    with pytest.raises(InvalidInput) as refused:
        run(pool(capacity="reservation", reservation=pulumi.Output.secret("Bad SECRETPART Name")))

    [problem] = refused.value.error.problems
    assert "SECRETPART" not in str(refused.value) and problem.given == "[secret]"


def test_a_secret_too_long_to_write_out_is_masked_without_writing_it():
    """`str()` of an integer over 4,300 digits raises: the secret is hidden all the same."""
    problem = Problem("TpuSlicePoolArgs.cluster", 10**5000, "a GKE cluster name")

    assert _masked(problem, 10**5000).given == "[secret]"


def test_an_output_resolving_to_a_good_value_registers_the_pools(registrations):
    run(pool(cluster=pulumi.Output.from_input("fleet")))

    assert [r for r in registrations if r.startswith("gcp:container/nodePool:NodePool")] == [
        "gcp:container/nodePool:NodePool::train-0", "gcp:container/nodePool:NodePool::train-1"]


@pytest.mark.parametrize("changes, path", [
    ({"cluster": object()}, "TpuSlicePoolArgs.cluster"),
    ({"slices": [10**5000]}, "TpuSlicePoolArgs.slices"),
    ({"slices": 10**5000}, "TpuSlicePoolArgs.slices"),
])
def test_a_value_that_is_neither_plain_data_nor_an_output_is_refused_before_anything_registers(
        changes, path, registrations):
    with pytest.raises(ConfigError) as refused:
        run(pool(**changes))

    assert [p.path for p in refused.value.problems] == [path] and registrations == []
