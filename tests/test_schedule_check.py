"""`tpuplane workload check`: Kueue's flavor assignment and the scheduler's placement, simulated on a stack.

The workloads under tests/workloads/ come from three places: tpuplane's own renderer, the shape
`xpk workload create --dry-run` prints, and a hand-written MaxText-style JobSet whose TPU pods also ask for
cpu and memory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from conftest import pod_spec

from tpuplane.cli.main import app
from tpuplane.cli.plan import read_stack_file
from tpuplane.infra.batch.schedule_check import check_workload, stack_facts
from tpuplane.infra.batch.workload import TpuJob, TpuWorkloadSpec, render_tpu_jobset
from tpuplane.infra.stack import load_stack_config

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = Path(__file__).resolve().parent / "workloads"


@pytest.fixture(scope="module")
def dev_cfg():
    return load_stack_config(read_stack_file(ROOT / "stacks" / "Pulumi.dev.yaml", "tpuplane"))


@pytest.fixture(scope="module")
def dev(dev_cfg):
    return stack_facts(dev_cfg.tpu_pools, dev_cfg.batch)


def workload(name: str) -> dict:
    return yaml.safe_load((WORKLOADS / name).read_text())


def test_check_workload_tpuplane_rendered_jobset_can_run(dev_cfg, dev):
    spec = TpuWorkloadSpec(name="train", jobs=[TpuJob(tpu_type="v6e-16", slices=2, capacity="spot", image="i",
                                                      command="python train.py")])
    result = check_workload(render_tpu_jobset(spec, dev_cfg.batch), dev)

    assert result.ok, result.all_problems()
    [pod_set] = result.pod_sets
    assert (pod_set.flavor, pod_set.pools) == ("tpu-v6e-slice-4x4-spot", ("train-0", "train-1"))


def test_check_workload_refuses_a_priority_class_the_stack_does_not_create(dev_cfg, dev):
    spec = TpuWorkloadSpec(name="train", jobs=[TpuJob(tpu_type="v6e-16", capacity="spot", image="i", command="c")])
    jobset = render_tpu_jobset(spec, dev_cfg.batch)
    jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"

    assert check_workload(jobset, dev).problems == (
        "its kueue.x-k8s.io/priority-class label names WorkloadPriorityClass urgent, which does not exist (there "
        "are: high, low, medium, very-high, very-low): Kueue makes no Workload for it, so it never runs",)


def test_check_workload_xpk_jobset_gets_the_tpu_flavor_and_both_slices(dev):
    result = check_workload(workload("xpk_v6e_16_x2.yaml"), dev)

    assert result.ok, result.all_problems()
    assert result.pod_sets[0].flavor == "tpu-v6e-slice-4x4-spot"
    assert result.pod_sets[0].node_selector["tpuplane.dev/capacity"] == "spot"


def test_check_workload_tpu_pod_requesting_cpu_and_memory_lands_on_tpu_nodes_only(dev):
    """Kueue merges the node labels of every flavor it assigns: the pod must get cpu and memory from its TPU
    flavor, never the CPU pool's `gke-nodepool` label next to its TPU selectors."""
    result = check_workload(workload("handwritten_cpu_memory.yaml"), dev)

    assert result.ok, result.all_problems()
    [pod_set] = result.pod_sets
    assert pod_set.flavor == "tpu-v6e-slice-4x4-spot"
    assert "cloud.google.com/gke-nodepool" not in pod_set.node_selector
    assert pod_set.pools == ("train-0", "train-1")


def test_check_workload_cpu_only_job_takes_the_cpu_flavor_and_pool(dev):
    result = check_workload(workload("cpu_job.yaml"), dev)

    assert result.ok, result.all_problems()
    assert (result.pod_sets[0].flavor, result.pod_sets[0].pools) == ("cpu", ("cpu",))


def test_check_workload_tpu_pod_asking_more_memory_than_its_vm_is_refused_with_the_vms_allocatable(dev):
    manifest = workload("handwritten_cpu_memory.yaml")
    pod_spec(manifest)["containers"][0]["resources"] = {"limits": {"google.com/tpu": 4, "memory": "800Gi"}}

    result = check_workload(manifest, dev)

    assert not result.ok
    assert "asks for 819200Mi memory per pod, its VMs give pods" in result.all_problems()[0]


def test_check_workload_tpu_request_other_than_the_vms_chips_is_refused(dev):
    manifest = workload("xpk_v6e_16_x2.yaml")
    pod_spec(manifest)["containers"][0]["resources"]["limits"]["google.com/tpu"] = 2

    [problem] = check_workload(manifest, dev).all_problems()

    assert "asks for 2 TPU chips per pod, its VMs have 4" in problem


def test_check_workload_job_with_more_pods_than_a_slice_has_vms_is_refused(dev):
    manifest = workload("xpk_v6e_16_x2.yaml")
    manifest["spec"]["replicatedJobs"][0]["replicas"] = 1
    manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] = 8

    [problem] = check_workload(manifest, dev).all_problems()

    assert "one Job has 8 pods, a slice has 4 VMs" in problem


def test_check_workload_more_slices_than_the_quota_holds_is_refused(dev):
    manifest = workload("xpk_v6e_16_x2.yaml")
    manifest["spec"]["replicatedJobs"][0]["replicas"] = 3

    [problem] = check_workload(manifest, dev).all_problems()

    assert "quota too small even with the cohort (google.com/tpu 48 > 32)" in problem


def test_check_workload_selector_no_flavor_offers_is_refused(dev):
    manifest = workload("xpk_v6e_16_x2.yaml")
    pod_spec(manifest)["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "8x8"

    [problem] = check_workload(manifest, dev).all_problems()

    assert problem.startswith("slice-job: no flavor fits")
    assert "tpu-v6e-slice-4x4-spot: node selector/affinity disagrees with its labels" in problem


def test_check_workload_selector_no_pool_carries_names_the_label_the_wanted_value_and_what_pools_carry(dev):
    manifest = workload("xpk_v6e_16_x2.yaml")  # xpk's selector for reserved capacity under autoprovisioning
    pod_spec(manifest)["nodeSelector"]["cloud.google.com/reservation-name"] = "v6e-res"

    [problem] = check_workload(manifest, dev).all_problems()

    assert problem == ("slice-job: no node pool can run its pods: it selects cloud.google.com/reservation-name=v6e-res, "
                       "and pools train-0, train-1 of its flavor carry no cloud.google.com/reservation-name label: "
                       "select a value those pools carry, or add a pool whose nodes carry "
                       "cloud.google.com/reservation-name=v6e-res")


def test_check_workload_capacity_the_stack_lacks_is_refused(dev):
    manifest = workload("xpk_v6e_16_x2.yaml")
    pod_spec(manifest)["nodeSelector"]["tpuplane.dev/capacity"] = "flex-start"

    assert "no flavor fits" in check_workload(manifest, dev).all_problems()[0]


def test_check_workload_unknown_local_queue_names_the_stacks_queues(dev):
    manifest = workload("cpu_job.yaml")
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "research"

    assert check_workload(manifest, dev).problems == (
        "no LocalQueue research in namespace default; the stack has default/multislice-queue",)


def test_check_workload_resource_no_group_covers_is_inadmissible(dev):
    manifest = workload("cpu_job.yaml")
    manifest["spec"]["template"]["spec"]["containers"][0]["resources"].setdefault("limits", {})["nvidia.com/gpu"] = 1

    [problem] = check_workload(manifest, dev).all_problems()

    assert "requests nvidia.com/gpu, which ClusterQueue cluster-queue does not cover" in problem


def test_check_workload_team_quota_counts_what_the_cohort_lends():
    """research owns 3 of 4 v6e-16 spot slices and may borrow 1 more: 4 slices could be admitted, 5 never."""
    cfg = load_stack_config(read_stack_file(ROOT / "stacks" / "Pulumi.pathways.yaml", "tpuplane"))
    facts = stack_facts(cfg.tpu_pools, cfg.batch)
    manifest = workload("xpk_v6e_16_x2.yaml")
    manifest["metadata"]["namespace"] = "research"
    manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "research"
    manifest["spec"]["replicatedJobs"][0]["replicas"] = 4
    assert check_workload(manifest, facts).ok, check_workload(manifest, facts).all_problems()

    manifest["spec"]["replicatedJobs"][0]["replicas"] = 5
    assert "google.com/tpu 80 > 64" in check_workload(manifest, facts).all_problems()[0]


@pytest.fixture
def runner():
    return CliRunner()


def test_workload_check_cli_exits_0_when_every_workload_can_run(runner):
    result = runner.invoke(app, ["workload", "check", str(WORKLOADS / "handwritten_cpu_memory.yaml"),
                                 "--stack", "dev", "--project-dir", str(ROOT)])

    assert result.exit_code == 0, result.output
    assert "maxtext in default via LocalQueue multislice-queue -> ClusterQueue cluster-queue: can run" in result.output


def test_workload_check_cli_exits_1_and_says_why_when_one_cannot(runner, tmp_path):
    manifest = workload("xpk_v6e_16_x2.yaml")
    manifest["spec"]["replicatedJobs"][0]["replicas"] = 3
    path = tmp_path / "big.yaml"
    path.write_text(yaml.safe_dump_all([workload("cpu_job.yaml"), manifest]))

    result = runner.invoke(app, ["workload", "check", str(path), "--stack", "dev", "--project-dir", str(ROOT),
                                 "--format", "json"])

    assert result.exit_code == 1
    checks = json.loads(result.output)
    assert [c["admissible"] for c in checks] == [True, False]
    assert checks[1]["podSets"][0]["problems"][0].startswith("no flavor fits")


def test_workload_check_cli_refuses_a_file_of_no_workloads_with_exit_2(runner, tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("---\n")

    result = runner.invoke(app, ["workload", "check", str(path), "--stack", "dev", "--project-dir", str(ROOT)])

    assert result.exit_code == 2
    assert "one or more JobSet or Job objects" in result.output


def test_workload_check_cli_refuses_another_kind_with_exit_2(runner, tmp_path):
    path = tmp_path / "deploy.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}))

    result = runner.invoke(app, ["workload", "check", str(path), "--stack", "dev", "--project-dir", str(ROOT)])

    assert result.exit_code == 2
    assert "JobSet (jobset.x-k8s.io/v1alpha2) or Job (batch/v1)" in result.output


def test_workload_check_cli_table_wraps_a_long_value_and_never_cuts_it(runner, tmp_path):
    resource = f"{'a' * 60}.{'a' * 60}.example.com/{'b' * 60}"  # a qualified name as long as Kubernetes allows
    path = tmp_path / "long.yaml"
    path.write_text(yaml.safe_dump({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "x", "labels": {"kueue.x-k8s.io/queue-name": "multislice-queue"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
            {"name": "c", "image": "i", "resources": {"requests": {resource: "7"}, "limits": {resource: "7"}}}]}}}}))

    result = runner.invoke(app, ["workload", "check", str(path), "--stack", "dev", "--project-dir", str(ROOT)])

    assert "…" not in result.output
    table = result.output.split("\n  x ")[0]  # the table, before the problems
    assert f"{resource}=7".replace("-", "") in "".join(table.split()).replace("-", "")


@pytest.mark.parametrize("spec", [5, {"parallelism": 3, "template": {"spec": {"containers": "oops"}}},
                                  {"parallelism": -5, "template": {"spec": {"containers": []}}}])
def test_workload_check_cli_refuses_a_malformed_job_with_exit_2_and_no_traceback(runner, tmp_path, spec):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job",
                                    "metadata": {"name": "x", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                                    "spec": spec}))

    result = runner.invoke(app, ["workload", "check", str(path), "--stack", "dev", "--project-dir", str(ROOT)])

    assert result.exit_code == 2
    assert "error:" in result.output and "Traceback" not in result.output


# ---- storage claims and per-job Pathways ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def pathways_cfg():
    return load_stack_config(read_stack_file(ROOT / "stacks" / "Pulumi.pathways.yaml", "tpuplane"))


def test_a_claim_of_another_teams_storage_or_one_the_stack_never_makes_cannot_run(pathways_cfg):
    facts = stack_facts(pathways_cfg.tpu_pools, pathways_cfg.batch, pathways_cfg.storage)
    spec = TpuWorkloadSpec(name="t", namespace="research", queue="research", mounts=["checkpoints:/ckpt"],
                           jobs=[TpuJob(tpu_type="v6e-16", capacity="spot", image="i", command="c")])
    jobset = render_tpu_jobset(spec, pathways_cfg.batch, storage=pathways_cfg.storage)
    assert check_workload(jobset, facts).ok

    evals = {**jobset, "metadata": {**jobset["metadata"], "namespace": "evals",
                                    "labels": {**jobset["metadata"]["labels"], "kueue.x-k8s.io/queue-name": "evals"}}}
    assert check_workload(evals, facts).all_problems() == [
        "slice: mounts storage checkpoints, which is for namespaces research, not evals: add the team to the "
        "storage's teams, or run in one of those namespaces"]
    pod_spec(jobset)["volumes"][1]["persistentVolumeClaim"]["claimName"] = "xpk-pvc"
    assert check_workload(jobset, facts).all_problems() == [
        "slice: mounts claim xpk-pvc, which does not exist (the claims for namespace research: checkpoints, "
        "datasets): the pods would wait for it forever"]


def pathways_job() -> TpuWorkloadSpec:
    return TpuWorkloadSpec(name="pw", jobs=[TpuJob(tpu_type="v6e-16", slices=2, capacity="spot", image="i",
                                                   command="python run.py")],
                           pathways={"gcsScratch": "gs://acme-scratch/pw"})


def test_a_per_job_pathways_jobset_is_a_head_on_the_cpu_flavor_and_workers_on_a_tpu_flavor():
    raw = read_stack_file(ROOT / "stacks" / "Pulumi.dev.yaml", "tpuplane")
    raw["tpuplane:cluster"]["cpuPool"] = {"machineType": "n2-standard-64"}  # the head needs 24 vCPU, 132 GB
    cfg = load_stack_config(raw)

    result = check_workload(render_tpu_jobset(pathways_job(), cfg.batch), stack_facts(cfg.tpu_pools, cfg.batch))

    assert result.ok, result.all_problems()
    head, workers = result.pod_sets
    assert (head.name, head.pods, head.flavor, head.pools) == ("pathways-head", 1, "cpu", ("cpu",))
    assert (workers.name, workers.pods, workers.flavor) == ("worker", 8, "tpu-v6e-slice-4x4-spot")


def test_a_pathways_head_the_cpu_pool_cannot_hold_cannot_run(dev_cfg, dev):
    result = check_workload(render_tpu_jobset(pathways_job(), dev_cfg.batch), dev)

    [problem] = result.all_problems()
    assert problem.startswith("pathways-head: no node pool can run its pods (cpu: asks for 24 cpu per pod")
