"""TPU workload JobSets: shape, scheduling, failure policy, multi-slice env, name limits and pool checks."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tpuplane.infra.config import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.k8s_validation import manifest_errors
from tpuplane.infra.workload import (
    RETRY_EXIT_CODES,
    TpuJob,
    TpuWorkloadSpec,
    max_name_length,
    pod_hostname,
    render_tpu_jobset,
    workload_problems,
)

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


def workload(name="train", slices=2, tpu_type="v6e-16", capacity="spot", **fields) -> TpuWorkloadSpec:
    job = TpuJob(tpu_type=tpu_type, slices=slices, capacity=capacity, image="us-docker.pkg.dev/acme/img:1",
                 command="python train.py", env=fields.pop("env", {}))
    return TpuWorkloadSpec(name=name, jobs=[job], **fields)


def pod_spec(jobset: dict[str, Any], i: int = 0) -> dict[str, Any]:
    return jobset["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]


def env_of(jobset: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in pod_spec(jobset)["containers"][0]["env"]}


def test_jobset_one_replicated_job_with_a_child_job_per_slice(cfg):
    js = render_tpu_jobset(workload(slices=3), cfg)
    [rjob] = js["spec"]["replicatedJobs"]
    assert rjob["replicas"] == 3
    job = rjob["template"]["spec"]
    assert (job["parallelism"], job["completions"], job["backoffLimit"]) == (4, 4, 0)


def test_jobset_carries_kueue_queue_and_priority_labels(cfg):
    labels = render_tpu_jobset(workload(priority="high"), cfg)["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "multislice-queue"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"


def test_jobset_pods_select_and_tolerate_the_pool(cfg):
    pod = pod_spec(render_tpu_jobset(workload(), cfg))
    assert pod["nodeSelector"] == {"cloud.google.com/gke-spot": "true",
                                   "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                   "cloud.google.com/gke-tpu-topology": "4x4",
                                   "tpuplane.dev/capacity": "spot"}
    assert pod["tolerations"][0]["key"] == "google.com/tpu"
    assert pod["containers"][0]["resources"]["limits"] == {"google.com/tpu": 4}
    assert (pod["hostNetwork"], pod["dnsPolicy"], pod["priorityClassName"]) == (True, "ClusterFirstWithHostNet",
                                                                               "medium")


def test_jobset_gives_each_slice_its_own_node_pool(cfg):
    js = render_tpu_jobset(workload(), cfg)
    assert js["metadata"]["annotations"] == {"alpha.jobset.sigs.k8s.io/exclusive-topology":
                                             "cloud.google.com/gke-nodepool"}


def test_jobset_fails_fast_unless_exit_code_is_retryable(cfg):
    js = render_tpu_jobset(workload(max_restarts=3, restart_on_exit_codes=[7, 42]), cfg)
    [rule] = js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"]["operator"] == "NotIn"
    assert rule["onExitCodes"]["values"] == sorted({7, *RETRY_EXIT_CODES})
    assert js["spec"]["failurePolicy"]["maxRestarts"] == 3
    assert js["spec"]["failurePolicy"]["rules"][0]["onJobFailureReasons"] == ["PodFailurePolicy"]
    assert js["spec"]["ttlSecondsAfterFinished"] == 43200


def test_jobset_multislice_env_points_at_slice_zero_vm_zero(cfg):
    env = env_of(render_tpu_jobset(workload(slices=2, env={"XLA_FLAGS": "--x"}), cfg))
    assert env["MEGASCALE_COORDINATOR_ADDRESS"] == "$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
    assert env["JAX_COORDINATOR_ADDRESS"] == ("$(JOBSET_NAME)-$(REPLICATED_JOB_NAME)-0-0.$(JOBSET_NAME)"
                                              ":$(JAX_COORDINATOR_PORT)")
    assert env["MEGASCALE_NUM_SLICES"] == "2"
    assert env["MEGASCALE_SLICE_ID"] == {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}
    assert env["JAX_PROCESS_COUNT"] == "8"
    assert env["XLA_FLAGS"] == "--x"


def test_jobset_env_defines_names_before_expanding_them(cfg):
    names = list(env_of(render_tpu_jobset(workload(slices=2), cfg)))
    assert names.index("JOBSET_NAME") < names.index("JAX_COORDINATOR_ADDRESS")
    assert names.index("JAX_COORDINATOR_PORT") < names.index("JAX_COORDINATOR_ADDRESS")


def test_jobset_single_slice_sets_no_megascale_env(cfg):
    assert not [k for k in env_of(render_tpu_jobset(workload(slices=1), cfg)) if k.startswith("MEGASCALE")]


def test_jobset_user_env_cannot_shadow_multislice_env():
    problems = workload_problems(workload(env={"MEGASCALE_NUM_SLICES": "9"}))
    assert [p.path for p in problems] == ["jobs[0].env"]


def test_jobset_is_valid_and_deterministic(cfg):
    first = render_tpu_jobset(workload(env={"B": "2", "A": "1"}), cfg)
    assert manifest_errors(first) == []
    second = render_tpu_jobset(workload(env={"A": "1", "B": "2"}), cfg)
    assert yaml.safe_dump(first, sort_keys=True) == yaml.safe_dump(second, sort_keys=True)


def test_max_name_length_keeps_pod_hostnames_in_63():
    job = TpuJob(name="a-long-replicated-job", tpu_type="v5p-128", slices=12, image="i", command="c")  # 16 VMs
    limit = max_name_length(TpuWorkloadSpec(name="x", jobs=[job]))
    assert len(pod_hostname("x" * limit, job.name, 11, 15)) == 63


def test_max_name_length_keeps_kueue_workload_name_in_63():
    limit = max_name_length(workload(slices=1))  # short hostnames: Kueue's jobset-<name>-<hash> binds
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
        render_tpu_jobset(workload(tpu_type="tpu7x-8", capacity="on-demand"), cfg)
    [problem] = exc.value.problems
    assert problem.path == "jobs[0].tpuType"
    assert "train (v6e-16 x4, spot)" in problem.allowed and "big (v5p-128 x2, on-demand)" in problem.allowed


def test_capacity_no_pool_provides_is_refused(cfg):
    [problem] = workload_problems(workload(capacity="on-demand"), cfg)  # v6e-16 exists only as spot
    assert problem.path == "jobs[0].tpuType"


def test_more_slices_than_the_pools_have_is_refused(cfg):
    [problem] = workload_problems(workload(slices=5), cfg)
    assert problem.path == "jobs[0].slices" and "at most 4" in problem.allowed


def test_reservation_and_on_demand_pools_share_nodes_labels(cfg):
    assert workload_problems(workload(tpu_type="v5p-128", slices=2, capacity="reservation"), cfg) == []


def test_unknown_queue_lists_the_stacks_queues(team_cfg):
    [problem] = workload_problems(workload(), team_cfg)
    assert problem.path == "queue" and "research in namespace research" in problem.allowed


def test_team_queue_fills_namespace_and_team_priority(team_cfg):
    js = render_tpu_jobset(workload(queue="research", namespace="research"), team_cfg)
    assert js["metadata"]["namespace"] == "research"
    assert js["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "low"


def test_unknown_tpu_type_is_refused_without_a_stack():
    [problem] = workload_problems(workload(tpu_type="v6e-17"))
    assert problem.path == "jobs[0].tpuType"


def test_job_group_renders_one_replicated_job_per_member(cfg):
    jobs = [TpuJob(name="trainer", tpu_type="v5p-128", capacity="on-demand", image="i", command="train"),
            TpuJob(name="sampler", tpu_type="v6e-16", capacity="spot", slices=2, image="i", command="sample")]
    js = render_tpu_jobset(TpuWorkloadSpec(name="rl", jobs=jobs), cfg)
    assert [(r["name"], r["replicas"]) for r in js["spec"]["replicatedJobs"]] == [("trainer", 1), ("sampler", 2)]
    assert manifest_errors(js) == []


def test_job_group_member_names_must_differ():
    jobs = [TpuJob(tpu_type="v6e-16", image="i", command="a"), TpuJob(tpu_type="v6e-16", image="i", command="b")]
    assert [p.path for p in workload_problems(TpuWorkloadSpec(name="g", jobs=jobs))] == ["jobs[1].name"]


def test_args_are_shell_quoted():
    job = TpuJob(tpu_type="v6e-16", image="i", command="python t.py", args=["--msg=a b; rm -rf /"])
    js = render_tpu_jobset(TpuWorkloadSpec(name="q", jobs=[job]))
    assert pod_spec(js)["containers"][0]["command"] == ["/bin/sh", "-c", "python t.py '--msg=a b; rm -rf /'"]
