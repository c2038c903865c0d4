"""Specification of `workload list`'s states and rows, from Kueue's and JobSet's objects as the API server returns
them (`recorded_kueue`)."""

from __future__ import annotations

import jsonschema
import pytest

import recorded_kueue as rk
from tpuplane.infra.batch.workload_state import (
    LIST_SCHEMA,
    PENDING_REASONS,
    State,
    find_workload,
    list_json,
    select_rows,
    workload_rows,
    workload_standing,
)

NOW = rk.NOW.timestamp()
QUOTA_MESSAGE = rk.short_of_quota("slice", 32, 32)  # as Kueue writes it for a tpuplane ClusterQueue


@pytest.fixture
def a_train():
    return rk.jobset("a-train", "team-a", queue="team-a", slices=2, ready=2, created=30)


@pytest.fixture
def a_big():
    return rk.jobset("a-big", "team-a", queue="team-a", priority="high", slices=2, suspend=True, created=3)


def state_of(jobset, workload, pods=()):
    return workload_standing(jobset, workload, list(pods))


def test_state_running_when_admitted_with_a_pod_running(a_train):
    workload = rk.workload(a_train, conditions=rk.admitted_conditions("team-a", pods_ready=False),
                           cluster_queue="team-a")

    assert state_of(a_train, workload, [rk.pod(a_train, 0, 0)]).state is State.RUNNING


def test_state_admitted_before_any_pod_runs(a_big):
    a_big["status"]["replicatedJobsStatus"][0]["ready"] = 0
    workload = rk.workload(a_big, conditions=rk.admitted_conditions("team-a", pods_ready=False),
                           cluster_queue="team-a")

    assert state_of(a_big, workload, [rk.pod(a_big, 0, 0, phase="Pending")]).state is State.ADMITTED


def test_state_pending_takes_the_granular_reason_from_kueues_message(a_big):
    workload = rk.workload(a_big, conditions=rk.pending_conditions(QUOTA_MESSAGE))

    standing = state_of(a_big, workload)

    assert (standing.state, standing.reason, standing.message) == (State.PENDING, "WaitingForQuota", QUOTA_MESSAGE)


@pytest.mark.parametrize("message, reason", [
    (rk.refused("slice", 32, f"flavor {rk.FLAVOR} doesn't match node affinity"), "NoMatchingFlavor"),
    (rk.refused("slice", 32, f"untolerated taint {{google.com/tpu present NoSchedule <nil>}} in flavor {rk.FLAVOR}"),
     "NoMatchingFlavor"),
    (rk.beyond_quota("slice", 96, 64), "ExceedsMaxQuota"),
    (rk.short_of_quota("slice", 32, 16), "WaitingForQuota"),
    (f"couldn't assign flavors to pod set slice: insufficient quota for {rk.TPU} in flavor {rk.CPU_FLAVOR}, "
     "previously considered podsets requests (0) + current podset request (16) > maximum capacity (0)",
     "ExceedsMaxQuota"),
    ("LocalQueue team-x doesn't exist", "Misconfigured"),
    ("Workload no longer fits after processing another workload", "Pending"),
], ids=["selector", "taint", "beyond", "short", "only-a-flavor-without-chips", "queue", "other"])
def test_state_pending_reason_per_kueue_message(a_big, message, reason):
    assert state_of(a_big, rk.workload(a_big, conditions=rk.pending_conditions(message))).reason == reason


def test_state_pending_keeps_a_granular_reason_kueue_already_gave(a_big):
    conditions = [rk.condition("QuotaReserved", False, "WaitingForQuota", QUOTA_MESSAGE)]

    assert state_of(a_big, rk.workload(a_big, conditions=conditions)).reason == "WaitingForQuota"


def test_state_pending_while_an_admission_check_is_not_ready(a_big):
    workload = rk.workload(a_big, conditions=[
        rk.condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team-a"),
        rk.condition("Admitted", False, "UnsatisfiedChecks", "The workload has not all checks ready")],
        cluster_queue="team-a", admission_checks=[{"name": "dws-prov", "state": "Pending", "message": "waiting",
                                                   "lastTransitionTime": rk.at(2)}])

    standing = state_of(a_big, workload)

    assert (standing.state, standing.reason) == (State.PENDING, "AdmissionCheckPending")
    assert "dws-prov" in standing.message


RESERVED = rk.condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team-a")
NOT_ADMITTED = rk.condition("Admitted", False, "UnsatisfiedChecks", "The workload has not all checks ready")


def checked(a_big, state):
    return rk.workload(a_big, conditions=[RESERVED, NOT_ADMITTED], cluster_queue="team-a", admission_checks=[
        {"name": "dws-prov", "state": state, "message": "", "lastTransitionTime": rk.at(2)}])


def without_queue(jobset):
    del jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    jobset["status"]["replicatedJobsStatus"][0]["ready"] = 0
    return jobset


# A Workload (or none) that makes each pending reason, as Kueue writes it.
PENDING_CASES = {
    "NoQueue": lambda js: (without_queue(js), None),
    "NoWorkload": lambda js: (js, None),
    "Queued": lambda js: (js, rk.workload(js, conditions=[])),
    "WaitingForQuota": lambda js: (js, rk.workload(js, conditions=rk.pending_conditions(QUOTA_MESSAGE))),
    "ExceedsMaxQuota": lambda js: (js, rk.workload(js, conditions=rk.pending_conditions(
        rk.beyond_quota("slice", 96, 64)))),
    "NoMatchingFlavor": lambda js: (js, rk.workload(js, conditions=rk.pending_conditions(
        rk.refused("slice", 32, f"flavor {rk.FLAVOR} doesn't match node affinity")))),
    "Misconfigured": lambda js: (js, rk.workload(js, conditions=rk.pending_conditions(
        "LocalQueue team-x doesn't exist"))),
    "Pending": lambda js: (js, rk.workload(js, conditions=rk.pending_conditions(
        "Workload no longer fits after processing another workload"))),
    "AdmissionCheckPending": lambda js: (js, checked(js, "Pending")),
    "AdmissionCheckRetry": lambda js: (js, checked(js, "Retry")),
    "AdmissionCheckRejected": lambda js: (js, checked(js, "Rejected")),
    "QuotaReserved": lambda js: (js, checked(js, "Ready")),
}


def test_every_pending_reason_is_documented_and_made_by_a_case():
    assert set(PENDING_CASES) == set(PENDING_REASONS)


@pytest.mark.parametrize("reason", list(PENDING_REASONS))
def test_pending_reason_is_made_as_documented(a_big, reason):
    standing = state_of(*PENDING_CASES[reason](a_big))

    assert (standing.state, standing.reason) == (State.PENDING, reason)


def test_a_check_state_kueue_does_not_have_reads_as_pending(a_big):
    assert state_of(a_big, checked(a_big, "\x1b[31mWeird")).reason == "AdmissionCheckPending"


def test_state_pending_without_a_workload_yet(a_big):
    assert state_of(a_big, None).reason == "NoWorkload"


def test_state_of_a_jobset_kueue_does_not_manage_follows_its_pods(a_train):
    del a_train["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]
    a_train["status"]["replicatedJobsStatus"][0]["ready"] = 0

    assert state_of(a_train, None).reason == "NoQueue"
    assert state_of(a_train, None, [rk.pod(a_train, 0, 0)]).state is State.RUNNING


def test_state_preempted_names_kueues_reason(a_big, a_train):
    preemptor = rk.workload(a_train, conditions=[])
    workload = rk.workload(a_big, conditions=rk.preempted_conditions(preemptor, "team-a", "team-b"))

    standing = state_of(a_big, workload)

    assert (standing.state, standing.reason) == (State.PREEMPTED, "InCohortReclamation")


def test_state_after_readmission_is_running_again(a_train, a_big):
    """Kueue sets Evicted and Preempted back to False when it admits the workload again."""
    conditions = [{**c, "status": "False", "reason": "QuotaReserved", "message": "Previously: " + c["message"]}
                  if c["type"] in ("Evicted", "Preempted") else c
                  for c in rk.preempted_conditions(rk.workload(a_big, conditions=[]), "team-a", "team-b")
                  if c["type"] not in ("QuotaReserved", "Admitted")]
    workload = rk.workload(a_train, conditions=conditions + rk.admitted_conditions("team-a"), cluster_queue="team-a")

    assert state_of(a_train, workload).state is State.RUNNING


@pytest.mark.parametrize("reason", ["PodsReadyTimeout", "Deactivated", "ClusterQueueStopped"])
def test_state_evicted_with_its_reason(a_big, reason):
    workload = rk.workload(a_big, conditions=[rk.condition("Evicted", True, reason, "Evicted by the test's reason"),
                                              rk.condition("QuotaReserved", False, "Pending", "")])

    assert (state_of(a_big, workload).state, state_of(a_big, workload).reason) == (State.EVICTED, reason)


def test_state_finished_and_failed_from_the_jobset(a_train):
    workload = rk.workload(a_train, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a")
    a_train["status"]["conditions"] = [rk.completed()]
    assert state_of(a_train, workload).state is State.FINISHED

    a_train["status"]["conditions"] = [rk.failed()]
    assert (state_of(a_train, workload).state, state_of(a_train, workload).reason) == (State.FAILED, "FailedJobs")


@pytest.mark.parametrize("reason, state", [("Succeeded", State.FINISHED), ("Failed", State.FAILED),
                                           ("OwnerNotFound", State.FAILED)])
def test_state_from_the_workloads_finished_condition(a_train, reason, state):
    workload = rk.workload(a_train, conditions=[rk.condition("Finished", True, reason, "done")],
                           cluster_queue="team-a")

    assert state_of(a_train, workload).state is state


def test_find_workload_by_owner_uid_in_the_jobsets_namespace(a_train, a_big):
    mine = rk.workload(a_train, conditions=[])
    other = rk.workload(a_big, conditions=[])
    elsewhere = {**mine, "metadata": {**mine["metadata"], "namespace": "team-b"}}

    assert find_workload(a_train, [other, elsewhere, mine]) is mine
    assert find_workload(a_train, [other, elsewhere]) is None


# ---------------------------------------------------------------------------------------------------------------
# Rows


@pytest.fixture
def world(a_train, a_big):
    """team-a runs a-train and waits with a-big; team-b's b-burst was preempted by team-a's a-urgent."""
    b_burst = rk.jobset("b-burst", "team-b", queue="team-b", priority="low", suspend=True, created=20)
    a_urgent = rk.jobset("a-urgent", "team-a", queue="team-a", priority="high", created=2)
    urgent = rk.workload(a_urgent, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a")
    done = rk.jobset("a-done", "team-a", queue="team-a", conditions=(rk.completed(),), created=60)
    workloads = [
        rk.workload(a_train, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a"),
        rk.workload(a_big, conditions=rk.pending_conditions(QUOTA_MESSAGE)),
        urgent,
        rk.workload(b_burst, conditions=rk.preempted_conditions(urgent, "team-a", "team-b")),
    ]
    pods = [rk.pod(a_train, s, w) for s in range(2) for w in range(4)] + [rk.pod(a_urgent, 0, 0)]
    queues = [rk.local_queue("team-a", "team-a", "team-a"), rk.local_queue("team-b", "team-b", "team-b")]
    return [a_train, a_big, b_burst, a_urgent, done], workloads, pods, queues


def rows_of(world, **kwargs):
    jobsets, workloads, pods, queues = world
    return workload_rows(jobsets, workloads, pods, queues, NOW, **kwargs)


def test_rows_sorted_by_namespace_then_active_waiting_ended(world):
    assert [(r.namespace, r.name, r.state.value) for r in rows_of(world)] == [
        ("team-a", "a-train", "running"), ("team-a", "a-urgent", "running"), ("team-a", "a-big", "pending"),
        ("team-a", "a-done", "finished"), ("team-b", "b-burst", "preempted")]


def test_row_of_a_running_workload(world):
    row = next(r for r in rows_of(world) if r.name == "a-train")

    assert (row.cluster_queue, row.local_queue, row.priority_class, row.priority, row.flavors) == (
        "team-a", "team-a", "medium", 500, (rk.FLAVOR,))
    assert (row.pods_running, row.pods_total, row.restarts, row.age_seconds) == (8, 8, 0, 30 * 60)


def test_row_of_a_pending_workload_takes_its_team_from_the_local_queue(world):
    row = next(r for r in rows_of(world) if r.name == "a-big")

    assert (row.cluster_queue, row.flavors, row.state_text()) == ("team-a", (), "pending (WaitingForQuota)")


def test_row_of_a_preempted_workload_names_the_preemptors_jobset(world):
    row = next(r for r in rows_of(world) if r.name == "b-burst")

    assert row.state_text() == "preempted by team-a/a-urgent (reclamation within the cohort)"


def test_row_of_a_preempted_workload_whose_preemptor_cannot_be_read_names_its_queue(world):
    jobsets, workloads, pods, queues = world
    team_b_only = [w for w in workloads if w["metadata"]["namespace"] == "team-b"]

    row = next(r for r in workload_rows(jobsets[2:3], team_b_only, pods, queues, NOW))

    assert row.state_text() == "preempted by a workload of ClusterQueue team-a (reclamation within the cohort)"


def test_row_finds_the_preemptor_among_known_workloads_of_other_namespaces(world):
    jobsets, workloads, pods, queues = world
    team_b_only = [w for w in workloads if w["metadata"]["namespace"] == "team-b"]

    row = workload_rows(jobsets[2:3], team_b_only, pods, queues, NOW, known_workloads=workloads)[0]

    assert row.preemption.by == "team-a/a-urgent"


def test_select_rows_by_team_queue_state_and_experiment(world):
    rows = rows_of(world)

    assert [r.name for r in select_rows(rows, team="team-b")] == ["b-burst"]
    assert [r.name for r in select_rows(rows, states=[State.PENDING, State.FINISHED])] == ["a-big", "a-done"]
    assert [r.name for r in select_rows(rows, queue="team-a", states=[State.RUNNING])] == ["a-train", "a-urgent"]
    assert select_rows(rows, experiment="lr") == []


def test_row_carries_the_experiment_label():
    trial = rk.jobset("lr-abc123", "team-a", queue="team-a", experiment="lr")

    row = workload_rows([trial], [], [], [], NOW)[0]

    assert (row.experiment, row.state.value) == ("lr", "pending")


def test_list_json_follows_its_schema(world):
    document = list_json(rows_of(world))

    jsonschema.Draft202012Validator(LIST_SCHEMA).validate(document)
    preempted = next(i for i in document["items"] if i["name"] == "b-burst")
    assert preempted["preemptedBy"] == {"jobset": "team-a/a-urgent", "workloadUID": preempted["preemptedBy"]
                                        ["workloadUID"], "clusterQueue": "team-a", "reason": "InCohortReclamation"}


def test_list_json_schema_refuses_a_row_without_its_state(world):
    document = list_json(rows_of(world))
    del document["items"][0]["state"]

    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(LIST_SCHEMA).validate(document)


def test_rows_survive_objects_of_the_wrong_shape(a_train):
    """A hand-made or half-written object never crashes `list`: what cannot be read is left out."""
    broken = rk.workload(a_train, conditions=[])
    broken["status"] = {"conditions": "nope", "admission": ["x"]}
    broken["spec"]["priority"] = "high"
    a_train["spec"]["replicatedJobs"] = [{"name": "x", "replicas": True}, "junk"]
    a_train["status"]["restarts"] = -3

    row = workload_rows([a_train], [broken], [{"metadata": None}], [{"spec": 3}], NOW)[0]

    assert (row.state, row.priority, row.pods_total, row.restarts, row.flavors) == (State.PENDING, None, 1, 0, ())
