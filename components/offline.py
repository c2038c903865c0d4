"""Run the real Pulumi program under Pulumi's mocks and record every resource it registers.

This is the engine of `tpuplane plan`, of the component tests and of the benchmark: the program in `stacks/`
runs exactly as `pulumi up` would run it, but the resource monitor is an in-process mock that records each
registration (type, name, parent, inputs, dependencies) instead of calling GCP or Kubernetes. Nothing here
needs credentials, a network, or the Pulumi CLI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import runpy
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

import pulumi
from pulumi.runtime import mocks as _mocks
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime import settings as _settings
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

from tpuplane.components.pulumi_tuning import tuned_runtime
from tpuplane.infra.review.plan import CLUSTER, Plan, PlannedResource


def normalize(value: Any) -> Any:
    """Engine values -> plain JSON: mocks deliver every number as a float; 4.0 becomes 4 again."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [normalize(v) for v in value]
    return value


# Outputs that real providers compute and that downstream resources read; everything else echoes inputs.
_COMPUTED_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {
    CLUSTER: lambda name, inputs: {
        "endpoint": "203.0.113.10",
        "masterAuth": {"clusterCaCertificate": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="},
        "selfLink": f"https://container.googleapis.com/v1/projects/{inputs.get('project', 'p')}"
                    f"/locations/{inputs.get('location')}/clusters/{inputs.get('name', name)}",
    },
    "gcp:serviceaccount/account:Account": lambda name, inputs: {
        "email": f"{inputs.get('accountId', name)}@{inputs.get('project', 'project')}.iam.gserviceaccount.com",
        "member": f"serviceAccount:{inputs.get('accountId', name)}@{inputs.get('project', 'project')}"
                  ".iam.gserviceaccount.com",
    },
    "gcp:storage/bucket:Bucket": lambda name, inputs: {"url": f"gs://{inputs.get('name', name)}"},
    "gcp:compute/resourcePolicy:ResourcePolicy": lambda name, inputs: {
        "selfLink": f"projects/{inputs.get('project', 'p')}/regions/{inputs.get('region')}"
                    f"/resourcePolicies/{inputs.get('name', name)}",
    },
}


class PlanMocks(pulumi.runtime.Mocks):
    """Stand-ins for GCP and Kubernetes, which cannot exist here: echo inputs, add the outputs we read."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        state = dict(args.inputs)
        computed = _COMPUTED_OUTPUTS.get(args.typ)
        if computed:
            state.update(computed(args.name, args.inputs))
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        return {}


class _RecordingMonitor(_mocks.MockMonitor):
    """The mock monitor, also keeping what `Mocks.new_resource` is not told: parent and dependencies.

    Mirrors `MockMonitor.RegisterResource`, deserializing the inputs once for both the mocks and the record.
    """

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.recorded: list[PlannedResource] = []
        self.aliases: dict[str, tuple[str, ...]] = {}

    def make_urn(self, parent: str, type_: str, name: str, stack: str = "", project: str = "") -> str:
        """URNs as the engine makes them, so plans name resources as `pulumi preview` does: a child's type is
        qualified by every ancestor's type, and the root stack qualifies nothing (the stock mock monitor keeps
        only the parent's last type and prefixes the stack's)."""
        if parent:
            qualified = parent.split("::")[2]
            if qualified != "pulumi:pulumi:Stack":
                type_ = f"{qualified}${type_}"
        return "urn:pulumi:" + "::".join([stack or pulumi.get_stack(), project or pulumi.get_project(), type_, name])

    def alias_urns(self, request, urn: str) -> tuple[str, ...]:
        """The engine's reading of `aliases`: each alias names an earlier name, type or parent, and a child also
        answers to each earlier URN of its parent (its name re-prefixed when it starts with the parent's name,
        the `{name}-suffix` convention), as Pulumi's SDK spells it in `all_aliases`."""
        own = [alias.urn or self.make_urn("" if alias.spec.noParent else alias.spec.parentUrn or request.parent,
                                          alias.spec.type or request.type, alias.spec.name or request.name,
                                          alias.spec.stack, alias.spec.project)
               for alias in request.aliases]
        found = list(own)
        parent_name = request.parent.rpartition("::")[2]
        for parent_alias in self.aliases.get(request.parent, ()):
            for child in (urn, *own):
                name, type_ = child.rpartition("::")[2], child.split("::")[2].split("$")[-1]
                if parent_name and name.startswith(parent_name):
                    name = parent_alias.rpartition("::")[2] + name[len(parent_name):]
                found.append(self.make_urn(parent_alias, type_, name))
        return tuple(sorted(set(found) - {urn}))

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        urn = self.make_urn(request.parent, request.type, request.name)
        self.aliases[urn] = self.alias_urns(request, urn)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _mocks._ensure_event_loop()
        inputs = pulumi.runtime.rpc.deserialize_properties(request.object)
        id_, state = self.mocks.new_resource(pulumi.runtime.MockResourceArgs(
            typ=request.type, name=request.name, inputs=inputs, provider=request.provider,
            resource_id=request.importId, custom=request.custom or False))
        self.resources[urn] = _mocks.MockMonitor.ResourceRegistration(urn, id_, state)
        self.recorded.append(PlannedResource(
            urn=urn, type=request.type, name=request.name, parent=request.parent, inputs=normalize(inputs),
            depends_on=tuple(sorted(set(request.dependencies))), custom=bool(request.custom),
            aliases=self.aliases[urn] if not request.custom else _moved(urn, self.aliases[urn])))
        # Only what the mocks add or change: the SDK resolves every output the response leaves out to its input
        # (not a preview: `resolve_outputs`), so echoing the inputs back would serialize and read them twice more.
        changed = {k: v for k, v in state.items() if k not in inputs or v is not inputs[k]}
        obj_proto = _sync_await(pulumi.runtime.rpc.serialize_properties(changed, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=id_, object=obj_proto)


def _moved(urn: str, aliases: tuple[str, ...]) -> tuple[str, ...]:
    """A provider resource's aliases, less the other API versions of its own kind that its SDK class declares
    (`rbac.authorization.k8s.io/v1beta1:ClusterRole` ...): a plan shows where a resource was, not what it may be."""
    def parent_and_name(u: str) -> tuple[str, str, str]:
        head, qualified, name = u.rsplit("::", 2)
        return head, qualified.rpartition("$")[0], name
    return tuple(alias for alias in aliases if parent_and_name(alias) != parent_and_name(urn))


def config_strings(config: Mapping[str, Any]) -> dict[str, str]:
    """Pulumi passes config to programs as strings; objects as JSON, as `pulumi config set --path` would."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def run_under_mocks(program: Callable[[], None], config: Mapping[str, Any], *, project: str = "tpuplane",
                    stack: str = "dev", mocks: pulumi.runtime.Mocks | None = None) -> Plan:
    """Run `program` as the Pulumi engine would and return every registration. Exceptions propagate."""
    _settings.ROOT.set(None)
    monitor = _RecordingMonitor(mocks or PlanMocks())
    pulumi.runtime.set_mocks(monitor.mocks, project=project, stack=stack, preview=False, monitor=monitor)
    pulumi.runtime.set_all_config(config_strings(config))
    _settings.SETTINGS.rpc_manager.clear()
    _settings.SETTINGS.outputs.clear()
    outputs: dict[str, Any] = {}

    def body() -> None:
        program()
        exported = _settings.get_root_resource().outputs  # type: ignore[union-attr]
        outputs.update(_sync_await(pulumi.Output.from_input(exported).future()) or {})

    with tuned_runtime(), _leaving_nothing_behind():
        _sync_await(run_pulumi_func(body))
    resources = sorted(monitor.recorded, key=lambda r: r.urn)
    return Plan(project=project, stack=stack, resources=tuple(resources), outputs=normalize(outputs))


@contextlib.contextmanager
def _leaving_nothing_behind() -> Iterator[None]:
    """Finish, before returning, whatever the enclosed program left on the event loop and in its threads.

    The SDK re-raises a program's first failure at once, while its other registrations still wait on their inputs
    or run in the loop's executor; left there, they would run, and register, during the next program. Tasks that
    were pending before (an Output made outside the program) are left alone, and the loop gets a fresh executor
    for what runs on it next.
    """
    loop = _ensure_event_loop()
    before = asyncio.all_tasks(loop)
    executor = ThreadPoolExecutor(thread_name_prefix="pulumi-mock-rpc")
    loop.set_default_executor(executor)
    try:
        yield
    finally:
        leftovers = asyncio.all_tasks(loop) - before
        for task in leftovers:
            task.cancel()
        _sync_await(asyncio.gather(*leftovers, return_exceptions=True))
        executor.shutdown(wait=True)
        loop.set_default_executor(ThreadPoolExecutor())


def run_program_file(path: Path, config: Mapping[str, Any], *, project: str, stack: str,
                     mocks: pulumi.runtime.Mocks | None = None) -> Plan:
    """Run a Pulumi program file (e.g. stacks/__main__.py) under mocks, as `pulumi up` runs it."""
    return run_under_mocks(lambda: runpy.run_path(str(path), run_name="__main__"), config,
                           project=project, stack=stack, mocks=mocks)
