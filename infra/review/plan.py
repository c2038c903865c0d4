"""The one plan type: every resource a stack program registers, as the offline runner records it and as a plan
file (`tpuplane plan --format json`) carries it. The diff, the policies, the fleet summary and every report read
a `Plan`; reading a plan file checks it against this type (`parse_plan`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError

from tpuplane.infra.args import Source, validation_problems
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.catalog import machine_type_generation
from tpuplane.infra.redaction import redact, redact_inputs, redact_text, sensitive_paths

# The resource types the reviewers read (Pulumi type tokens).
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
RESERVATION = "gcp:compute/reservation:Reservation"
RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
PROJECT_GRANT = "gcp:projects/iAMMember:IAMMember"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"


class PlannedResource(BaseModel):
    """One resource as the engine receives it: Pulumi type token, camelCase inputs, parent and dependencies."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    urn: StrictStr
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

    def redacted(self) -> "Plan":
        """A copy safe to render in any format: every resource's inputs and the outputs redacted, and the secret
        parts of names and URNs masked. Policies read the plan itself."""
        resources = tuple(
            r.model_copy(update={"urn": redact_text(r.urn), "name": redact_text(r.name),
                                 "parent": redact_text(r.parent) if r.parent else r.parent,
                                 "inputs": redact_inputs(r.type, r.inputs)})
            for r in self.resources)
        return self.model_copy(update={"resources": resources, "outputs": redact(self.outputs)})


_PLAN_HINT = ('write plans with `tpuplane plan --format json`: {"project", "stack", "resources": '
              '[{"urn", "type", "name", "parent", "inputs", "dependsOn"}]}')


def _shown(value: Any) -> object:
    """What an error message may show of a bad value: scalars, never whole (possibly secret) objects."""
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    if isinstance(value, str) and len(value) <= 40 and not sensitive_paths(value):
        return value
    return f"<{type(value).__name__}>"


def parse_plan(raw: object, source: str = "plan") -> Plan:
    """Check that `raw` (a plan file's JSON) is a plan and return it; ConfigError names every broken field."""
    try:
        plan = Plan.model_validate(raw)
    except ValidationError as err:
        raise ConfigError([dataclasses.replace(p, given=_shown(p.given), hint=_PLAN_HINT)
                           for p in validation_problems(err, Source.config(f"{source}:", Plan))]) from None
    seen: set[str] = set()
    for i, r in enumerate(plan.resources):
        if r.urn in seen:
            raise ConfigError.at(Source.config(f"{source}:", Plan).path("resources", i, "urn"), r.urn,
                                 "each URN once", "a plan lists every resource exactly once")
        seen.add(r.urn)
    return plan


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


def pool_vms(inputs: Mapping[str, Any]) -> int:
    """VMs a pool holds at most: its static size, else the autoscaling ceiling (flex-start, queued pools)."""
    autoscaling = inputs.get("autoscaling") or {}
    for value in (inputs.get("nodeCount"), autoscaling.get("maxNodeCount"),
                  autoscaling.get("totalMaxNodeCount"), inputs.get("initialNodeCount")):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def tpu_pool(inputs: Mapping[str, Any]) -> TpuPool | None:
    """The TPU slice a NodePool's inputs describe, or None when the pool has no TPU machine type."""
    machine_type = (inputs.get("nodeConfig") or {}).get("machineType")
    facts = machine_type_generation(machine_type) if isinstance(machine_type, str) else None
    if facts is None:
        return None
    generation, chips_per_vm = facts
    return TpuPool(generation, machine_type, pool_vms(inputs), chips_per_vm)
