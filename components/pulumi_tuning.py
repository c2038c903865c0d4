"""How the offline runner drives Pulumi's Python runtime faster, with the same program and the same output.

Only `tpuplane.components.offline` uses this; `pulumi up` never does. Each setting changes how much work
the interpreter and the SDK do around a registration, never what is registered:
- garbage collection: off while the program runs. A plan allocates millions of short-lived futures and
  protobufs, and every default collection rescans the SDKs' classes and every resource still pending (30%
  of a 1,024-slice plan); reference counting frees almost all of it anyway, and the cycles left (about
  10 MiB at 1,024 slices) are collected once the collector is back on. At interpreter exit everything is
  frozen, so finalization does not scan the whole heap one last time (0.4 s of `plan --stack dev`).
  Freezing before each plan instead would be as fast but would keep every earlier plan's cycles forever.
- source stack traces: the SDK walks the Python stack at each registration to tell the engine where the
  resource was declared; the mock monitor never reads it, so the runtime gets the empty trace the SDK
  itself sends when it finds no user frame.

The second reaches into an SDK internal (`pulumi.runtime.resource._get_stack_trace`), checked against
`CHECKED_PULUMI`: on any other SDK version plans run without it, and `check_sdk()`, which
tests/test_offline_runner.py calls, fails loudly.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import gc
from importlib import metadata
from typing import Iterator

from packaging.specifiers import SpecifierSet
from packaging.version import Version

# The Pulumi Python SDK versions whose internals this module was read against.
CHECKED_PULUMI = SpecifierSet(">=3.150,<3.273")


class UncheckedPulumiSdk(RuntimeError):
    """The installed Pulumi SDK is not one this module was checked against."""


@functools.cache
def sdk_is_checked() -> bool:
    return Version(metadata.version("pulumi")) in CHECKED_PULUMI


def check_sdk() -> None:
    """Fail with the installed and checked versions unless the SDK is one whose internals are known here."""
    if not sdk_is_checked():
        raise UncheckedPulumiSdk(
            f"pulumi {metadata.version('pulumi')} is installed; components/pulumi_tuning.py was checked against "
            f"pulumi{CHECKED_PULUMI}: re-check `pulumi.runtime.resource._get_stack_trace` and widen CHECKED_PULUMI")


def _empty_stack_trace():
    from pulumi.runtime.proto import source_pb2

    return source_pb2.StackTrace()


@functools.cache
def _freeze_at_exit() -> None:
    """Frozen objects are skipped by the collection interpreter finalization runs over the whole heap."""
    atexit.register(gc.freeze)


@contextlib.contextmanager
def tuned_runtime() -> Iterator[None]:
    """Run the enclosed Pulumi program with the settings above; restore the SDK and the collector after.

    On an SDK outside CHECKED_PULUMI the plan still runs, with the SDK's own stack traces (slower, same
    output); the test of `check_sdk` is what fails, loudly.
    """
    from pulumi.runtime import resource as sdk_resource

    _freeze_at_exit()
    collecting = gc.isenabled()
    gc.disable()
    stack_trace = sdk_resource._get_stack_trace
    if sdk_is_checked():
        sdk_resource._get_stack_trace = _empty_stack_trace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = stack_trace
        if collecting:
            gc.enable()
