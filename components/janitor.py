"""`ProxyJanitor`: a CronJob that runs `tpuplane janitor` in one namespace, so leaked Pathways proxies are reaped.

The manifests (ServiceAccount, Role with only list/get/delete on Jobs, RoleBinding, CronJob) are rendered by
`tpuplane.infra.pathways.proxy.render_janitor`; this component only registers them, in dependency order.
"""

from typing import NotRequired, Optional, TypedDict

import pulumi

from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.infra.args import Source
from tpuplane.infra.pathways.proxy import JanitorSpec, read_janitor, render_janitor

JANITOR_ARGS = "ProxyJanitorArgs"


class ProxyJanitorArgs(TypedDict):
    """Where and how often leaked Pathways client proxies are deleted."""

    namespace: str
    """The namespace whose proxy Jobs it reaps (a team's namespace)."""
    image: str
    """An image with `tpuplane[runtime]` installed (the `tpuplane` command on PATH), pinned by tag or digest."""
    schedule: NotRequired[str]
    """A 5-field cron schedule (default `*/5 * * * *`, every 5 minutes)."""
    stale_after_seconds: NotRequired[int]
    """A proxy silent for longer than this is deleted (at least 60; default 600)."""
    object_name: NotRequired[str]
    """The name of its CronJob, ServiceAccount, Role and RoleBinding (default `tpuplane-proxy-janitor`)."""


class ProxyJanitor(pulumi.ComponentResource):
    """Deletes, every `schedule`, the proxy Jobs in `namespace` silent for more than `stale_after_seconds`.
    Child: `cron_job`."""

    cron_job_name: pulumi.Output[str]
    """The CronJob's name."""

    def __init__(self, name: str, args: ProxyJanitorArgs, opts: Optional[pulumi.ResourceOptions] = None):
        # every check before the component registers anything (Args a stack config already read pass as they are)
        spec = read_janitor(args, Source.args(JANITOR_ARGS, JanitorSpec))
        super().__init__("tpuplane:index:ProxyJanitor", name, {}, opts)
        created: list[pulumi.Resource] = []
        for manifest in render_janitor(spec):
            # Each object waits for the ones before it: the CronJob never runs before its rights exist.
            created.append(manifest_resource(manifest, child_options(self, opts, depends_on=created)))
        self.cron_job = created[-1]
        self.cron_job_name = pulumi.Output.from_input(spec.object_name)
        self.register_outputs({"cron_job_name": self.cron_job_name})
