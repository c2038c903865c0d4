"""Kueue's message for a workload it cannot admit, read back as Kueue's own rule reads its flavor attempts: per
flavor the most severe refusal, per pod set the least severe flavor (they are alternatives), over pod sets the
most severe; a flavor with no quota at all for the resource is no alternative (tpuplane's CPU flavor, first in
every ClusterQueue, holds no chips, so Kueue's message for every waiting TPU pod set names its refusal)."""

from __future__ import annotations

import recorded_kueue as rk
from tpuplane.infra.batch.kueue_messages import granular_reason, holding_refusals, pod_set_messages

SLICE = "couldn't assign flavors to pod set slice: "
CPU_HAS_NO_CHIPS = (f"insufficient quota for {rk.TPU} in flavor cpu, previously considered podsets requests (0) + "
                    "current podset request (32) > maximum capacity (0)")


def test_a_flavor_that_only_lacks_free_quota_is_what_holds_the_pod_set():
    holding = holding_refusals(pod_set_messages(rk.short_of_quota("slice", 32, 16))[0].text)

    assert [(r.reason, r.flavor) for r in holding] == [("WaitingForQuota", rk.FLAVOR)]
    assert granular_reason("Pending", rk.short_of_quota("slice", 32, 16)) == "WaitingForQuota"


def test_a_flavor_without_any_chips_is_set_aside_while_another_flavor_is_named():
    message = rk.refused("slice", 32, f"flavor {rk.FLAVOR} doesn't match node affinity")

    assert [r.flavor for r in holding_refusals(pod_set_messages(message)[0].text)] == [rk.FLAVOR]
    assert granular_reason("Pending", message) == "NoMatchingFlavor"


def test_a_flavor_is_as_bad_as_its_worst_resource():
    """Short of chips but asking for more memory than the flavor could ever hold: that flavor can never admit it."""
    message = (f"{SLICE}{CPU_HAS_NO_CHIPS}, insufficient unused quota for {rk.TPU} in flavor {rk.FLAVOR}, 16 more "
               f"needed, insufficient quota for memory in flavor {rk.FLAVOR}, previously considered podsets requests "
               "(0) + current podset request (4Ti) > maximum capacity (2Ti)")

    assert granular_reason("Pending", message) == "ExceedsMaxQuota"


def test_the_least_severe_flavor_holds_the_pod_set():
    message = (f"{SLICE}flavor a doesn't match node affinity, insufficient unused quota for {rk.TPU} in flavor b, 16 "
               "more needed")

    assert [(r.reason, r.flavor) for r in holding_refusals(pod_set_messages(message)[0].text)] == [
        ("WaitingForQuota", "b")]


def test_the_most_severe_pod_set_names_the_workloads_reason():
    mismatch = rk.refused("slice", 32, "flavor x doesn't match node affinity")
    message = f"{rk.short_of_quota('head', 16, 16)}; {mismatch}"

    assert [p.pod_set for p in pod_set_messages(message)] == ["head", "slice"]
    assert granular_reason("Pending", message) == "NoMatchingFlavor"


def test_a_resource_no_flavor_covers_holds_the_pod_set_whatever_the_flavors_say():
    message = f"{rk.short_of_quota('slice', 32, 16)}, resource example.com/gpu unavailable in ClusterQueue"

    holding = holding_refusals(pod_set_messages(message)[0].text)

    assert [(r.reason, r.flavor) for r in holding] == [("WaitingForQuota", rk.FLAVOR), ("NoMatchingFlavor", "")]
    assert granular_reason("Pending", message) == "NoMatchingFlavor"


def test_a_reason_kueue_gave_is_kept():
    assert granular_reason("WaitingForQuota", rk.beyond_quota("slice", 96, 64)) == "WaitingForQuota"
