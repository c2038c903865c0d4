"""The one plan type: every resource a stack program registers, as the offline runner records it and as a plan
file (`tpuplane plan --format json`) carries it. The diff, the policies, the fleet summary and every report read
a `Plan`; reading a plan file checks it against this type (`parse_plan`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, StrictStr, ValidationError

from tpuplane.infra.args import Source, validation_problems
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.catalog import machine_type_generation
from tpuplane.infra.redaction import redact, redact_inputs, redact_names, redact_text, sensitive_paths
from tpuplane.infra.review.resource_inputs import (  # noqa: F401 (the type tokens, where reviewers import them)
    BUCKET_GRANT,
    CLUSTER,
    CONFIG_GROUP,
    HELM_RELEASE,
    NODE_POOL,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    PROJECT_GRANT,
    RESERVATION,
    RESOURCE_POLICY,
    Inputs,
    NodePoolInputs,
    inputs_model,
    read_inputs,
)


class PlannedResource(BaseModel):
    """One resource as the engine receives it: Pulumi type token, camelCase inputs, parent and dependencies."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    urn: Annotated[StrictStr, Field(min_length=1)]
    type: StrictStr
    name: StrictStr
    parent: StrictStr | None = None
    inputs: dict[str, Any]
    depends_on: tuple[StrictStr, ...] = Field((), alias="dependsOn")
    aliases: tuple[StrictStr, ...] = ()
    """Earlier URNs of this resource (its own `aliases` and those it inherits from its ancestors), as the engine
    resolves them: a plan diff matches them, so a rename or re-parent is not a replacement."""
    custom: bool = True
    """A provider resource, not a component (the offline runner knows; a plan file does not say)."""

    _read: tuple[dict[str, Any], Inputs] | None = PrivateAttr(None)

    def read(self) -> Inputs:
        """What reviewers read of the inputs, typed by the resource's type (`resource_inputs`); read once (a copy
        with other inputs, such as the redacted one, reads its own)."""
        private = self.__pydantic_private__  # a private attribute read the slow way costs more than the read
        cached = private["_read"]
        if cached is None or cached[0] is not self.inputs:
            cached = private["_read"] = (self.inputs, read_inputs(self.type, self.inputs))
        return cached[1]

    def to_json(self) -> dict[str, Any]:
        shown = {"urn": self.urn, "type": self.type, "name": self.name, "parent": self.parent,
                 "inputs": self.inputs, "dependsOn": list(self.depends_on)}
        return {**shown, "aliases": list(self.aliases)} if self.aliases else shown


class Plan(BaseModel):
    """What a program would create, in a stable order (by URN), and the stack outputs it exports (the offline
    runner's; a plan file carries none)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    project: StrictStr
    stack: StrictStr
    resources: tuple[PlannedResource, ...]
    outputs: dict[str, Any] = {}

    def to_json(self) -> dict[str, Any]:
        return {"project": self.project, "stack": self.stack, "resources": [r.to_json() for r in self.resources]}

    def of_type(self, type_token: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_token]

    def named(self, name: str) -> PlannedResource:
        return next(r for r in self.resources if r.name == name)

    def by_urn(self) -> dict[str, PlannedResource]:
        return {r.urn: r for r in self.resources}

    def kubernetes_manifests(self) -> list[dict[str, Any]]:
        """Every Kubernetes object the plan would apply, manifest-shaped (Helm releases excepted: their
        charts render in the cluster). The offline stand-in for `render_yaml_to_directory`."""
        manifests: list[dict[str, Any]] = []
        for r in self.resources:
            if r.type == CONFIG_GROUP:
                manifests += r.inputs.get("objs", [])
            elif r.type.startswith("kubernetes:") and "apiVersion" in r.inputs:
                manifests.append(r.inputs)
        return manifests

    @staticmethod
    def _redacted(r: PlannedResource) -> PlannedResource:
        urn, type_, name, parent, *rest = redact_names([r.urn, r.type, r.name, r.parent or "", *r.depends_on,
                                                         *r.aliases])
        return r.model_copy(update={"urn": urn, "type": type_, "name": name, "parent": parent or r.parent,
                                    "depends_on": tuple(rest[:len(r.depends_on)]),
                                    "aliases": tuple(rest[len(r.depends_on):]),
                                    "inputs": redact_inputs(r.type, r.inputs)})

    def redacted(self) -> "Plan":
        """A copy safe to render in any format: every resource's inputs and the outputs redacted, and the secret
        parts of every name masked: the project's, the stack's, and each resource's name, type, URN, parent,
        dependencies and aliases. Policies read the plan itself."""
        resources = tuple(self._redacted(r) for r in self.resources)
        return self.model_copy(update={"project": redact_text(self.project), "stack": redact_text(self.stack),
                                       "resources": resources, "outputs": redact(self.outputs)})


_PLAN_HINT = ('write plans with `tpuplane plan --format json`: {"project", "stack", "resources": '
              '[{"urn", "type", "name", "parent", "inputs", "dependsOn"}]}')


def _shown(value: Any) -> object:
    """What an error message may show of a bad value: scalars, never whole (possibly secret) objects."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, str) and len(value) <= 40 and not sensitive_paths(value):
        return value
    return f"<{type(value).__name__}>"


def inputs_problems(plan: Plan, source: str = "plan") -> list[Problem]:
    """Every input a reviewer reads that has the wrong type or an out-of-range value, named by its path in the
    plan (`plan p.json: resources[3].inputs.nodeConfig.labels`); [] when every resource reads."""
    problems = []
    resources = Source.config(f"{source}:", Plan)
    for i, resource in enumerate(plan.resources):
        try:
            resource.read()
        except ValidationError as err:
            where = Source.config(resources.path("resources", i, "inputs"), inputs_model(resource.type))
            problems += [dataclasses.replace(p, given=_shown(p.given), allowed=_kind_words(p.allowed),
                                             hint=f"a {resource.type} as the provider takes it: write plans with "
                                             "`tpuplane plan --format json`")
                         for p in validation_problems(err, where)]
    return problems


def _kind_words(allowed: str) -> str:
    """pydantic's "Input should be a valid dictionary or instance of NodeConfig" as a plan's reader says it."""
    allowed = re.sub(r"Input should be a valid dictionary( or instance of \w+)?", "a mapping", allowed)
    return re.sub(r"Input should be a valid (list|string|boolean)",
                  lambda m: {"list": "a list", "string": "text", "boolean": "true or false"}[m[1]], allowed)


def parse_plan(raw: object, source: str = "plan") -> Plan:
    """Check that `raw` (a plan file's JSON) is a plan whose every read input has its type, and return it;
    ConfigError names every broken field."""
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as err:
        raise ConfigError([dataclasses.replace(p, given=_shown(p.given), hint=_PLAN_HINT)
                           for p in validation_problems(err, Source.config(f"{source}:", Plan))]) from None
    problems = inputs_problems(plan, source)
    if problems:
        raise ConfigError(problems)
    seen: set[str] = set()
    where = Source.config(f"{source}:", Plan)
    for i, r in enumerate(plan.resources):
        if r.urn in seen:
            raise ConfigError.at(where.path("resources", i, "urn"), r.urn,
                                 "each URN once", "a plan lists every resource exactly once")
        seen.add(r.urn)
    looped = _in_parent_loops(plan)
    if looped:
        raise ConfigError([Problem(where.path("resources", i, "parent"), _shown(plan.resources[i].parent),
                                   "a resource that is not its own ancestor",
                                   "parents form a tree: the stack at its root") for i in looped])
    return plan


def _in_parent_loops(plan: Plan) -> list[int]:
    """The indexes of resources that are their own ancestors (the members of each loop, not the resources below
    one, whose only fault is their ancestor's); each chain of parents is walked once."""
    parents = {r.urn: r.parent for r in plan.resources}
    walked: set[str] = set()  # chains already followed to a root or into a loop
    looped: set[str] = set()
    for r in plan.resources:
        chain: list[str] = []
        urn: str | None = r.urn
        while urn in parents and urn not in walked and urn not in chain:
            chain.append(urn)
            urn = parents[urn]
        if urn in chain:
            looped.update(chain[chain.index(urn):])
        walked.update(chain)
    return [i for i, r in enumerate(plan.resources) if r.urn in looped]


# TPU facts of a node pool, from its machine type (GCE names; the `-Nt` suffix is chips per VM)

@dataclass(frozen=True)
class TpuPool:
    """A node pool with a TPU machine type: one slice of `vms` VMs."""

    generation: str
    machine_type: str
    vms: int
    chips_per_vm: int

    @property
    def chips(self) -> int:
        return self.vms * self.chips_per_vm


def node_pool(inputs: Mapping[str, Any] | NodePoolInputs) -> NodePoolInputs:
    """A NodePool's inputs as reviewers read them (engine props, a plan's inputs, or already read)."""
    return inputs if isinstance(inputs, NodePoolInputs) else NodePoolInputs.model_validate(inputs)


def pool_vms(inputs: Mapping[str, Any] | NodePoolInputs) -> int:
    """VMs a pool holds at most: its static size, else the autoscaling ceiling (flex-start, queued pools)."""
    pool = node_pool(inputs)
    autoscaling = pool.autoscaling
    for value in (pool.node_count, autoscaling and autoscaling.most, pool.initial_node_count):
        if value is not None:
            return value
    return 0


def tpu_pool(inputs: Mapping[str, Any] | NodePoolInputs) -> TpuPool | None:
    """The TPU slice a NodePool's inputs describe, or None when the pool has no TPU machine type."""
    pool = node_pool(inputs)
    machine_type = pool.node_config.machine_type if pool.node_config else None
    facts = machine_type_generation(machine_type) if machine_type else None
    if facts is None:
        return None
    generation, chips_per_vm = facts
    return TpuPool(generation, machine_type, pool_vms(pool), chips_per_vm)
