"""`TeamStorage`: each team's workload identity and the existing storage its jobs mount, on any cluster.

What it creates, all decided by `tpuplane.infra.storage.args.plan_team_storage`:
- in every team's namespace, the Kubernetes service account `tpuplane-workload` that the team's workloads run as;
- for every storage entry and every team it names, a PersistentVolume and a claim named after the entry, so a
  workload of that team mounts it by name;
- through Workload Identity Federation for GKE, the team's service account gets object access on exactly the buckets
  its entries name (`roles/storage.objectViewer` when it only reads, `roles/storage.objectUser` when it writes), and
  the project roles the Args add. With `grant_access=False` (access managed elsewhere) no GCP resource is created:
  a program with only a Kubernetes provider applies the rest.

The teams' namespaces must exist: pass the `BatchStack` that creates them in `opts.depends_on`.
"""

from typing import NotRequired, Optional, TypedDict

import pulumi
import pulumi_gcp as gcp

from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.infra.storage.args import TeamStoragePlan, plan_team_storage, read_team_storage


class GcsBucketArgs(TypedDict):
    """A Cloud Storage bucket, or one folder of it, through Cloud Storage FUSE."""

    bucket: str
    """`gs://<bucket>[/<folder>]`, or a bucket name."""
    mount_options: NotRequired[list[str]]
    """gcsfuse flags, one per item (e.g. `implicit-dirs`, `uid=1001`); default none."""
    file_cache_capacity: NotRequired[str]
    """Turns gcsfuse's file cache on: its size as a Kubernetes quantity (`-1`: unlimited); default off."""
    file_cache_for_range_read: NotRequired[bool]
    """Cache whole files on random reads too (needs the file cache); default false."""
    metadata_cache_ttl_seconds: NotRequired[int]
    """How long cached metadata lives (`-1`: forever); default gcsfuse's."""


class FilestoreShareArgs(TypedDict):
    """The file share of an existing Filestore instance."""

    location: str
    """The instance's zone or region."""
    instance: str
    """The instance's name."""
    share: str
    """The file share's name, e.g. `vol1`."""
    ip: str
    """The instance's IP address."""
    size: str
    """The instance's capacity, e.g. `1Ti`."""


class ParallelstoreArgs(TypedDict):
    """An existing Parallelstore instance (Parallelstore is available by invitation only)."""

    location: str
    """The instance's zone."""
    instance: str
    """The instance's name."""
    access_points: list[str]
    """The instance's access point IP addresses."""
    network: str
    """The cluster's VPC, a name or `projects/<project>/global/networks/<name>`: the driver checks they match."""
    size: NotRequired[str]
    """The volume's capacity, 12Ti (default 12Ti), 16Ti or 20Ti."""
    mount_locality: NotRequired[str]
    """Where the driver mounts: `node` or `pod`; default the driver's (pod)."""
    project: NotRequired[str]
    """The instance's project; default: the storage's."""


class LustreArgs(TypedDict):
    """An existing Google Cloud Managed Lustre instance."""

    zone: str
    """The instance's zone."""
    instance: str
    """The instance's name."""
    ip: str
    """The instance's IP address."""
    filesystem: str
    """The instance's file system name."""
    size: str
    """The instance's capacity, e.g. `9000Gi`."""
    project: NotRequired[str]
    """The instance's project; default: the storage's."""
    enable_legacy_lustre_port: NotRequired[bool]
    """The instance was created with gke-support-enabled, or nodes run GKE older than 1.33.2-gke.4655000: the
    cluster's Lustre driver then uses port 6988, for every instance (GKE's `enable_legacy_lustre_port`); default
    false."""


class PersistentDiskArgs(TypedDict):
    """An existing Persistent Disk or Hyperdisk, populated beforehand."""

    location: str
    """The disk's zone, or its region for a regional disk."""
    disk: str
    """The disk's name."""
    size: str
    """The disk's size, e.g. `500Gi`."""
    fs_type: NotRequired[str]
    """Its file system, ext4 (default ext4) or xfs."""
    project: NotRequired[str]
    """The disk's project; default: the storage's."""


class StorageVolumeArgs(TypedDict):
    """One existing storage, mounted by name in the namespaces of the teams it names. Give exactly one of `gcs`,
    `filestore`, `parallelstore`, `lustre`, `disk`."""

    name: str
    """What workloads mount it by (`--mount NAME:/path`): a DNS label of at most 40 characters."""
    teams: list[str]
    """The teams whose jobs may mount it."""
    read_only: NotRequired[bool]
    """Mounted read-only, and granted read access only (default false)."""
    gcs: NotRequired[GcsBucketArgs]
    """A Cloud Storage bucket."""
    filestore: NotRequired[FilestoreShareArgs]
    """A Filestore share."""
    parallelstore: NotRequired[ParallelstoreArgs]
    """A Parallelstore instance."""
    lustre: NotRequired[LustreArgs]
    """A Managed Lustre instance."""
    disk: NotRequired[PersistentDiskArgs]
    """A Persistent Disk: read-only for many teams, or read-write for one."""


class WorkloadTeamArgs(TypedDict):
    """A team whose jobs run in one namespace: a Kueue team of `BatchStackArgs.teams`."""

    name: str
    """The team's name."""
    namespace: NotRequired[str]
    """Its namespace (default: the team's name)."""


class TeamStorageArgs(TypedDict):
    """Each team's service account, the storage its jobs mount and the IAM grants that reach it."""

    project: str
    """The project: Workload Identity members and extra roles live there."""
    teams: NotRequired[list[WorkloadTeamArgs]]
    """The teams (the `BatchStack`'s); default none: the one team `default` in namespace `default`."""
    volumes: NotRequired[list[StorageVolumeArgs]]
    """Existing storage, each mounted by name in the namespaces of the teams it names."""
    roles: NotRequired[dict[str, list[str]]]
    """More IAM roles on the project for a team's jobs, by team name."""
    project_number: NotRequired[str]
    """The project's number: members in GKE's `principal://` form; default the `serviceAccount:` form that needs only
    the project id."""
    grant_access: NotRequired[bool]
    """Create the IAM grants (default true). False: access is managed elsewhere, and no GCP resource is created."""


class TeamStorage(pulumi.ComponentResource):
    """Teams' service accounts, volumes and claims (through the Kubernetes provider in `opts`), and their IAM grants.

    Children: one ServiceAccount per team, a PersistentVolume and claim per storage and team, a
    `gcp.storage.BucketIAMMember` per team and bucket, a `gcp.projects.IAMMember` per team and extra role."""

    service_accounts: pulumi.Output[dict[str, str]]
    """Team -> `namespace/name` of the service account its workloads run as."""
    volumes: pulumi.Output[dict[str, list[str]]]
    """Storage name -> the namespaces where workloads may mount it."""

    def __init__(self, name: str, args: TeamStorageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        # every check before the component registers anything (Args a stack config already read pass as they are)
        spec = read_team_storage(args)
        plan = plan_team_storage(spec)
        super().__init__("tpuplane:index:TeamStorage", name, {}, opts)
        self._plan, self._spec = plan, spec
        child = child_options(self, opts)
        for manifest in plan.service_accounts():
            manifest_resource(manifest, child)
        volumes = plan.volumes()
        created: dict[str, pulumi.Resource] = {}
        for manifest in volumes:  # each volume before the claim bound to it
            bound = manifest["spec"].get("volumeName")
            created[manifest["metadata"]["name"]] = manifest_resource(
                manifest, child_options(self, opts, depends_on=[created[bound]] if bound in created else []))
        if spec.grant_access:
            for identity in plan.identities:
                for grant in identity.bucket_grants:
                    gcp.storage.BucketIAMMember(f"{name}-{identity.namespace}-{grant.bucket}", bucket=grant.bucket,
                                                role=grant.role, member=grant.member, opts=child)
                for grant in identity.project_grants:
                    gcp.projects.IAMMember(f"{name}-{identity.namespace}-{grant.role.replace('/', '-')}",
                                           project=spec.project, role=grant.role, member=grant.member, opts=child)
        self.service_accounts = pulumi.Output.from_input(
            {identity.team: f"{identity.namespace}/{identity.service_account}" for identity in plan.identities})
        self.volumes = pulumi.Output.from_input({s.name: sorted(s.namespaces) for s in plan.storages})
        self.register_outputs({"service_accounts": self.service_accounts, "volumes": self.volumes})

    @property
    def plan(self) -> TeamStoragePlan:
        """What was planned: identities with their grants, and the storage."""
        return self._plan

    @property
    def args(self) -> TeamStorageArgs:
        """The Args these were built from: what `TpuWorkloadArgs.storage` checks a workload's mounts against."""
        return TeamStorageArgs(**self._spec.model_dump(mode="json", exclude_defaults=True))
