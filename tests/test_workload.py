"""TPU workload JobSets: shape, scheduling, failure policy, multi-slice env, name limits and pool checks."""

from __future__ import annotations

import copy
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from conftest import pod_spec

from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.k8s_validation import manifest_errors
from tpuplane.infra.batch.workload import (
    JAX_COORDINATOR_PORT,
    RETRY_EXIT_CODES,
    TPU_METRICS_PORT,
    TpuJob,
    TpuWorkloadSpec,
    max_name_length,
    pod_hostname,
    render_tpu_jobset,
    shell_command,
    workload_problems,
)

TPU_TOLERATION = {"key": "google.com/tpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
QUEUED_TOLERATION = {"key": "cloud.google.com/gke-queued", "operator": "Equal", "value": "true",
                     "effect": "NoSchedule"}

STACK: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"},
    "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "slices": 4, "capacity": "spot"},
                          {"name": "big", "tpuType": "v5p-128", "slices": 2}],
}


@pytest.fixture
def cfg():
    return load_stack_config(copy.deepcopy(STACK))


@pytest.fixture
def team_cfg():
    return load_stack_config(copy.deepcopy(STACK) | {"tpuplane:kueue": {"teams": [
        {"name": "research", "share": 0.5, "priority": "low"}]}})


def stack_with(*pools: dict[str, Any], **extra: Any):
    return load_stack_config(copy.deepcopy(STACK) | {"tpuplane:tpuPools": list(pools)} | extra)


def workload(name="train", slices=2, tpu_type="v6e-16", capacity="spot", **fields) -> TpuWorkloadSpec:
    job = TpuJob(tpu_type=tpu_type, slices=slices, capacity=capacity, image="us-docker.pkg.dev/acme/img:1",
                 command="python train.py", env=fields.pop("env", {}))
    return TpuWorkloadSpec(name=name, jobs=[job], **fields)


def env_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod_spec(jobset)["containers"][0]["env"]}


def test_jobset_one_replicated_job_with_a_child_job_per_slice(cfg):
    js = render_tpu_jobset(workload(slices=3), cfg.batch)
    [rjob] = js["spec"]["replicatedJobs"]
    assert rjob["replicas"] == 3
    job = rjob["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["backoffLimit"]) == (4, 4, 0)


def test_jobset_carries_kueue_queue_and_priority_labels(cfg):
    labels = render_tpu_jobset(workload(priority="high"), cfg.batch)["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "multislice-queue"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"


def test_jobset_pods_select_and_tolerate_the_pool(cfg):
    pod = pod_spec(render_tpu_jobset(workload(), cfg.batch))
    assert pod["nodeSelector"] == {"cloud.google.com/gke-spot": "true",
                                   "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "4x4",
                                   "node.kubernetes.io/instance-type": "ct6e-standard-4t",
                                   "tpuplane.dev/capacity": "spot"}
    assert pod["tolerations"] == [TPU_TOLERATION]
    assert pod["containers"][0]["resources"]["limits"] == {"google.com/tpu": "4"}
    assert (pod["hostNetwork"], pod["dnsPolicy"], pod["priorityClassName"]) == (True, "ClusterFirstWithHostNet",
                                                                               "medium")


def test_jobset_gives_each_slice_its_own_node_pool(cfg):
    js = render_tpu_jobset(workload(), cfg.batch)
    assert js["metadata"]["annotations"] == {"alpha.jobset.sigs.k8s.io/exclusive-topology":
                                             "cloud.google.com/gke-nodepool"}


def test_jobset_fails_fast_unless_exit_code_is_retryable(cfg):
    js = render_tpu_jobset(workload(max_restarts=3, restart_on_exit_codes=[7, 42]), cfg.batch)
    [rule] = js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"]["operator"] == "NotIn"
    assert rule["onExitCodes"]["values"] == sorted({7, *RETRY_EXIT_CODES})
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 3
    assert js["spec"]["failurePolicy"]["rules"][0]["onJobFailureReasons"] == ["PodFailurePolicy"]


def test_jobset_has_no_ttl_unless_asked(cfg):
    """A stack-owned JobSet deleted by its TTL would be re-created (re-run) by the next `pulumi up`."""
    assert "ttlSecondsAfterFinished" not in render_tpu_jobset(workload(), cfg.batch)["spec"]
    assert render_tpu_jobset(workload(ttl_seconds_after_finished=600), cfg.batch)["spec"]["ttlSecondsAfterFinished"] == 600


def test_jobset_multislice_env_points_at_slice_zero_vm_zero(cfg):
    env = env_of(render_tpu_jobset(workload(slices=2, env={"XLA_FLAGS": "--x"}), cfg.batch))
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
    assert env["JAX_COORDINATOR_ADDRESS"] == ("$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
                                              ":$(JAX_COORDINATOR_PORT)")
    assert env["MEGASCALE_NUM_SLICES"] == "2"
    assert env["MEGASCALE_SLICE_ID"] == {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}
    assert env["JAX_PROCESS_COUNT"] == "8"
    assert env["XLA_FLAGS"] == "--x"


def test_jobset_env_defines_names_before_expanding_them(cfg):
    names = list(env_of(render_tpu_jobset(workload(slices=2), cfg.batch)))
    assert names.index("JOBSET_NAME") < names.index("JAX_COORDINATOR_ADDRESS")
    assert names.index("JAX_COORDINATOR_PORT") < names.index("JAX_COORDINATOR_ADDRESS")


def test_jobset_single_slice_sets_no_megascale_env(cfg):
    assert not [k for k in env_of(render_tpu_jobset(workload(slices=1), cfg.batch)) if k.startswith("MEGASCALE")]


def test_jobset_user_env_cannot_shadow_multislice_env():
    problems = workload_problems(workload(env={"MEGASCALE_NUM_SLICES": "9"}))
    assert [p.path for p in problems] == ["jobs[0].env"]


def test_jobset_is_valid_and_deterministic(cfg):
    first = render_tpu_jobset(workload(env={"B": "2", "A": "1"}), cfg.batch)
    assert manifest_errors(first) == []
    second = render_tpu_jobset(workload(env={"A": "1", "B": "2"}), cfg.batch)
    assert yaml.safe_dump(first, sort_keys=True) == yaml.safe_dump(second, sort_keys=True)


def test_max_name_length_keeps_pod_names_with_their_random_suffix_in_63():
    job = TpuJob(name="a-long-replicated-job", tpu_type="v5p-128", slices=12, image="i", command="c")  # 16 VMs
    limit = max_name_length(TpuWorkloadSpec(name="x", jobs=[job]))
    assert len(pod_hostname("x" * limit, job.name, 11, 15) + "-abcde") == 63


def test_jobset_of_the_longest_name_passes_the_jobset_webhooks_name_rules():
    """JobSet's webhook refuses a JobSet whose last pod name, with the 5 random characters Kubernetes adds,
    exceeds 63 characters: the longest name tpuplane allows must pass it."""
    job = TpuJob(name="a-long-replicated-job", tpu_type="v5p-128", slices=12, image="i", command="c")
    name = "x" * max_name_length(TpuWorkloadSpec(name="x", jobs=[job]))
    assert manifest_errors(render_tpu_jobset(TpuWorkloadSpec(name=name, jobs=[job]))) == []
    too_long = render_tpu_jobset(TpuWorkloadSpec(name="x", jobs=[job])) | {"metadata": {"name": name + "x",
                                                                                      "namespace": "default"}}
    assert "pod names generated for this JobSet will exceed 63 characters" in manifest_errors(too_long)[0]


def test_max_name_length_keeps_kueue_workload_name_in_63():
    job = TpuJob(name="a", tpu_type="v6e-16", image="i", command="c")  # short pod names: Kueue's name binds
    limit = max_name_length(TpuWorkloadSpec(name="x", jobs=[job]))
    assert len("jobset-" + "x" * limit + "-abcde") == 63


def test_name_one_over_the_limit_is_refused():
    spec = workload(slices=1)
    ok = workload(name="a" * max_name_length(spec), slices=1)
    too_long = workload(name="a" * (max_name_length(spec) + 1), slices=1)
    assert workload_problems(ok) == []
    [problem] = workload_problems(too_long)
    assert problem.path == "name"


@pytest.mark.parametrize("name", ["Train", "1train", "train_x", "train-"])
def test_dns_invalid_name_is_refused(name):
    assert [p.path for p in workload_problems(workload(name=name))] == ["name"]


def test_unknown_priority_lists_the_priorities():
    [problem] = workload_problems(workload(priority="urgent"))
    assert problem.path == "priority" and "very-high (1000)" in problem.allowed


def test_tpu_type_no_pool_provides_lists_the_pools(cfg):
    with pytest.raises(ConfigError) as exc:
        render_tpu_jobset(workload(tpu_type="tpu7x-8", slices=1, capacity="on-demand"), cfg.batch)
    [problem] = exc.value.problems
    assert problem.path == "jobs[0].tpuType"
    assert "train (v6e-16 x4 for Kueue, spot)" in problem.allowed
    assert "big (v5p-128 x2 for Kueue, on-demand)" in problem.allowed


@pytest.mark.parametrize("tpu_type, machine_type", [("v4-8", None), ("v6e-4", None), ("tpu7x-8", None),
                                                    ("v6e-8", "ct6e-standard-8t")])
def test_several_slices_of_a_single_host_type_are_refused_quoting_gke(tpu_type, machine_type):
    job = TpuJob(tpu_type=tpu_type, machine_type=machine_type, slices=2, image="i", command="c")
    [problem] = workload_problems(TpuWorkloadSpec(name="eval", jobs=[job]))
    assert (problem.path, problem.given) == ("jobs[0].slices", 2)
    assert 'GKE: "Multislice only supports multi-host TPU slice node pools"' in problem.hint


def test_several_slices_of_a_multi_host_type_are_allowed():
    job = TpuJob(tpu_type="v6e-8", slices=2, image="i", command="c")  # xpk's v6e-8: two 4-chip VMs per slice
    assert workload_problems(TpuWorkloadSpec(name="train", jobs=[job])) == []


def test_single_slice_workloads_run_on_each_of_several_single_host_pools():
    """GKE's Multislice rule concerns workloads: a group of single-host slices (prod's eval pools) stays valid and
    serves single-slice jobs."""
    prod = load_stack_config(yaml.safe_load((Path(__file__).parents[1] / "stacks" / "Pulumi.prod.yaml").read_text())
                             ["config"])
    eval_pools = next(p for p in prod.tpu_pools if p.name == "eval")
    assert (eval_pools.slices, eval_pools.spec.single_host) == (2, True)
    job = TpuJob(tpu_type="v6e-8", machine_type="ct6e-standard-8t", capacity="flex-start", image="i", command="c")
    assert workload_problems(TpuWorkloadSpec(name="eval", jobs=[job]), prod.batch) == []


def test_capacity_no_pool_provides_is_refused(cfg):
    [problem] = workload_problems(workload(capacity="on-demand"), cfg.batch)  # v6e-16 exists only as spot
    assert problem.path == "jobs[0].tpuType"


def test_more_slices_than_the_pools_have_is_refused(cfg):
    [problem] = workload_problems(workload(slices=5), cfg.batch)
    assert problem.path == "jobs[0].slices" and "at most 4" in problem.allowed


def test_workload_problems_capacity_the_stack_lacks_names_the_capacities_it_has(cfg):
    """On-demand and reservation nodes differ (own flavors, own labels): a reservation workload never lands on
    the on-demand pool of its shape, and the error says which capacities the stack's pools really have."""
    [problem] = workload_problems(workload(tpu_type="v5p-128", slices=2, capacity="reservation"), cfg.batch)
    assert problem.path == "jobs[0].tpuType"
    assert "big (v5p-128 x2 for Kueue, on-demand)" in problem.allowed


def test_render_tpu_jobset_selects_only_the_nodes_of_its_capacity(cfg):
    spec = workload(tpu_type="v5p-128", slices=2, capacity="on-demand")
    selector = render_tpu_jobset(spec, cfg.batch)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "nodeSelector"]
    assert selector["tpuplane.dev/capacity"] == "on-demand"


def test_unknown_queue_lists_the_stacks_queues(team_cfg):
    [problem] = workload_problems(workload(), team_cfg.batch)
    assert problem.path == "queue" and "research in namespace research" in problem.allowed


def test_team_queue_fills_namespace_and_team_priority(team_cfg):
    js = render_tpu_jobset(workload(queue="research", namespace="research"), team_cfg.batch)
    assert js["metadata"]["namespace"] == "research"
    assert js["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "low"


def test_unknown_tpu_type_is_refused_without_a_stack():
    [problem] = workload_problems(workload(tpu_type="v6e-17"))
    assert problem.path == "jobs[0].tpuType"


def test_job_group_renders_one_replicated_job_per_member(cfg):
    jobs = [TpuJob(name="trainer", tpu_type="v5p-128", capacity="on-demand", image="i", command="train"),
            TpuJob(name="sampler", tpu_type="v6e-16", capacity="spot", slices=2, image="i", command="sample")]
    js = render_tpu_jobset(TpuWorkloadSpec(name="rl", jobs=jobs), cfg.batch)
    assert [(r["name"], r["replicas"]) for r in js["spec"]["replicatedJobs"]] == [("trainer", 1), ("sampler", 2)]
    assert manifest_errors(js) == []


def test_job_group_member_names_must_differ():
    jobs = [TpuJob(tpu_type="v6e-16", image="i", command="a"), TpuJob(tpu_type="v6e-16", image="i", command="b")]
    assert [p.path for p in workload_problems(TpuWorkloadSpec(name="g", jobs=jobs))] == ["jobs[1].name"]


def test_args_are_shell_quoted():
    job = TpuJob(tpu_type="v6e-16", image="i", command="python t.py", args=["--msg=a b; rm -rf /"])
    sh, flag, script = pod_spec(render_tpu_jobset(TpuWorkloadSpec(name="q", jobs=[job])))["containers"][0]["command"]
    assert (sh, flag) == ("/bin/sh", "-c")
    assert "\npython t.py '--msg=a b; rm -rf /'\n" in script


def test_command_runs_in_the_sigterm_forwarding_wrapper():
    job = TpuJob(tpu_type="v6e-16", image="i", command="python train.py # the comment stays harmless")
    script = shell_command(job)[2]
    assert script.startswith("trap ")
    assert "(\ntrap : TERM\npython train.py # the comment stays harmless\n) &\n" in script
    assert script.rstrip().endswith('exit "$code"')


# The wrapper is real shell: run it with /bin/sh. It signals its own process group, so each run gets a session
# of its own (as a container's PID 1 has) and can never signal pytest.
def run_wrapped(command: str, *, term_after: float | None = None) -> int:
    job = TpuJob(tpu_type="v6e-16", image="i", command=command)
    proc = subprocess.Popen(shell_command(job), start_new_session=True, stderr=subprocess.DEVNULL)
    if term_after is not None:
        time.sleep(term_after)
        proc.send_signal(signal.SIGTERM)
    return proc.wait(timeout=20)


def handler_program(marker: Path, code: int) -> str:
    """A program that records SIGTERM in `marker` and exits with `code`; 'ready' once its handler is set."""
    return (f"python3 -c 'import signal, sys, time, pathlib\n"
            f"signal.signal(signal.SIGTERM, lambda *_: (pathlib.Path(\"{marker}\").write_text(\"TERM\"), "
            f"sys.exit({code})))\n"
            f"pathlib.Path(\"{marker}.ready\").touch()\n"
            f"time.sleep(30)'")


def wait_ready(marker: Path) -> None:
    deadline = time.monotonic() + 10
    while not Path(f"{marker}.ready").exists():
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.02)


@pytest.mark.parametrize("shape", ["{}", "cd / && {}", "{} | cat"], ids=["single", "and-list", "pipeline"])
def test_sigterm_reaches_the_program_and_its_exit_code_propagates(tmp_path: Path, shape: str):
    marker = tmp_path / "got-term"
    job = TpuJob(tpu_type="v6e-16", image="i", command=shape.format(handler_program(marker, 7)))
    proc = subprocess.Popen(shell_command(job), start_new_session=True, stderr=subprocess.DEVNULL)
    wait_ready(marker)
    proc.send_signal(signal.SIGTERM)
    # a pipeline's code is its last command's: `cat` got the TERM too; the marker is there because the wrapper
    # exits only after every program of the line has (a container's other processes die with it)
    assert proc.wait(timeout=20) == (7 if shape != "{} | cat" else 128 + signal.SIGTERM)
    assert marker.read_text() == "TERM"


def test_sigterm_kills_a_program_without_handler_with_a_retryable_code():
    assert run_wrapped("sleep 30", term_after=0.3) == 128 + signal.SIGTERM
    assert 128 + signal.SIGTERM in RETRY_EXIT_CODES


@pytest.mark.parametrize("command, code", [("exit 3", 3), ("true", 0), ("false && true", 1)])
def test_wrapper_exits_with_the_programs_code(command, code):
    assert run_wrapped(command) == code


def test_jax_coordinator_port_is_jaxs_cloud_tpu_default():
    """JAX's own constant, read from the installed JAX: the port must be the one JAX itself would use."""
    from jax._src.clusters import cloud_tpu_cluster

    assert str(JAX_COORDINATOR_PORT) == cloud_tpu_cluster.coordinator_port


def test_tpu_container_exposes_the_runtime_metrics_port_gke_reads_duty_cycle_from(cfg):
    """GKE reports a container's TPU duty cycle and memory only when it exposes 8431 (the dashboard's TPU tiles)."""
    [container] = pod_spec(render_tpu_jobset(workload(), cfg.batch))["containers"]
    assert TPU_METRICS_PORT == 8431
    assert {"name": "tpu-metrics", "containerPort": 8431, "protocol": "TCP"} in container["ports"]


def test_slices_a_service_holds_do_not_count(cfg):
    """3 v6e-16 slices, the first 2 held by the Shared Pathways Service: Kueue can admit 1 slice at most."""
    pools = [{"name": "serve", "tpuType": "v6e-16", "slices": 3}]
    stack = stack_with(*pools, **{"tpuplane:pathways": {"name": "pw", "tpuPool": "serve", "slices": 2,
                                                        "jaxVersion": "0.10.0"},
                                  "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b",
                                                       "cpuPool": {"machineType": "n2-standard-32"}}})
    assert workload_problems(workload(slices=1, capacity="on-demand"), stack.batch) == []
    [problem] = workload_problems(workload(slices=2, capacity="on-demand"), stack.batch)
    assert problem.path == "jobs[0].slices" and "at most 1" in problem.allowed


def test_pool_wholly_held_by_a_service_provides_nothing():
    stack = stack_with({"name": "serve", "tpuType": "v6e-16", "slices": 2},
                       **{"tpuplane:pathways": {"name": "pw", "tpuPool": "serve", "jaxVersion": "0.10.0"},
                          "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b",
                                               "cpuPool": {"machineType": "n2-standard-32"}}})
    [problem] = workload_problems(workload(slices=1, capacity="on-demand"), stack.batch)
    assert problem.path == "jobs[0].tpuType"


def test_job_group_slices_add_up_per_flavor(cfg):
    """Two members on the 4 spot v6e-16 slices: 3 + 2 can never be admitted together."""
    jobs = [TpuJob(name="a", tpu_type="v6e-16", capacity="spot", slices=3, image="i", command="c"),
            TpuJob(name="b", tpu_type="v6e-16", capacity="spot", slices=2, image="i", command="c")]
    [problem] = workload_problems(TpuWorkloadSpec(name="g", jobs=jobs), cfg.batch)
    assert problem.path == "jobs[1].slices"
    assert "at most 1" in problem.allowed and "jobs a, b share it" in problem.allowed
    jobs[1] = jobs[1].model_copy(update={"slices": 1})
    assert workload_problems(TpuWorkloadSpec(name="g", jobs=jobs), cfg.batch) == []


def test_team_queue_cannot_ask_for_more_than_it_owns_or_may_borrow():
    stack = load_stack_config(copy.deepcopy(STACK) | {"tpuplane:kueue": {"teams": [
        {"name": "a", "share": 0.5, "borrowingLimit": 0.25}, {"name": "b", "share": 0.5}]}})
    # team a: 2 of the 4 spot slices, and 1 more borrowed at most
    assert workload_problems(workload(slices=3, queue="a", namespace="a"), stack.batch) == []
    [problem] = workload_problems(workload(slices=4, queue="a", namespace="a"), stack.batch)
    assert problem.path == "jobs[0].slices" and "what queue a owns or may borrow" in problem.allowed


def test_more_than_one_queued_member_is_refused():
    jobs = [TpuJob(name="a", tpu_type="v6e-16", capacity="queued", image="i", command="c"),
            TpuJob(name="b", tpu_type="v6e-16", capacity="queued", image="i", command="c")]
    [problem] = workload_problems(TpuWorkloadSpec(name="g", jobs=jobs))
    assert problem.path == "jobs[1].capacity" and "ProvisioningRequest" in problem.hint


def test_queued_workload_carries_the_pools_max_run_duration():
    stack = stack_with({"name": "dws", "tpuType": "v6e-16", "slices": 2, "capacity": "queued",
                        "maxRunDuration": "86400s"})
    js = render_tpu_jobset(workload(capacity="queued"), stack.batch)
    assert js["metadata"]["annotations"]["provreq.kueue.x-k8s.io/maxRunDurationSeconds"] == "86400"
    assert pod_spec(js)["tolerations"] == [TPU_TOLERATION, QUEUED_TOLERATION]


def test_queued_workload_without_a_pool_limit_has_no_max_run_duration():
    stack = stack_with({"name": "dws", "tpuType": "v6e-16", "slices": 2, "capacity": "queued"})
    annotations = render_tpu_jobset(workload(capacity="queued"), stack.batch)["metadata"]["annotations"]
    assert "provreq.kueue.x-k8s.io/maxRunDurationSeconds" not in annotations


def test_machine_type_selects_the_pool_of_that_host():
    """v6e-8 runs on two ct6e-standard-4t VMs or one ct6e-standard-8t VM; the pods must say which."""
    stack = stack_with({"name": "one", "tpuType": "v6e-8", "machineType": "ct6e-standard-8t", "slices": 2})
    eight = TpuJob(tpu_type="v6e-8", machine_type="ct6e-standard-8t", image="i", command="c")
    js = render_tpu_jobset(TpuWorkloadSpec(name="e", jobs=[eight]), stack.batch)
    assert pod_spec(js)["nodeSelector"]["node.kubernetes.io/instance-type"] == "ct6e-standard-8t"
    four = TpuJob(tpu_type="v6e-8", image="i", command="c")  # default host: ct6e-standard-4t, no such pool
    [problem] = workload_problems(TpuWorkloadSpec(name="e", jobs=[four]), stack.batch)
    assert problem.path == "jobs[0].tpuType" and "ct6e-standard-4t" in problem.given


@pytest.mark.parametrize("labels, path", [({"bad key": "v"}, "labels"), ({"team": "bad value"}, "labels.team"),
                                          ({"x" * 64: "v"}, "labels"), ({"Example.com/x": "v"}, "labels"),
                                          ({"kueue.x-k8s.io/queue-name": "other"}, "labels"),
                                          ({"jobset.sigs.k8s.io/jobset-name": "x"}, "labels"),
                                          ({"tpuplane.dev/workload": "x"}, "labels")])
def test_bad_or_reserved_labels_are_refused(labels, path):
    [problem] = workload_problems(workload(labels=labels))
    assert problem.path == path


def test_good_labels_reach_jobset_and_pods(cfg):
    js = render_tpu_jobset(workload(labels={"example.com/team": "ml", "cost-center": ""}), cfg.batch)
    assert js["metadata"]["labels"]["example.com/team"] == "ml"
    assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]["cost-center"] == ""
    assert manifest_errors(js) == []


def test_tpu7x_multi_host_pods_select_their_pools_workload_policy():
    cfg = stack_with({"name": "ir", "tpuType": "tpu7x-16", "slices": 2})
    pod = pod_spec(render_tpu_jobset(workload(tpu_type="tpu7x-16", capacity="on-demand"), cfg.batch))

    assert pod["nodeSelector"]["cloud.google.com/placement-policy-name"] == "fleet-ir-wp"


def test_tpu7x_multi_host_pods_accept_any_pool_groups_workload_policy():
    cfg = stack_with({"name": "ir", "tpuType": "tpu7x-16"}, {"name": "ir2", "tpuType": "tpu7x-16"})
    jobset = render_tpu_jobset(workload(tpu_type="tpu7x-16", slices=1, capacity="on-demand"), cfg.batch)
    terms = pod_spec(jobset)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]

    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": "cloud.google.com/placement-policy-name", "operator": "In", "values": ["fleet-ir-wp", "fleet-ir2-wp"]}]}]
    assert manifest_errors(jobset) == []


def test_single_host_tpu7x_pods_select_no_workload_policy():
    cfg = stack_with({"name": "small", "tpuType": "tpu7x-8"})
    pod = pod_spec(render_tpu_jobset(workload(tpu_type="tpu7x-8", slices=1, capacity="on-demand"), cfg.batch))

    assert "cloud.google.com/placement-policy-name" not in pod["nodeSelector"] and "affinity" not in pod


@pytest.mark.parametrize("field", ["max_restarts", "ttl_seconds_after_finished"])
def test_workload_counts_the_jobset_holds_in_an_int32_refuse_more(field):
    with pytest.raises(ValidationError) as refused:
        workload(**{field: 10**12})

    assert [e["loc"] for e in refused.value.errors()] == [(field,)]
