"""Resource options a component hands on to its children."""

from typing import Any, Optional, Sequence

import pulumi


def _caller_dependencies(opts: Optional[pulumi.ResourceOptions]) -> list[pulumi.Resource]:
    """The caller's `depends_on` (a reservation, the JobSet controller): children do not inherit it on their own,
    so a component passes it to the children that must wait."""
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    if isinstance(deps, pulumi.Resource):
        return [deps]
    return list(deps)


def child_options(parent: pulumi.Resource, opts: Optional[pulumi.ResourceOptions], *,
                  depends_on: Sequence[pulumi.Resource] = (), **options: Any) -> pulumi.ResourceOptions:
    """A child's options: parented to the component, waiting for what the caller's `depends_on` names and for
    `depends_on`."""
    return pulumi.ResourceOptions(parent=parent, depends_on=[*_caller_dependencies(opts), *depends_on], **options)
