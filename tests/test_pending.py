"""Specification of `tpuplane workload why`: the plain explanation of a workload that is not running, from the
objects the API server returns (`recorded_kueue`). Each reason the issue names has its case: quota short (and what
the cohort could lend), no matching node pool, preempted by whom, a provisioning request waiting, an image that
will not pull."""

from __future__ import annotations

import pytest

import recorded_kueue as rk
from tpuplane.infra.batch.cluster_facts import as_manifest, cluster_facts
from tpuplane.infra.batch.kueue import PROVISIONING_CONTROLLER
from tpuplane.infra.batch.kueue_messages import pod_set_messages
from tpuplane.infra.batch.pending import WorkloadFacts, explain
from tpuplane.infra.batch.queue_usage import QueueBook
from tpuplane.infra.batch.schedule_check import check_workload

SHORT = rk.short_of_quota("slice", 32, 32)  # as Kueue writes it for a tpuplane ClusterQueue


@pytest.fixture
def a_big():
    return rk.jobset("a-big", "team-a", queue="team-a", priority="high", slices=2, suspend=True)


@pytest.fixture
def running():
    """team-a's a-train holds team-a's 32 chips; team-b's b-burst holds 32 (16 borrowed from unassigned)."""
    a_train = rk.jobset("a-train", "team-a", queue="team-a", slices=2, ready=2)
    b_burst = rk.jobset("b-burst", "team-b", queue="team-b", priority="low", slices=2, ready=2)
    return [rk.workload(a_train, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a"),
            rk.workload(b_burst, conditions=rk.admitted_conditions("team-b"), cluster_queue="team-b")]


def facts(jobset, workload, **kwargs) -> WorkloadFacts:
    return WorkloadFacts(jobset=jobset, workload=workload, **kwargs)


def kinds(reasons):
    return [r.kind for r in reasons]


def test_pod_set_messages_split_kueues_message_per_pod_set():
    message = (f"couldn't assign flavors to pod set head: flavor cpu doesn't match node affinity; couldn't assign "
               f"flavors to pod set slice: insufficient unused quota for {rk.TPU} in flavor {rk.FLAVOR}, 16 more "
               "needed, untolerated taint {x y NoSchedule <nil>} in flavor cpu")

    assert [(p.pod_set, p.text[:20]) for p in pod_set_messages(message)] == [
        ("head", "flavor cpu doesn't m"), ("slice", "insufficient unused ")]


def test_why_quota_says_how_short_what_the_cohort_could_lend_and_who_holds_it(a_big, running):
    workload = rk.workload(a_big, conditions=rk.pending_conditions(SHORT))
    book = QueueBook(rk.team_queues(), [rk.local_queue("team-a", "team-a", "team-a")])

    reasons = explain(facts(a_big, workload, book=book, workloads=running + [workload]))

    assert kinds(reasons) == ["quota"]
    assert reasons[0].text == (
        f"pod set slice: waiting for quota: it needs 32 more {rk.TPU} in flavor {rk.FLAVOR} than ClusterQueue team-a "
        "can give it now. team-a has 32 nominal, 32 in use (0 borrowed). Its cohort tpuplane could lend 0 more now "
        "(the other ClusterQueues of the cohort have 0 free). Holding tpu-v6e-slice-4x4: team-a/a-train (32, medium, "
        "ClusterQueue team-a), team-b/b-burst (32, low, ClusterQueue team-b). It is admitted once that much quota is "
        "released (a workload finishes or is preempted).")


def test_why_quota_says_what_the_other_queues_could_lend_and_the_borrowing_limit_caps(a_big):
    queues = [rk.cluster_queue("team-a", 32, used=16, borrowing_limit=0), rk.cluster_queue("team-b", 16),
              rk.cluster_queue("unassigned", 16)]
    book = QueueBook(queues, [rk.local_queue("team-a", "team-a", "team-a")])
    workload = rk.workload(a_big, conditions=rk.pending_conditions(rk.short_of_quota("slice", 32, 16)))

    (reason,) = explain(facts(a_big, workload, book=book))

    assert "team-a has 32 nominal, 16 in use (0 borrowed), borrowing limit 0. Its cohort tpuplane could lend 0 " \
           "more now (the other ClusterQueues of the cohort have 32 free; its borrowing limit allows 0)." in reason.text


def test_why_a_workload_kueue_has_not_tried_yet_says_it_is_queued(a_big):
    workload = rk.workload(a_big, conditions=[])
    queues = [rk.cluster_queue("team-a", 32, used=32, admitted=1, pending=3)]
    book = QueueBook(queues, [rk.local_queue("team-a", "team-a", "team-a")])

    assert [r.text for r in explain(facts(a_big, workload, book=book))] == [
        "queued: Kueue has not tried to admit it yet. ClusterQueue team-a has 3 pending workloads; Kueue tries them "
        "in priority order, then oldest first, and tries the next ones when quota frees up."]


def test_why_quota_without_the_queues_readable_still_quotes_kueue(a_big):
    reasons = explain(facts(a_big, rk.workload(a_big, conditions=rk.pending_conditions(SHORT))))

    assert kinds(reasons) == ["quota"]
    assert "needs 32 more google.com/tpu" in reasons[0].text


def test_why_a_workload_bigger_than_the_queue_could_ever_hold(a_big):
    message = rk.beyond_quota("slice", 96, 64)
    book = QueueBook(rk.team_queues(), [rk.local_queue("team-a", "team-a", "team-a")])

    reasons = explain(facts(a_big, rk.workload(a_big, conditions=rk.pending_conditions(message)), book=book))

    assert kinds(reasons) == ["exceeds-quota"]
    assert "asks for 96 google.com/tpu in flavor tpu-v6e-slice-4x4, more than ClusterQueue team-a could ever hold " \
           "there (64" in reasons[0].text
    assert "will never be admitted" in reasons[0].text


def test_why_no_flavor_names_the_selector_what_the_pools_offer_and_the_check(a_big):
    selector = {**rk.V6E_16_LABELS, "cloud.google.com/gke-tpu-topology": "8x8"}
    jobset = rk.jobset("a-big", "team-a", queue="team-a", slices=2, suspend=True, node_selector=selector)
    message = rk.refused("slice", 32, f"flavor {rk.FLAVOR} doesn't match node affinity")
    live = cluster_facts([rk.resource_flavor()], rk.team_queues(), [rk.local_queue("team-a", "team-a", "team-a")],
                         rk.fleet_nodes())
    reasons = explain(facts(jobset, rk.workload(jobset, conditions=rk.pending_conditions(message)),
                            check=check_workload(as_manifest(jobset), live), pools=live.pools))

    assert kinds(reasons) == ["no-flavor", "scheduling-check"]
    assert f"flavor {rk.FLAVOR} does not match its node selector/affinity" in reasons[0].text
    assert "Its node selector: cloud.google.com/gke-tpu-accelerator=tpu-v6e-slice; " \
           "cloud.google.com/gke-tpu-topology=8x8;" in reasons[0].text
    assert reasons[0].text.endswith("train-0, train-1, train-2, train-3 have cloud.google.com/gke-tpu-topology=4x4.")
    assert "no flavor fits" in reasons[1].text


def test_why_preempted_names_the_preemptor(a_big, running):
    a_urgent = rk.jobset("a-urgent", "team-a", queue="team-a", priority="high")
    urgent = rk.workload(a_urgent, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a")
    b_burst = rk.jobset("b-burst", "team-b", queue="team-b", priority="low", slices=2, suspend=True)
    preempted = rk.workload(b_burst, conditions=rk.preempted_conditions(urgent, "team-a", "team-b"))

    reasons = explain(facts(b_burst, preempted, workloads=[urgent, preempted]))

    assert kinds(reasons)[0] == "preempted"
    assert reasons[0].text.startswith(f"preempted by team-a/a-urgent (Workload UID {urgent['metadata']['uid']}) due "
                                      "to reclamation within the cohort")
    assert "quota" in kinds(reasons)  # and why it waits now that it is requeued


def test_why_a_provisioning_request_waiting_for_capacity(a_big):
    message = "Waiting for resources. Currently there are not enough resources available to fulfill the request."
    workload = rk.workload(a_big, conditions=[
        rk.condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team-a"),
        rk.condition("Admitted", False, "UnsatisfiedChecks", "The workload has not all checks ready")],
        cluster_queue="team-a", admission_checks=[{"name": "dws-prov", "state": "Pending", "message": message,
                                                   "lastTransitionTime": rk.at(2)}])

    reasons = explain(facts(a_big, workload, admission_checks={"dws-prov": PROVISIONING_CONTROLLER}))

    assert kinds(reasons) == ["provisioning"]
    assert "admission check dws-prov (Pending) waits for its ProvisioningRequest" in reasons[0].text
    assert reasons[0].text.endswith(message)


def test_why_another_admission_check(a_big):
    workload = rk.workload(a_big, conditions=[
        rk.condition("QuotaReserved", True, "QuotaReserved", "Quota reserved in ClusterQueue team-a")],
        cluster_queue="team-a", admission_checks=[{"name": "budget", "state": "Retry", "message": "over budget",
                                                   "lastTransitionTime": rk.at(2)}])

    assert [r.text for r in explain(facts(a_big, workload))] == [
        "quota is reserved; admission check budget is Retry: over budget."]


def test_why_an_image_that_will_not_pull_groups_its_pods():
    jobset = rk.jobset("a-typo", "team-a", queue="team-a", image="us-docker.pkg.dev/acme/trian:1")
    waiting = {"reason": "ImagePullBackOff",
               "message": 'Back-off pulling image "us-docker.pkg.dev/acme/trian:1": ErrImagePull: not found'}
    pods = [rk.pod(jobset, 0, w, phase="Pending", waiting=waiting) for w in range(4)]
    workload = rk.workload(jobset, conditions=rk.admitted_conditions("team-a", pods_ready=False),
                           cluster_queue="team-a")

    reasons = explain(facts(jobset, workload, pods=pods))

    assert kinds(reasons) == ["image-pull"]
    assert reasons[0].text.startswith("image us-docker.pkg.dev/acme/trian:1 will not pull (ImagePullBackOff: "
                                      'Back-off pulling image "us-docker.pkg.dev/acme/trian:1": ErrImagePull: not '
                                      "found) on 4 pods (e.g. a-typo-slice-0-0-")


def test_why_pods_kube_scheduler_cannot_place(a_big):
    jobset = rk.jobset("a-train", "team-a", queue="team-a")
    message = "0/19 nodes are available: 3 node(s) had untolerated taint, 16 Insufficient google.com/tpu."
    pods = [rk.pod(jobset, 0, w, phase="Pending", unschedulable=message) for w in range(4)]
    workload = rk.workload(jobset, conditions=rk.admitted_conditions("team-a", pods_ready=False),
                           cluster_queue="team-a")

    reasons = explain(facts(jobset, workload, pods=pods, pools=cluster_facts([], [], [], rk.fleet_nodes()).pools))

    assert kinds(reasons) == ["unschedulable"]
    assert reasons[0].text.startswith("kube-scheduler cannot place 4 pods (e.g. a-train-slice-0-0-")
    assert message in reasons[0].text and "Node pools: cpu-np has no cloud.google.com/gke-tpu-accelerator" \
        in reasons[0].text


def test_why_a_queue_that_does_not_exist(a_big):
    workload = rk.workload(a_big, conditions=[rk.condition("QuotaReserved", False, "Inadmissible",
                                                           "LocalQueue team-a doesn't exist")])

    reasons = explain(facts(a_big, workload))

    assert kinds(reasons) == ["queue"]
    assert reasons[0].text.startswith("LocalQueue team-a doesn't exist: Kueue cannot queue it.")


def test_why_evicted_explains_the_eviction_reason(a_big):
    workload = rk.workload(a_big, conditions=[
        rk.condition("Evicted", True, "PodsReadyTimeout", "Exceeded the PodsReady timeout default/a-big"),
        rk.condition("QuotaReserved", False, "Pending", "")])

    reasons = explain(facts(a_big, workload))

    assert reasons[0].kind == "evicted"
    assert "not all ready within Kueue's waitForPodsReady timeout" in reasons[0].text


def test_why_a_jobset_kueue_does_not_manage(a_big):
    del a_big["metadata"]["labels"]["kueue.x-k8s.io/queue-name"]

    assert kinds(explain(facts(a_big, None))) == ["not-managed"]


def test_why_before_kueue_made_a_workload(a_big):
    assert kinds(explain(facts(a_big, None))) == ["no-workload"]


def test_why_kueue_makes_no_workload_for_a_priority_class_that_does_not_exist(a_big):
    a_big["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    live = cluster_facts([rk.resource_flavor()], rk.team_queues(), [rk.local_queue("team-a", "team-a", "team-a")],
                         rk.fleet_nodes(), rk.priority_classes())

    reasons = explain(facts(a_big, None, check=check_workload(as_manifest(a_big), live)))

    assert [r.text for r in reasons] == [
        "Kueue has made no Workload for it: the scheduling check below says why.",
        "the scheduling check on the cluster's queues and node pools: its kueue.x-k8s.io/priority-class label names "
        "WorkloadPriorityClass urgent, which does not exist (there are: high, low, medium): Kueue makes no Workload "
        "for it, so it never runs"]


def test_why_a_running_workload_is_not_waiting():
    jobset = rk.jobset("a-train", "team-a", queue="team-a", ready=1)
    workload = rk.workload(jobset, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a")

    reasons = explain(facts(jobset, workload, pods=[rk.pod(jobset, 0, w) for w in range(4)]))

    assert [r.text for r in reasons] == ["it is not waiting: it is running (4 pods running)."]


def test_why_a_failed_workload_says_how_it_ended():
    jobset = rk.jobset("a-train", "team-a", queue="team-a", conditions=(rk.failed(),))

    assert [r.text for r in explain(facts(jobset, None))] == [
        "it has failed: FailedJobs - jobset failed due to one or more job failures."]
