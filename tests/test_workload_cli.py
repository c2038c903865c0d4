"""`tpuplane workload render` and `tpuplane experiment render`, run through typer's test runner."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from tpuplane.cli.main import app as tpuplane_app
from tpuplane.cli.workload import app, experiment_app
from tpuplane.infra.batch.experiments import trial_id
from tpuplane.infra.k8s_validation import manifest_errors

REPO = Path(__file__).resolve().parents[1]
BASE = ["workload", "render", "--tpu-type", "v6e-16", "--image", "img:1", "--command", "python train.py"]

root = typer.Typer()
root.add_typer(app, name="workload")
root.add_typer(experiment_app, name="experiment")


@pytest.fixture
def stack_file(tmp_path: Path) -> Path:
    path = tmp_path / "Pulumi.test.yaml"
    path.write_text(yaml.safe_dump({"config": {
        "gcp:project": "acme-ml", "gcp:region": "us-east5",
        "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
        "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "slices": 2, "capacity": "spot"}]}}))
    return path


def invoke(*args: str):
    return CliRunner().invoke(root, list(args), catch_exceptions=False)


def test_workload_render_prints_a_valid_jobset():
    result = invoke(*BASE, "--slices", "2", "--name", "train", "--priority", "high", "--env", "A=1")
    assert result.exit_code == 0
    jobset = yaml.safe_load(result.stdout)
    assert jobset["metadata"]["name"] == "train"
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "high"
    assert manifest_errors(jobset) == []


def test_workload_render_is_deterministic():
    assert invoke(*BASE, "--env", "B=2", "--env", "A=1").stdout == invoke(*BASE, "--env", "A=1", "--env", "B=2").stdout


def test_workload_render_default_name_says_what_runs():
    assert yaml.safe_load(invoke(*BASE, "--slices", "3").stdout)["metadata"]["name"] == "v6e-16-x3"


@pytest.mark.parametrize("args, message", [(["--priority", "urgent"], "very-high (1000)"),
                                           (["--env", "NOEQUALS"], "KEY=VALUE"),
                                           (["--slices", "0"], "slices"),
                                           (["--name", "Bad_Name"], "name")])
def test_workload_render_bad_input_exits_2_with_the_reason(args, message):
    result = invoke(*BASE, *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_workload_render_checks_against_the_stack_pools(stack_file: Path):
    ok = invoke(*BASE, "--capacity", "spot", "--config", str(stack_file), "--project-dir", str(REPO))
    assert ok.exit_code == 0
    missing = invoke(*BASE, "--config", str(stack_file), "--project-dir", str(REPO))  # on-demand: no such pool
    assert missing.exit_code == 2
    assert "train (v6e-16 x2 for Kueue, spot)" in missing.stderr


def test_experiment_render_prints_one_jobset_per_trial(tmp_path: Path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "lr", "jobs": [{"tpuType": "v6e-16", "image": "i", "command": "c"}],
                                    "grid": {"lr": [1, 2]}}))
    result = invoke("experiment", "render", str(path))
    assert result.exit_code == 0
    jobsets = list(yaml.safe_load_all(result.stdout))
    assert [d["metadata"]["name"] for d in jobsets] == [f"lr-{trial_id({'lr': 1})}", f"lr-{trial_id({'lr': 2})}"]
    assert [d["spec"]["ttlSecondsAfterFinished"] for d in jobsets] == [43200, 43200]  # kubectl users: xpk's 12 h


def test_workload_render_keeps_xpks_ttl_for_kubectl_users():
    assert yaml.safe_load(invoke(*BASE).stdout)["spec"]["ttlSecondsAfterFinished"] == 43200
    assert yaml.safe_load(invoke(*BASE, "--ttl-seconds-after-finished", "60").stdout)["spec"][
        "ttlSecondsAfterFinished"] == 60


def test_workload_render_multislice_on_a_single_host_type_exits_2_quoting_gke():
    result = invoke("workload", "render", "--tpu-type", "v4-8", "--slices", "2", "--image", "i", "--command", "c")
    assert result.exit_code == 2
    assert "Multislice only supports multi-host TPU slice node pools" in " ".join(result.stderr.split())


def test_experiment_render_multislice_on_a_single_host_type_exits_2_quoting_gke(tmp_path: Path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "eval", "jobs": [{"tpuType": "v6e-8", "machineType": "ct6e-standard-8t",
                                                              "slices": 2, "image": "i", "command": "c"}],
                                    "grid": {"lr": [1, 2]}}))
    result = invoke("experiment", "render", str(path))
    assert result.exit_code == 2
    assert "jobs[0].slices" in result.stderr
    assert "Multislice only supports multi-host TPU slice node pools" in " ".join(result.stderr.split())


def test_experiment_render_missing_file_exits_2(tmp_path: Path):
    result = invoke("experiment", "render", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2


# ---- mounts and per-job Pathways ------------------------------------------------------------------------------

PATHWAYS_STACK = ["--config", str(REPO / "stacks" / "Pulumi.pathways.yaml"), "--project-dir", str(REPO)]
RESEARCH = ["--namespace", "research", "--queue", "research", "--capacity", "spot"]


def test_workload_render_mounts_the_stacks_storage_by_name():
    result = invoke(*BASE, *RESEARCH, "--mount", "datasets:/data:ro", "--mount", "checkpoints:/ckpt",
                    *PATHWAYS_STACK)

    assert result.exit_code == 0, result.output
    [jobset] = list(yaml.safe_load_all(result.stdout))
    pod = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["volumeMounts"][1:] == [{"mountPath": "/data", "name": "datasets", "readOnly": True},
                                                        {"mountPath": "/ckpt", "name": "checkpoints"}]
    assert pod["serviceAccountName"] == "tpuplane-workload"


def test_workload_render_mount_help_says_where_a_pathways_workload_mounts_the_storage():
    """With --pathways the program runs in the head's pod, on a CPU node: it gets the storage as the workers do."""
    result = invoke(*BASE, *RESEARCH, "--pathways", "--mount", "checkpoints:/ckpt", *PATHWAYS_STACK)

    assert result.exit_code == 0, result.output
    [jobset] = list(yaml.safe_load_all(result.stdout))
    pods = {r["name"]: r["template"]["spec"]["template"]["spec"] for r in jobset["spec"]["replicatedJobs"]}
    mounted = {(job, c["name"]) for job, pod in pods.items() for c in pod["containers"]
               if {"mountPath": "/ckpt", "name": "checkpoints"} in c.get("volumeMounts", [])}
    assert mounted == {("pathways-head", "jax-tpu"), ("worker", "pathways-worker")}
    help_text = " ".join(CliRunner().invoke(tpuplane_app, ["workload", "render", "--help"]).stdout.split())
    assert "(with --pathways: in every Pathways worker and in the program's container beside the head)" in help_text


@pytest.fixture
def disk_stack(tmp_path) -> list[str]:
    """The prod stack with a read-write Persistent Disk for the default team (it attaches to one node)."""
    document = yaml.safe_load((REPO / "stacks" / "Pulumi.prod.yaml").read_text())
    document["config"]["tpuplane:storage"]["volumes"].append(
        {"name": "scratch", "disk": {"location": "us-east5-b", "disk": "scratch-disk", "size": "500Gi"},
         "teams": ["default"]})
    path = tmp_path / "Pulumi.disk.yaml"
    path.write_text(yaml.safe_dump(document))
    return ["--config", str(path), "--project-dir", str(REPO)]


def render_on_one_v6e_8_vm_with_pathways(stack: list[str], *options: str):
    return CliRunner().invoke(root, ["workload", "render", "--tpu-type", "v6e-8", "--machine-type",
                                     "ct6e-standard-8t", "--capacity", "flex-start", "--pathways", "--gcs-scratch",
                                     "gs://acme-scratch", "--jax-version", "0.9.0", "--mount", "scratch:/scratch",
                                     *options, *stack])


def test_a_read_write_disk_counts_the_pathways_head_that_runs_the_program(disk_stack):
    """One v6e-8 worker, and the program's pod beside the head on a CPU node: two nodes for a one-node disk."""
    result = render_on_one_v6e_8_vm_with_pathways(disk_stack, "--image", "img:1", "--command", "python train.py")

    assert result.exit_code == 2 and "this workload has 2 pods" in " ".join(result.output.split()), result.output


def test_a_read_write_disk_serves_a_headless_pathways_cluster_of_one_worker(disk_stack):
    result = render_on_one_v6e_8_vm_with_pathways(disk_stack, "--headless")

    assert result.exit_code == 0, result.output


def test_workload_render_refuses_a_mount_the_namespace_may_not_use():
    result = CliRunner().invoke(root, [*BASE, "--namespace", "evals", "--queue", "evals", "--capacity", "spot",
                                       "--mount", "checkpoints:/ckpt", *PATHWAYS_STACK])

    assert result.exit_code == 2
    assert "--mount: got 'checkpoints:/ckpt'; allowed: a storage namespace evals may use; checkpoints is for " \
           "research" in result.output


def test_workload_render_pathways_takes_the_stacks_service_images_and_a_folder_of_its_bucket():
    result = invoke(*BASE, *RESEARCH, "--slices", "2", "--name", "llama", "--pathways", *PATHWAYS_STACK)

    assert result.exit_code == 0, result.output
    [jobset] = list(yaml.safe_load_all(result.stdout))
    head = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    rm = next(c for c in head["initContainers"] if c["name"] == "pathways-rm")
    assert rm["image"] == "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.10.0"
    assert "--gcs_scratch_location=gs://acme-ml-shared-pw-pathways/jobs/llama" in rm["args"]
    assert [c["name"] for c in head["containers"]] == ["jax-tpu"]


def test_workload_render_pathways_headless_needs_no_program():
    result = invoke("workload", "render", "--tpu-type", "v6e-16", "--pathways", "--headless",
                    "--gcs-scratch", "gs://acme-scratch", "--jax-version", "0.9.0")

    assert result.exit_code == 0, result.output
    head = list(yaml.safe_load_all(result.stdout))[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert [c["name"] for c in head["spec"]["containers"]] == ["pathways-rm", "pathways-proxy"]


@pytest.mark.parametrize(("args", "message"), [
    (["--headless"], "--headless: got True; allowed: only with --pathways"),
    (["--gcs-scratch", "gs://x-y"], "--gcs-scratch: got 'gs://x-y'; allowed: only with --pathways"),
    (["--pathways"], "pathways.gcsScratch: got None"),
    (["--mount", "datasets:/data:ro"], "render against the stack"),
])
def test_workload_render_refuses_pathways_options_and_mounts_out_of_place(args, message):
    result = CliRunner().invoke(root, [*BASE, *args])

    assert result.exit_code == 2 and message in result.output, result.output


@pytest.mark.parametrize(("mounts", "message"), [
    (["datasets"], "--mount: got 'datasets'; allowed: NAME:/path or NAME:/path:ro"),
    (["datasets:/data:ro", "nope:/x"], "--mount: got 'nope:/x'; allowed: a storage of the stack"),
    (["datasets:/data"], "--mount: got 'datasets:/data'; allowed: datasets:/data:ro"),
])
def test_workload_render_names_the_mount_option_and_the_value_given(mounts, message):
    result = invoke(*BASE, *RESEARCH, *(arg for mount in mounts for arg in ("--mount", mount)), *PATHWAYS_STACK)

    assert result.exit_code == 2 and message in result.output and "mounts" not in result.output, result.output


def test_workload_render_without_a_program_names_the_option():
    result = CliRunner().invoke(root, ["workload", "render", "--tpu-type", "v6e-16"])

    assert result.exit_code == 2
    assert "--image: got None; allowed: a value: this option is required" in result.output
