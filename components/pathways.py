"""`SharedPathwaysService`: one long-lived Pathways service (resource manager + TPU workers) that teams connect to.

What it creates, all decided by `tpuplane.infra.pathways.config.plan_service` and the renderers of
`tpuplane.infra.pathways.service`:
- a namespace named after the service, and a NetworkPolicy that admits to the resource manager only the service's
  own pods and the namespaces where clients run their proxies (the Kueue teams' namespaces, else `default`);
- a GCS scratch bucket (objects expire, uniform access, public access prevented), or the existing one given;
- object access on that bucket for the node service account and, through Workload Identity, for the pods that
  use it (the `default` Kubernetes service accounts of the service's and the proxies' namespaces); with an
  existing bucket and `grant_bucket_access=False`, no GCP resource at all (a program with only a Kubernetes
  provider applies the service);
- the service's JobSet, optionally with a colocated-Python sidecar on every worker.

Image pulls need `roles/artifactregistry.reader` for the node service account: `TpuCluster` grants it project-wide,
so it is not granted twice here (two resources owning one binding would delete it for both on removal).
"""

from typing import Any, Mapping, NotRequired, Optional, TypedDict

import pulumi
import pulumi_gcp as gcp

from tpuplane.components.batch_args import KueuePoolArgs
from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.components.outputs import checked_when_known
from tpuplane.infra.args import Source
from tpuplane.infra.pathways.args import read_service
from tpuplane.infra.pathways.config import SERVICE_ARGS, PathwaysPlan, ServiceSpec, plan_service
from tpuplane.infra.pathways.service import (
    render_pathways_namespace,
    render_pathways_network_policy,
    render_pathways_service_jobset,
)

SCRATCH_OBJECT_MAX_AGE_DAYS = 7  # scratch is compilation and transfer state, never a checkpoint
BUCKET_ROLE = "roles/storage.objectAdmin"


class SharedPathwaysServiceArgs(TypedDict):
    """One long-lived Pathways service on the first slices of a TPU pool group, shared by the teams' clients."""

    project: str
    """The project: the scratch bucket and Workload Identity members live there."""
    region: str
    """The scratch bucket's location."""
    cluster_name: str
    """The cluster's name (scratch bucket and workload-policy names derive from it)."""
    pool: KueuePoolArgs
    """The TPU pool group it runs on: `TpuSlicePool(...).kueue_pool`, or a description of your own group."""
    node_service_account: pulumi.Input[str]
    """The nodes' service account email: it gets object access on the scratch bucket."""
    jax_version: NotRequired[str]
    """The JAX release whose public server and proxy images it runs (or give `server_image`)."""
    server_image: NotRequired[str]
    """A pinned `.../server:<tag>` image; the proxy is its `.../proxy_server` sibling (or give `jax_version`)."""
    service_name: NotRequired[str]
    """The JobSet and its namespace; default: the component's name."""
    slices: NotRequired[int]
    """How many of the group's slices it holds (its first ones); default all. Kueue must not get them:
    give the group `dedicated_slices` of the same number."""
    gcs_bucket: NotRequired[str]
    """An existing `gs://bucket[/prefix]` for scratch; default: a bucket it creates (objects expire)."""
    grant_bucket_access: NotRequired[bool]
    """Grant the nodes and the pods object access on the scratch bucket (default true). False, with an existing
    `gcs_bucket` whose access is managed elsewhere: the service creates no GCP resource at all."""
    client_namespaces: NotRequired[list[str]]
    """Where clients create their proxies (the teams' namespaces); default `default`."""
    project_number: NotRequired[str]
    """The project's number, quoted: the scratch bucket's grants then name the pods' service accounts in GKE's
    principal:// form, as `TeamStorageArgs.project_number` does the teams'; default: the project-id form."""
    sidecar_image: NotRequired[pulumi.Input[str]]
    """A colocated-Python sidecar image for every worker (`SidecarImage(...).image_ref`)."""
    cpu_pool_name: NotRequired[str]
    """The CPU node pool the head runs on (default `cpu`)."""
    cpu_machine_type: NotRequired[str]
    """That pool's machine type, checked to hold the head and a client proxy (default n2-standard-16)."""


class SharedPathwaysService(pulumi.ComponentResource):
    """The Shared Pathways Service: resource manager + TPU workers as one JobSet, its namespace, a NetworkPolicy,
    a scratch bucket and its grants. Kubernetes objects use the provider passed in `opts`; pass the JobSet
    controller (`BatchStack(...)`) in `opts.depends_on`."""

    pathways_service: pulumi.Output[str]
    """`host:port` of the resource manager, resolvable from any namespace."""
    instance_type: pulumi.Output[str]
    """The Pathways instance type of its slices (e.g. `tpuv6e:4x4`)."""
    server_image: pulumi.Output[str]
    """The server image it runs."""
    proxy_image: pulumi.Output[str]
    """The matching proxy image clients must use."""
    namespace: pulumi.Output[str]
    """Its namespace."""
    bucket: pulumi.Output[str]
    """The scratch bucket's name."""

    def __init__(self, name: str, args: SharedPathwaysServiceArgs,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        # every check before the component registers anything (Args a stack config already read pass as they are)
        pw = read_service(args, supplied={"service_name": name} if isinstance(args, Mapping) else None)
        plan = plan_service(pw)
        super().__init__("tpuplane:index:SharedPathwaysService", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)

        namespace = manifest_resource(render_pathways_namespace(plan.namespace), child)
        in_namespace = pulumi.ResourceOptions(parent=self, depends_on=[namespace])
        manifest_resource(render_pathways_network_policy(plan.name, plan.proxy_namespaces), in_namespace)

        bucket_name = self._scratch_bucket(name, pw, plan)
        node_service_account, sidecar_image = (
            checked_when_known(getattr(pw, field), ServiceSpec, field, Source.args(SERVICE_ARGS, ServiceSpec))
            for field in ("node_service_account", "sidecar_image"))
        members = [pulumi.Output.concat("serviceAccount:", node_service_account),
                   *plan.workload_identity_members(pw.project, pw.project_number)] if pw.grant_bucket_access else []
        grants = [
            gcp.storage.BucketIAMMember(f"{name}-scratch-{i}", bucket=bucket_name, role=BUCKET_ROLE, member=member,
                                        opts=child)
            for i, member in enumerate(members)
        ]

        def render(sidecar: str | None) -> dict[str, Any]:
            return render_pathways_service_jobset(
                plan.name, spec=plan.spec, slices=plan.slices, capacity=plan.capacity, server_image=plan.server_image,
                gcs_scratch_location=plan.gcs_scratch_location, cpu_pool=pw.cpu_pool_name, node_pools=plan.node_pools,
                placement_policy=plan.placement_policy, sidecar_image=sidecar, slice_group=pw.pool.name)

        manifest = render(None)
        if sidecar_image is not None:
            manifest["spec"] = pulumi.Output.from_input(sidecar_image).apply(lambda ref: render(ref)["spec"])
        manifest_resource(manifest, child_options(
            self, opts,
            depends_on=[namespace, *grants],
            # A JobSet's spec is immutable once created, and the name is fixed: a change replaces it, delete first.
            replace_on_changes=["spec"],
            delete_before_replace=True,
        ))

        self.pathways_service = pulumi.Output.from_input(plan.service_address)
        self.instance_type = pulumi.Output.from_input(plan.instance_type)
        self.server_image = pulumi.Output.from_input(plan.server_image)
        self.proxy_image = pulumi.Output.from_input(plan.proxy_image)
        self.namespace = pulumi.Output.from_input(plan.namespace)
        self.bucket = pulumi.Output.from_input(bucket_name)
        self._proxy_namespaces = plan.proxy_namespaces
        self.register_outputs({
            "pathways_service": self.pathways_service,
            "instance_type": self.instance_type,
            "server_image": self.server_image,
            "proxy_image": self.proxy_image,
            "namespace": self.namespace,
            "bucket": self.bucket,
        })

    @property
    def proxy_namespaces(self) -> list[str]:
        """Where clients create their proxies (the client namespaces, else `default`): where a `ProxyJanitor` runs."""
        return list(self._proxy_namespaces)

    def _scratch_bucket(self, name: str, pw: ServiceSpec, plan: PathwaysPlan) -> pulumi.Input[str]:
        if not plan.create_bucket:
            return plan.bucket
        bucket = gcp.storage.Bucket(
            f"{name}-scratch",
            name=plan.bucket,
            project=pw.project,
            location=pw.region,
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

