"""The offline runner's Pulumi tuning: same plan byte for byte, SDK left as found, loud on an unchecked SDK."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
import yaml
from pulumi.runtime import resource as sdk_resource

from tpuplane.components import offline, pulumi_tuning

REPO = Path(__file__).resolve().parents[1]
STACKS = REPO / "stacks"


def plan_json(stack: str) -> str:
    """`tpuplane plan --format json` of a stack file, as text."""
    config = yaml.safe_load((STACKS / f"Pulumi.{stack}.yaml").read_text())["config"]
    plan = offline.run_program_file(STACKS / "__main__.py", config, project="tpuplane", stack=stack)
    return json.dumps({**plan.to_json(), "outputs": plan.outputs}, indent=2, sort_keys=True)


@pytest.mark.parametrize("stack", ["dev", "prod", "pathways"])
def test_offline_runner_tuned_plan_is_byte_identical_to_stock_sdk(stack, monkeypatch):
    tuned = plan_json(stack)
    monkeypatch.setattr(offline, "tuned_runtime", contextlib.nullcontext)
    assert plan_json(stack) == tuned


def test_offline_runner_restores_sdk_and_collector_after_a_plan():
    stack_trace, threshold = sdk_resource._get_stack_trace, gc.get_threshold()
    plan_json("dev")
    assert (sdk_resource._get_stack_trace, gc.get_threshold(), gc.isenabled()) == (stack_trace, threshold, True)


def test_offline_runner_keeps_nothing_out_of_the_collector_between_plans():
    """Many plans in one process (tests, fuzzing) must not pin earlier plans' objects in memory."""
    frozen = gc.get_freeze_count()
    plan_json("dev")
    assert gc.get_freeze_count() == frozen


def test_offline_runner_restores_sdk_when_the_program_fails():
    stack_trace = sdk_resource._get_stack_trace

    def failing() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        offline.run_under_mocks(failing, {})
    assert (sdk_resource._get_stack_trace, gc.isenabled()) == (stack_trace, True)


def test_a_failed_program_leaves_nothing_to_register_during_the_next_one(registrations):
    """The SDK raises a program's first failure while its other registrations still wait on their inputs."""
    def failing() -> None:
        pulumi.CustomResource("test:index:Late", "late", {"value": pulumi.Output.from_input(_after(0.1))})
        pulumi.CustomResource("test:index:Bad", "bad", {"value": pulumi.Output.from_input("x").apply(_raise)})

    with pytest.raises(ValueError, match="boom"):
        offline.run_under_mocks(failing, {})
    registrations.clear()
    offline.run_under_mocks(
        lambda: pulumi.CustomResource("test:index:Own", "own", {"value": pulumi.Output.from_input(_after(0.3))}), {})

    assert registrations == ["test:index:Own::own"]


async def _after(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "x"


def _raise(_: object) -> None:
    raise ValueError("boom")


def test_pulumi_tuning_installed_sdk_is_a_checked_one():
    """Fails when the venv moves to a Pulumi SDK nobody read: re-check the internals, then widen the range."""
    pulumi_tuning.check_sdk()
    assert sdk_resource._get_stack_trace().__class__ is pulumi_tuning._empty_stack_trace().__class__


@pytest.fixture
def unchecked_sdk(monkeypatch):
    monkeypatch.setattr(pulumi_tuning.metadata, "version", lambda name: "3.999.0")
    pulumi_tuning.sdk_is_checked.cache_clear()
    yield
    pulumi_tuning.sdk_is_checked.cache_clear()


def test_pulumi_tuning_unchecked_sdk_fails_the_check_loudly(unchecked_sdk):
    with pytest.raises(pulumi_tuning.UncheckedPulumiSdk, match="pulumi 3.999.0 is installed"):
        pulumi_tuning.check_sdk()


def test_pulumi_tuning_unchecked_sdk_keeps_the_sdk_internals(unchecked_sdk):
    """A newer SDK still plans, with its own stack traces: nothing it does is replaced unread."""
    with pulumi_tuning.tuned_runtime():
        assert sdk_resource._get_stack_trace is not pulumi_tuning._empty_stack_trace


def test_offline_runner_dev_plan_loads_no_unused_provider_module():
    """`pulumi_gcp.compute`'s modules (1 s, 60 MiB) load only for stacks that create compute resources."""
    script = ("import sys, yaml; from pathlib import Path; from tpuplane.components.offline import run_program_file; "
              f"cfg = yaml.safe_load(open({str(STACKS / 'Pulumi.dev.yaml')!r}))['config']; "
              f"run_program_file(Path({str(STACKS / '__main__.py')!r}), cfg, project='tpuplane', stack='dev'); "
              "print(sorted(m for m in sys.modules if m.startswith('pulumi_gcp.compute.')))")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
