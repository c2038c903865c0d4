"""Validated once, shown by counting: planning an example stack reads each section once and runs each rule once per
thing it judges; the components take the Args the stack read and do not read them again. (Calls are counted with a
profile hook, whatever name a module imported a function under.)"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from conftest import STACKS, stack_file_config

from tpuplane.components.offline import run_program_file
from tpuplane.infra.batch.args import platform_problems
from tpuplane.infra.fleet.cluster import cluster_problems
from tpuplane.infra.fleet.pools import pool_problems
from tpuplane.infra.fleet.reservations import reservation_problems
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.pathways.config import pathways_section_problems, service_problems
from tpuplane.infra.pathways.proxy import janitor_problems
from tpuplane.infra.storage.args import team_storage_problems

RULES = {f.__code__: f.__name__ for f in (cluster_problems, pool_problems, reservation_problems, platform_problems,
                                          service_problems, pathways_section_problems, janitor_problems,
                                          team_storage_problems)}
MODEL_VALIDATE = ConfigModel.model_validate.__func__.__code__


@contextmanager
def counted_calls() -> Iterator[Counter]:
    """Calls of the rule functions, and reads of each model (`model_validate`, by model), while the block runs."""
    counts: Counter = Counter()

    def profile(frame, event, _arg):
        if event == "call":
            if frame.f_code in RULES:
                counts[RULES[frame.f_code]] += 1
            elif frame.f_code is MODEL_VALIDATE and issubclass(frame.f_locals["cls"], ConfigModel):
                counts[f"read {frame.f_locals['cls'].__name__}"] += 1

    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)


# What each example stack declares: its sections, pool groups, reservations, janitors and sidecar builds.
EXPECTED = {
    "dev": {"read StackRoot": 1, "read ClusterSpec": 1, "cluster_problems": 1, "read SlicePoolSpec": 1,
            "pool_problems": 1, "read BatchPlatform": 1, "platform_problems": 1,
            "read TeamStorageSpec": 1, "team_storage_problems": 1, "read DashboardSpec": 1},
    "prod": {"read StackRoot": 1, "read ClusterSpec": 1, "cluster_problems": 1, "read SlicePoolSpec": 2,
             "pool_problems": 2, "read ReservationSpec": 1, "reservation_problems": 1, "read BatchPlatform": 1,
             "platform_problems": 1, "read TeamStorageSpec": 1, "team_storage_problems": 1, "read DashboardSpec": 1},
    "pathways": {"read StackRoot": 1, "read ClusterSpec": 1, "cluster_problems": 1, "read SlicePoolSpec": 2,
                 "pool_problems": 2, "read PathwaysConfig": 1, "service_problems": 1,
                 "pathways_section_problems": 1, "read BatchPlatform": 1, "platform_problems": 1,
                 "read JanitorSpec": 2, "janitor_problems": 2, "read SidecarBuild": 1,
                 "read TeamStorageSpec": 1, "team_storage_problems": 1, "read DashboardSpec": 1},
}


@pytest.mark.parametrize("stack", sorted(EXPECTED))
def test_planning_an_example_stack_reads_each_section_once_and_runs_each_rule_once(stack):
    config = stack_file_config(stack)
    with counted_calls() as counts:
        run_program_file(STACKS / "__main__.py", config, project="tpuplane", stack=stack)
    assert dict(counts) == EXPECTED[stack]
