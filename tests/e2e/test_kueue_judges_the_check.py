"""Real Kueue judges `tpuplane workload check`: every workload of the corpus (tests/workloads/cases.yaml), alone on
a sandbox of its stack with the stack's Kubernetes half applied by the engine, gets from the real API server,
Kueue and kube-scheduler the outcome the table gives, and the unit tier shows that `workload check` predicts that
same outcome (tests/test_workload_cases.py::test_workload_check_predicts_what_kueue_does):

- admitted to the flavor the check names, its pods placed on node pools the check names;
- held by its admission check (a queued flavor's ProvisioningRequest: nothing here provisions, GKE does);
- pending for the reason the check gives (quota, a flavor whose labels the workload does not select, no queue);
- admitted, but unschedulable on every node (a selector no pool's nodes carry);
- refused by the API server (JobSet's webhook), as the check refuses it.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import config
from kubernetes.client import ApiException

from e2e.kueue_judge import observe, remove, submit
from workload_cases import workload_cases

CASES = workload_cases()


def on_its_stack(admission: str) -> list:
    """The cases of an admission, each on its stack's sandbox (the tier runs the cases of one stack together)."""
    return [pytest.param(case, marks=pytest.mark.sandbox(case.stack), id=case.file.removesuffix(".yaml"))
            for case in CASES if case.admission == admission]


@pytest.mark.parametrize("case", on_its_stack("accepted"))
def test_kueue_does_what_the_table_says(case, sandbox):
    api = config.new_client_from_config(sandbox.kubeconfig)
    expected = case.kueue
    for document in case.documents():
        namespace, name = submit(api, document)
        try:
            outcome = observe(api, namespace, name, document["kind"])
        finally:
            remove(api, namespace, name, document["kind"])
        if "admitted" in expected:
            assert outcome.state == "admitted", outcome
            assert set(outcome.flavors.values()) == {expected["admitted"]}
            assert set().union(*outcome.pools.values()) <= set(expected["pools"]), outcome
        elif "held" in expected:
            assert (outcome.state, set(outcome.flavors.values())) == ("held", {expected["held"]}), outcome
            assert outcome.message.startswith(f"{expected['check']}: Pending"), outcome
        elif "pending" in expected:
            assert outcome.state == "pending" and expected["pending"] in outcome.message, outcome
        else:
            assert outcome.state == "unschedulable" and expected["unschedulable"] in outcome.message, outcome


@pytest.mark.parametrize("case", on_its_stack("refused"))
def test_the_api_server_refuses_what_the_check_refuses(case, sandbox):
    api = config.new_client_from_config(sandbox.kubeconfig)
    with pytest.raises(ApiException) as refused:
        submit(api, case.manifest())
    assert refused.value.status == 422
    quoted = case.says.split("'")[1]  # the offending value both name
    assert f"'{quoted}'" in json.loads(refused.value.body)["message"]
