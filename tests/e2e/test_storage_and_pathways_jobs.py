"""A stack's storage and a per-job Pathways cluster on a real control plane: the prod stack's Kubernetes half applied
by the real Pulumi engine, then what Kubernetes, Kueue and the scheduler make of it.

- every claim the stack's storage renders binds its volume (kube-controller-manager's volume binder; no CSI driver
  is needed to bind, only to mount, and kwok plays the kubelets);
- each team's service account exists, so pods that run as it are admitted by the API server;
- a per-job Pathways JobSet (`workload render --pathways`) is admitted by Kueue as one workload, its head on the
  CPU pool and its workers on one slice's node pool, mounting the stack's checkpoint bucket.
"""

from __future__ import annotations

import time
import pytest
from kubernetes import client, config

from e2e.conftest import PROD
from e2e import kueue_judge
from e2e.conftest import stack_source
from tpuplane.infra.batch.workload import TpuJob, TpuWorkloadSpec, render_tpu_jobset
from tpuplane.sandbox.layout import SandboxState

BIND_TIMEOUT = 60.0


pytestmark = pytest.mark.sandbox(PROD)


@pytest.fixture
def prod(sandbox) -> tuple[SandboxState, client.ApiClient]:
    """The prod stack's sandbox (shared by the session), its Kubernetes half applied by the engine."""
    return sandbox, config.new_client_from_config(sandbox.kubeconfig)


def claims(api: client.ApiClient) -> dict[tuple[str, str], str]:
    items = client.CoreV1Api(api).list_persistent_volume_claim_for_all_namespaces(
        label_selector="app.kubernetes.io/managed-by=tpuplane").items
    return {(c.metadata.namespace, c.metadata.name): c.status.phase for c in items}


def test_every_claim_of_the_stacks_storage_binds_its_volume(prod):
    state, api = prod
    source = stack_source("prod")
    expected = {(namespace, s.name) for s in source.config.storage.storages for namespace in s.namespaces}
    assert expected == {("default", "checkpoints"), ("default", "reference")}

    deadline = time.monotonic() + BIND_TIMEOUT
    while set(claims(api).values()) != {"Bound"} and time.monotonic() < deadline:
        time.sleep(0.5)
    assert claims(api) == {claim: "Bound" for claim in expected}
    volumes = {v.metadata.name: v for v in client.CoreV1Api(api).list_persistent_volume().items}
    assert volumes["checkpoints.default"].spec.claim_ref.name == "checkpoints"
    assert volumes["reference.default"].status.phase == "Bound"


def test_each_team_has_the_service_account_its_jobs_run_as(prod):
    _, api = prod
    account = client.CoreV1Api(api).read_namespaced_service_account("tpuplane-workload", "default")

    assert account.metadata.labels == {"app.kubernetes.io/managed-by": "tpuplane"}


def test_kueue_admits_a_per_job_pathways_jobset_head_on_the_cpu_pool_workers_on_one_slice(prod):
    _, api = prod
    cfg = stack_source("prod").config
    spec = TpuWorkloadSpec(name="llama", mounts=["checkpoints:/ckpt"],
                           jobs=[TpuJob(tpu_type="v5p-128", capacity="reservation", image="us-docker.pkg.dev/acme/t:1",
                                        command="python -m trainer")],
                           pathways={"gcsScratch": "gs://acme-ml-checkpoints/pathways/llama"})
    jobset = render_tpu_jobset(spec, cfg.batch, storage=cfg.storage)

    namespace, name = kueue_judge.submit(api, jobset)
    try:
        outcome = kueue_judge.observe(api, namespace, name)
    finally:
        kueue_judge.remove(api, namespace, name)

    assert outcome.state == "admitted", outcome.message
    assert outcome.flavors == {"pathways-head": "cpu", "worker": "tpu-v5p-slice-4x4x4-reservation"}
    assert outcome.pools["pathways-head"] == {"cpu"}
    [pool] = outcome.pools["worker"]
    assert pool.startswith("pretrain-")
