"""`ProxyJanitor`: a CronJob that runs `tpuplane janitor` in one namespace, so leaked Pathways proxies are reaped.

The manifests (ServiceAccount, Role with only list/get/delete on Jobs, RoleBinding, CronJob) are rendered by
`tpuplane.infra.pathways.proxy.render_janitor`; this component only registers them, in dependency order.
"""

from __future__ import annotations

import pulumi

from tpuplane.components.manifests import manifest_resource
from tpuplane.infra.pathways.proxy import DEFAULT_JANITOR_SCHEDULE, DEFAULT_STALE_AFTER_SECONDS, JANITOR_NAME, JanitorSpec, \
    render_janitor


class ProxyJanitor(pulumi.ComponentResource):
    """Deletes, every `schedule`, the proxy Jobs in `namespace` silent for more than `stale_after_seconds`.

    `image` must have `tpuplane[runtime]` installed (the `tpuplane` command on PATH).
    """

    def __init__(self, name: str, *, namespace: str, image: str, schedule: str = DEFAULT_JANITOR_SCHEDULE,
                 stale_after_seconds: int = DEFAULT_STALE_AFTER_SECONDS, object_name: str = JANITOR_NAME,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpuplane:index:ProxyJanitor", name, {}, opts)
        manifests = render_janitor(JanitorSpec(namespace=namespace, image=image, schedule=schedule,
                                               stale_after_seconds=stale_after_seconds, name=object_name))
        created: list[pulumi.Resource] = []
        for manifest in manifests:
            # Each object waits for the ones before it: the CronJob never runs before its rights exist.
            created.append(manifest_resource(manifest, pulumi.ResourceOptions(parent=self, depends_on=list(created))))
        self.cron_job = created[-1]
        self.register_outputs({"namespace": namespace, "cronJob": object_name})
