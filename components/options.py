"""Resource options a component hands on to its children."""

from typing import Optional

import pulumi


def caller_dependencies(opts: Optional[pulumi.ResourceOptions]) -> list[pulumi.Resource]:
    """The caller's `depends_on` (a reservation, the JobSet controller): children do not inherit it on their own,
    so a component passes it to the children that must wait."""
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    if isinstance(deps, pulumi.Resource):
        return [deps]
    return list(deps)
