"""BatchStack, TpuWorkload, TpuExperiment and ImageCache under Pulumi's mocks.

Kubernetes and GCP cannot exist here: the mocks record each registration (type, inputs, dependencies) instead of
creating anything, which is what these tests assert on.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

import pulumi

from tpuplane.components import BatchStack, BatchStackArgs, ImageCache, ImageCacheArgs, KueuePoolArgs, \
    KueueTeamArgs, TpuExperiment, TpuExperimentArgs, TpuWorkload, TpuWorkloadArgs
from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.review.plan import Plan
from tpuplane.components.workload import jobset_options
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.batch.experiments import trial_id

# Pools this program does not manage (its own Terraform made them), described for Kueue: no stack config at all.
BATCH = BatchStackArgs(
    pools=[KueuePoolArgs(name="train", tpu_type="v6e-16", slices=4, capacity="spot"),
           KueuePoolArgs(name="dws", tpu_type="v6e-16", slices=2, capacity="queued")],
    teams=[KueueTeamArgs(name="research", share=0.6), KueueTeamArgs(name="prod", share=0.4)])
SPOT_JOB = {"tpuType": "v6e-16", "capacity": "spot", "slices": 2, "image": "img:1", "command": "python train.py"}


def run(extra=None, args: BatchStackArgs | None = None) -> tuple[Plan, dict[str, Any]]:
    seen: dict[str, Any] = {}

    def program() -> None:
        batch = seen["batch"] = BatchStack("batch", copy.deepcopy(args or BATCH))
        pulumi.export("local_queues", batch.local_queues)
        pulumi.export("local_queue_namespaces", batch.local_queue_namespaces)
        if extra:
            extra(batch)

    return run_under_mocks(program, {}), seen


def workload_args(workload: dict[str, Any]) -> TpuWorkloadArgs:
    return TpuWorkloadArgs(workload=workload, batch=BATCH)


@pytest.fixture(scope="module")
def plan() -> Plan:
    return run()[0]


def kueue_crs(plan: Plan):
    return [r for r in plan.resources if r.type.startswith("kubernetes:kueue.x-k8s.io/")
            or r.name.startswith("workloadpriorityclass-")]


def test_batch_stack_installs_pinned_charts_in_their_namespaces(plan):
    kueue, jobset = plan.named("kueue").inputs, plan.named("jobset").inputs
    assert (kueue["chart"], kueue["version"], kueue["namespace"], kueue["createNamespace"]) == (
        "oci://registry.k8s.io/kueue/charts/kueue", "0.19.2", "kueue-system", True)
    assert (jobset["chart"], jobset["version"], jobset["namespace"]) == (
        "oci://registry.k8s.io/jobset/charts/jobset", "0.12.0", "jobset-system")
    assert "jobset.x-k8s.io/jobset" in kueue["values"]["managerConfig"]["controllerManagerConfigYaml"]


def test_batch_stack_webhook_gate_runs_after_the_kueue_release(plan):
    [job] = plan.of_type("kubernetes:batch/v1:Job")
    assert plan.named("kueue").urn in job.depends_on
    assert job.inputs["metadata"]["name"] == "kueue-webhook-ready"


def test_batch_stack_every_kueue_object_waits_for_the_webhook_gate(plan):
    [job] = plan.of_type("kubernetes:batch/v1:Job")
    crs = kueue_crs(plan)
    assert len(crs) == 5 + 2 + 2 + 3 + 2  # priorities, flavors, DWS check+config, queues, local queues
    assert all(job.urn in cr.depends_on for cr in crs)


def test_batch_stack_queues_wait_for_flavors_and_local_queues_for_namespaces(plan):
    flavors = {r.urn for r in plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor")}
    for cq in plan.of_type("kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"):
        assert flavors <= set(cq.depends_on)
    lq = plan.named("localqueue-research-research")
    assert plan.named("namespace-research").urn in lq.depends_on


def test_batch_stack_kueue_leaves_the_gate_namespace_unmanaged(plan):
    config = plan.named("kueue").inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    [job] = plan.of_type("kubernetes:batch/v1:Job")
    selector = yaml.safe_load(config)["managedJobsNamespaceSelector"]
    assert job.inputs["metadata"]["namespace"] in selector["matchExpressions"][0]["values"]


def test_batch_stack_creates_queue_objects_with_v1beta2_fields(plan):
    cq = plan.named("clusterqueue-research").inputs
    assert cq["spec"]["cohortName"] == "tpuplane"
    assert cq["spec"]["admissionChecksStrategy"]["admissionChecks"][0]["onFlavors"] == ["tpu-v6e-slice-4x4-queued"]


def test_batch_stack_outputs_local_queues(plan):
    assert plan.outputs["local_queues"] == {"research": "research", "prod": "prod"}
    assert plan.outputs["local_queue_namespaces"] == {"research": "research", "prod": "prod"}


def test_batch_stack_without_teams_has_xpks_queue():
    plan, _ = run(args=BatchStackArgs(pools=BATCH["pools"]))
    assert plan.outputs["local_queues"] == {"default": "multislice-queue"}
    assert plan.named("localqueue-default-multislice-queue").inputs["spec"] == {"clusterQueue": "cluster-queue"}


def test_batch_stack_on_a_cluster_with_kueue_installed_creates_only_the_objects():
    """`install_controllers=False`: no Helm release, no webhook gate, nothing waits on them; the same Kueue
    objects, priorities, team namespaces and queues."""
    installed, _ = run(args=BatchStackArgs(**BATCH, install_controllers=False))
    plan = run()[0]
    assert not installed.of_type("kubernetes:helm.sh/v3:Release") and not installed.of_type("kubernetes:batch/v1:Job")
    assert [r.name for r in kueue_crs(installed)] == [r.name for r in kueue_crs(plan)]
    assert {r.name for r in installed.of_type("kubernetes:core/v1:Namespace")} == {"namespace-prod", "namespace-research"}
    urns = {r.urn for r in installed.resources}
    assert all(set(r.depends_on) <= urns for r in installed.resources)
    assert installed.outputs["local_queues"] == plan.outputs["local_queues"]
    assert not [r.type for r in installed.resources if r.type.startswith("gcp:")]


def test_tpu_workload_waits_for_jobset_release_webhook_and_queues():
    workload = {"name": "train", "queue": "research", "namespace": "research", "jobs": [SPOT_JOB]}
    plan, _ = run(lambda batch: TpuWorkload("train", TpuWorkloadArgs(workload=workload, batch=batch.args),
                                            opts=pulumi.ResourceOptions(depends_on=[batch])))
    [jobset] = plan.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    needed = {plan.named("jobset").urn, plan.of_type("kubernetes:batch/v1:Job")[0].urn,
              plan.named("localqueue-research-research").urn}
    assert needed <= set(jobset.depends_on)
    assert jobset.inputs["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"


def test_tpu_workload_for_a_type_no_pool_provides_fails_before_registering(registrations):
    workload = {"name": "train", "queue": "research", "namespace": "research",
                "jobs": [{"tpuType": "v5p-128", "image": "i", "command": "c"}]}
    with pytest.raises(ConfigError) as exc:
        run(lambda batch: TpuWorkload("train", workload_args(workload)))
    assert exc.value.problems[0].path == "TpuWorkloadArgs.workload.jobs[0].tpuType"
    assert not [r for r in registrations if r.startswith("tpuplane:index:TpuWorkload")]


def test_tpu_experiment_creates_one_jobset_per_trial():
    exp = {"name": "lr", "queue": "prod", "namespace": "prod", "jobs": [SPOT_JOB], "grid": {"lr": [0.1, 0.2, 0.3]}}
    plan, _ = run(lambda batch: TpuExperiment("lr", TpuExperimentArgs(experiment=exp, batch=BATCH)))
    names = sorted(r.inputs["metadata"]["name"] for r in plan.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"))
    assert names == sorted(f"lr-{trial_id({'lr': lr})}" for lr in (0.1, 0.2, 0.3))


def test_stack_owned_jobsets_have_no_ttl():
    """A JobSet deleted by its TTL would vanish on refresh and be re-created (re-run) by the next `pulumi up`."""
    workload = {"name": "train", "queue": "research", "namespace": "research", "jobs": [SPOT_JOB]}
    plan, _ = run(lambda batch: TpuWorkload("train", workload_args(workload),
                                            opts=pulumi.ResourceOptions(depends_on=[batch])))
    [jobset] = plan.of_type("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet")
    assert "ttlSecondsAfterFinished" not in jobset.inputs["spec"]


def test_jobset_options_replace_an_immutable_spec_by_delete_then_create():
    """Options only (no resource is registered): the mocks do not record replaceOnChanges/deleteBeforeReplace."""
    opts = jobset_options(None, None)
    assert (opts.replace_on_changes, opts.delete_before_replace, opts.depends_on) == (["spec"], True, [])


def test_image_cache_is_a_daemonset_child():
    plan, _ = run(lambda batch: ImageCache("cache", ImageCacheArgs(images=["img:1"])))
    [ds] = plan.of_type("kubernetes:apps/v1:DaemonSet")
    assert ds.parent == plan.named("cache").urn
    assert ds.inputs["spec"]["template"]["spec"]["initContainers"][0]["image"] == "img:1"
