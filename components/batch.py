"""`BatchStack`: Kueue and JobSet installed from pinned Helm charts, and every queue object derived from the pools.

On a cluster whose Kueue and JobSet are already installed (`install_controllers=False`), only the objects are
created: no Helm release and nothing that waits on one. Otherwise ordering is explicit, because Kueue's webhook
refuses objects for 10-30 s after its pod is Ready (kueue#13036):
1. the Kueue and JobSet Helm releases (Pulumi waits until their Deployments are ready);
2. the `kueue-webhook-ready` Job in kueue-system, which dry-run-creates a ResourceFlavor through the API server
   until Kueue's webhook accepts it; Pulumi's Job await waits for it to complete. Kueue's
   `managedJobsNamespaceSelector` leaves kueue-system (and kube-system, jobset-system, the Pathways service's
   namespace) out of its Job webhooks, so the gate's own Job is never refused while the webhook is down;
3. every Kueue object `depends_on` that Job (and flavors/checks come before the queues that name them, so a
   destroy removes queues first).
PriorityClasses and team Namespaces are core objects and need neither controller.
"""

from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from tpuplane.components.batch_args import BatchStackArgs
from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.infra.batch.args import read_platform
from tpuplane.infra.batch.kueue import (
    controller_releases,
    local_queues,
    render_cluster_queues,
    render_flavors,
    render_local_queues,
    render_priority_classes,
    render_provisioning,
    render_team_namespaces,
    render_webhook_probe,
)

WEBHOOK_PROBE_TIMEOUT = "15m"  # 12 retries with kubelet backoff fit well inside


class BatchStack(pulumi.ComponentResource):
    """Kueue + JobSet controllers, priorities, flavors, ClusterQueues and LocalQueues for one cluster, any cluster:
    its Kubernetes objects go through the provider given in `opts` (`providers=[...]`).

    Children: `kueue_release` and `jobset_release` (Helm), `webhook_ready` (complete once Kueue's admission
    webhook answers; every Kueue object waits for it) and `queue_resources` (the LocalQueues a workload waits for).
    With `install_controllers=False` the first three are None.
    """

    local_queues: pulumi.Output[dict[str, str]]
    """Team (or "default" without teams) -> the name of its LocalQueue."""
    local_queue_namespaces: pulumi.Output[dict[str, str]]
    """Team (or "default") -> the namespace of its LocalQueue."""
    kueue_version: pulumi.Output[str]
    """The Kueue chart version installed."""
    jobset_version: pulumi.Output[str]
    """The JobSet chart version installed."""

    def __init__(self, name: str, args: BatchStackArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        # every check before the component registers anything (Args a stack config already read pass as they are)
        platform = read_platform(args)
        super().__init__("tpuplane:index:BatchStack", name, {}, opts)
        self._opts = opts  # children wait for what the caller's depends_on names
        self._platform = platform

        self.kueue_release = self.jobset_release = self.webhook_ready = None
        if platform.install_controllers:
            kueue, jobset = controller_releases(platform)
            self.kueue_release = self._release(kueue)
            self.jobset_release = self._release(jobset)
            self.webhook_ready = self._webhook_gate(platform.kueue_version)
        gate = [self.webhook_ready] if self.webhook_ready is not None else []

        for manifest in render_priority_classes():
            self._apply(manifest, gate if manifest["apiVersion"].startswith("kueue.x-k8s.io/") else [])
        namespaces = {m["metadata"]["name"]: self._apply(m, []) for m in render_team_namespaces(platform)}

        flavors = [self._apply(m, gate) for m in render_flavors(platform)]
        checks: list[pulumi.Resource] = []
        for manifest in render_provisioning(platform):  # the config first, then the check that points at it
            checks.append(self._apply(manifest, [*gate, *checks]))
        cluster_queues = [self._apply(m, [*gate, *flavors, *checks]) for m in render_cluster_queues(platform)]
        self.queue_resources = [
            self._apply(m, [*gate, *cluster_queues,
                            *([namespaces[m["metadata"]["namespace"]]] if m["metadata"]["namespace"] in namespaces
                              else [])])
            for m in render_local_queues(platform)
        ]
        queues = local_queues(platform)
        self.local_queues = pulumi.Output.from_input({team: queue for team, (_, queue) in queues.items()})
        self.local_queue_namespaces = pulumi.Output.from_input({team: ns for team, (ns, _) in queues.items()})
        self.kueue_version = pulumi.Output.from_input(platform.kueue_version)
        self.jobset_version = pulumi.Output.from_input(platform.jobset_version)
        self.register_outputs({"local_queues": self.local_queues, "local_queue_namespaces": self.local_queue_namespaces,
                               "kueue_version": self.kueue_version, "jobset_version": self.jobset_version})

    @property
    def args(self) -> BatchStackArgs:
        """The Args this platform was built from: what `TpuWorkloadArgs.batch` checks a workload against."""
        return BatchStackArgs(**self._platform.model_dump(mode="json", exclude_defaults=True))

    def _release(self, release: Any) -> k8s.helm.v3.Release:
        return k8s.helm.v3.Release(
            release.name,
            k8s.helm.v3.ReleaseArgs(
                name=release.name, chart=release.chart, version=release.version, namespace=release.namespace,
                create_namespace=True, values=release.values, timeout=600,
            ),
            opts=child_options(self, self._opts),
        )

    def _webhook_gate(self, kueue_version: str) -> pulumi.Resource:
        *setup, job = render_webhook_probe(kueue_version)
        prerequisites = [self._apply(m, [self.kueue_release]) for m in setup]
        return manifest_resource(job, child_options(
            self, self._opts, depends_on=[self.kueue_release, *prerequisites],
            custom_timeouts=pulumi.CustomTimeouts(create=WEBHOOK_PROBE_TIMEOUT, update=WEBHOOK_PROBE_TIMEOUT)))

    def _apply(self, manifest: dict[str, Any], depends_on: Sequence[pulumi.Resource]) -> pulumi.Resource:
        return manifest_resource(manifest, child_options(self, self._opts, depends_on=depends_on))
