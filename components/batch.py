"""`BatchStack`: Kueue and JobSet installed from pinned Helm charts, and every queue object derived from the pools.

Ordering is explicit, because Kueue's webhook refuses objects for 10-30 s after its pod is Ready (kueue#13036):
1. the Kueue and JobSet Helm releases (Pulumi waits until their Deployments are ready);
2. the `kueue-webhook-ready` Job in kueue-system, which dry-run-creates a ResourceFlavor through the API server
   until Kueue's webhook accepts it; Pulumi's Job await waits for it to complete. Kueue's
   `managedJobsNamespaceSelector` leaves kueue-system (and kube-system, jobset-system, the Pathways service's
   namespace) out of its Job webhooks, so the gate's own Job is never refused while the webhook is down;
3. every Kueue object `depends_on` that Job (and flavors/checks come before the queues that name them, so a
   destroy removes queues first).
PriorityClasses and team Namespaces are core objects and need neither controller.
"""

import copy
from typing import Any, Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from tpuplane.components.batch_args import BatchStackArgs
from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.infra.args import given
from tpuplane.infra.batch.args import platform_from_args
from tpuplane.infra.fleet.cluster import CPU_POOL_NAME
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
        args = given(args, "BatchStackArgs")  # None means unset, as for any Pulumi input
        platform = platform_from_args(args)  # every check before the component registers anything
        cpu_pool_name = args.get("cpu_pool_name", CPU_POOL_NAME)
        super().__init__("tpuplane:index:BatchStack", name, {}, opts)
        self._opts = opts  # children wait for what the caller's depends_on names
        self._args = copy.deepcopy(args)

        kueue, jobset = controller_releases(platform, cpu_pool_name)
        self.kueue_release = self._release(kueue)
        self.jobset_release = self._release(jobset)
        self.webhook_ready = self._webhook_gate(platform.kueue.version)

        for manifest in render_priority_classes():
            gate = [self.webhook_ready] if manifest["apiVersion"].startswith("kueue.x-k8s.io/") else []
            self._apply(manifest, gate)
        namespaces = {m["metadata"]["name"]: self._apply(m, []) for m in render_team_namespaces(platform)}

        flavors = [self._apply(m, [self.webhook_ready]) for m in render_flavors(platform, cpu_pool_name)]
        checks: list[pulumi.Resource] = []
        for manifest in render_provisioning(platform):  # the config first, then the check that points at it
            checks.append(self._apply(manifest, [self.webhook_ready, *checks]))
        cluster_queues = [self._apply(m, [self.webhook_ready, *flavors, *checks])
                          for m in render_cluster_queues(platform)]
        self.queue_resources = [
            self._apply(m, [self.webhook_ready, *cluster_queues,
                            *([namespaces[m["metadata"]["namespace"]]] if m["metadata"]["namespace"] in namespaces
                              else [])])
            for m in render_local_queues(platform)
        ]
        queues = local_queues(platform)
        self.local_queues = pulumi.Output.from_input({team: queue for team, (_, queue) in queues.items()})
        self.local_queue_namespaces = pulumi.Output.from_input({team: ns for team, (ns, _) in queues.items()})
        self.kueue_version = pulumi.Output.from_input(platform.kueue.version)
        self.jobset_version = pulumi.Output.from_input(platform.kueue.jobset_version)
        self.register_outputs({"local_queues": self.local_queues, "local_queue_namespaces": self.local_queue_namespaces,
                               "kueue_version": self.kueue_version, "jobset_version": self.jobset_version})

    @property
    def args(self) -> BatchStackArgs:
        """The Args this platform was built from: what `TpuWorkloadArgs.batch` checks a workload against."""
        return copy.deepcopy(self._args)

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
