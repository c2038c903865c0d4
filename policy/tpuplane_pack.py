"""Wrap tpuplane's policy functions into pulumi-policy policies.

Kept apart from `__main__.py` because constructing a `PolicyPack` starts the analyzer's gRPC server and
blocks: tests import this module to run the wrapped policies without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from tpuplane.infra.review.plan import PlannedResource
from tpuplane.infra.review.policies import RESOURCE_RULES, STACK_RULES, ResourceRule, StackRule


def resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for violation in rule.check(args.resource_type, args.props, args.urn):
            report_violation(violation.message, None)

    return ResourceValidationPolicy(name=rule.name, description=rule.description, validate=validate)


def plan_resource(resource: PolicyResource) -> PlannedResource:
    """The engine's view of a resource, in the shape the stack rules take."""
    return PlannedResource(
        urn=resource.urn,
        type=resource.resource_type,
        name=resource.name,
        inputs=resource.props,
        parent=resource.parent.urn if resource.parent is not None else None,
        depends_on=tuple(d.urn for d in resource.dependencies),
    )


def _rule_config(rule: StackRule, config: Mapping[str, Any]) -> dict[str, Any]:
    return {key: config[key] for key in rule.config_schema if key in config}


def stack_policy(rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [plan_resource(r) for r in args.resources]
        for violation in rule.check(resources, **_rule_config(rule, args.get_config())):
            report_violation(violation.message, violation.resource)

    schema = PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config_schema.items()}) \
        if rule.config_schema else None
    return StackValidationPolicy(name=rule.name, description=rule.description, validate=validate,
                                 config_schema=schema)


def pulumi_policies() -> list[Policy]:
    return [*(resource_policy(r) for r in RESOURCE_RULES), *(stack_policy(r) for r in STACK_RULES)]
