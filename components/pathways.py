"""`SharedPathwaysService`: one long-lived Pathways service (resource manager + TPU workers) that teams connect to.

What it creates, all decided by `tpuplane.infra.pathways.config.plan_pathways` and the renderers of
`tpuplane.infra.pathways.service`:
- a namespace named after the service, and a NetworkPolicy that admits to the resource manager only the service's
  own pods and the namespaces where clients run their proxies (the Kueue teams' namespaces, else `default`);
- a GCS scratch bucket (objects expire, uniform access, public access prevented), or the existing one given;
- object access on that bucket for the node service account and, through Workload Identity, for the pods that
  use it (the `default` Kubernetes service accounts of the service's and the proxies' namespaces);
- the service's JobSet, optionally with a colocated-Python sidecar on every worker.

Image pulls need `roles/artifactregistry.reader` for the node service account: `TpuCluster` grants it project-wide,
so it is not granted twice here (two resources owning one binding would delete it for both on removal).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from tpuplane.components.manifests import manifest_resource
from tpuplane.infra.config import StackConfig
from tpuplane.infra.pathways.service import (
    render_pathways_namespace,
    render_pathways_network_policy,
    render_pathways_service_jobset,
)
from tpuplane.infra.pathways.config import PathwaysPlan, plan_pathways

SCRATCH_OBJECT_MAX_AGE_DAYS = 7  # scratch is compilation and transfer state, never a checkpoint
BUCKET_ROLE = "roles/storage.objectAdmin"


def _dependencies(opts: pulumi.ResourceOptions | None) -> list[Any]:
    """The caller's `depends_on` (e.g. the JobSet controller), which children do not inherit on their own."""
    deps = opts.depends_on if opts is not None else None
    if deps is None:
        return []
    if isinstance(deps, pulumi.Resource):
        return [deps]
    return list(deps)


class SharedPathwaysService(pulumi.ComponentResource):
    """The Shared Pathways Service of `cfg.pathways`. Kubernetes objects use the provider passed in `opts`."""

    pathways_service: str
    """`host:port` of the resource manager, resolvable from any namespace."""
    instance_type: str
    server_image: str
    proxy_image: str
    namespace: str
    bucket: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        *,
        node_service_account_email: pulumi.Input[str],
        cpu_pool_name: str,
        sidecar_image: pulumi.Input[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        super().__init__("tpuplane:index:SharedPathwaysService", name, {}, opts)
        plan = plan_pathways(cfg)
        child = pulumi.ResourceOptions(parent=self)

        namespace = manifest_resource(render_pathways_namespace(plan.namespace), child)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        manifest_resource(render_pathways_network_policy(plan.name, plan.proxy_namespaces), in_namespace)

        bucket_name = self._scratch_bucket(name, cfg, plan)
        members = [pulumi.Output.concat("serviceAccount:", node_service_account_email),
                   *plan.workload_identity_members(cfg.project)]
        grants = [
            gcp.storage.BucketIAMMember(f"{name}-scratch-{i}", bucket=bucket_name, role=BUCKET_ROLE, member=member,
                                        opts=child)
            for i, member in enumerate(members)
        ]

        if plan.build_sidecar and sidecar_image is None:
            raise ValueError("tpuplane:pathways.sidecar asks for a built image: pass SidecarImage(...).image_ref "
                             "as sidecar_image")
        image = sidecar_image if sidecar_image is not None else plan.sidecar_image

        def render(sidecar: str | None) -> dict[str, Any]:
            return render_pathways_service_jobset(
                plan.name, spec=plan.spec, slices=plan.slices, capacity=plan.capacity, server_image=plan.server_image,
                gcs_scratch_location=plan.gcs_scratch_location, cpu_pool=cpu_pool_name, node_pools=plan.node_pools,
                placement_policy=plan.placement_policy, sidecar_image=sidecar)

        manifest = render(None)
        if image is not None:
            manifest["spec"] = pulumi.Output.from_input(image).apply(lambda ref: render(ref)["spec"])
        manifest_resource(manifest, pulumi.ResourceOptions(
            parent=self,
            depends_on=[*_dependencies(opts), namespace, *grants],
            # A JobSet's spec is immutable once created, and the name is fixed: a change replaces it, delete first.
            replace_on_changes=["spec"],
            delete_before_replace=True,
        ))

        self.pathways_service = plan.service_address
        self.instance_type = plan.instance_type
        self.server_image = plan.server_image
        self.proxy_image = plan.proxy_image
        self.namespace = plan.namespace
        self.bucket = pulumi.Output.from_input(bucket_name)
        self.register_outputs({
            "pathways_service": self.pathways_service,
            "instance_type": self.instance_type,
            "server_image": self.server_image,
            "proxy_image": self.proxy_image,
            "namespace": self.namespace,
            "bucket": self.bucket,
        })

    def _scratch_bucket(self, name: str, cfg: StackConfig, plan: PathwaysPlan) -> pulumi.Input[str]:
        if not plan.create_bucket:
            return plan.bucket
        bucket = gcp.storage.Bucket(
            f"{name}-scratch",
            name=plan.bucket,
            project=cfg.project,
            location=cfg.region,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            force_destroy=True,  # scratch only: removing the service must not fail on leftovers
            lifecycle_rules=[gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=SCRATCH_OBJECT_MAX_AGE_DAYS))],
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(retention_duration_seconds=0),
            labels={"managed-by": "tpuplane"},
            opts=pulumi.ResourceOptions(parent=self),
        )
        return bucket.name

