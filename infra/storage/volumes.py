"""Existing storage as Kubernetes volumes: a PersistentVolume and a PersistentVolumeClaim per storage entry and team
namespace, which workloads mount by the storage's name.

Each storage kind is one model, one key of a storage entry (`gcs`, `filestore`, `parallelstore`, `lustre`,
`disk`), naming its own CSI driver and GKE add-on; `persistent_volume` and `persistent_volume_claim` render all
kinds. The claim carries the storage's name in every namespace that may use it,
so `--mount data:/data` means the same thing to every team; the volume, cluster-scoped, is named
`<storage>.<namespace>` (a '.' appears in neither part, so two entries can never render the same name) and is
pre-bound to that claim (`claimRef` and `volumeName`; the claim asks for no class with `storageClassName: ""`, the
volume has none), so no other claim takes it and nothing is provisioned dynamically. `Retain`: deleting a volume never touches the data.

Facts, by kind (the drivers' own examples and GKE's documentation):
- Cloud Storage FUSE (`gcsfuse.csi.storage.gke.io`): the bucket is the `volumeHandle`; mount options are gcsfuse
  flags; the file cache is off unless `fileCacheCapacity` is set. Every pod that mounts one carries the annotation
  `gke-gcsfuse/volumes: "true"`, which makes GKE's webhook inject the FUSE sidecar; the sidecar's limits are set to
  "0" (no limit), as xpk does.
  https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/cloud-storage-fuse-csi-driver,
  https://github.com/GoogleCloudPlatform/gcs-fuse-csi-driver/blob/5fcdc04a02/examples/static/pv-pvc-deployment.yaml
- hostNetwork pods (every tpuplane TPU pod: DCN traffic runs on the VM's network): GKE's metadata server does not
  serve them, so the volume attribute `hostNetworkPodKSA: "true"` opts them into the pod's Kubernetes service account
  token, served by the sidecar (v1.17.2-gke.0 or later, which also fills `identityProvider`). The driver reads it only
  for a pod with `hostNetwork: true` (`shouldPopulateIdentityProvider` in `pkg/csi_driver/node.go`), so every GCS
  volume carries it. https://github.com/GoogleCloudPlatform/gcs-fuse-csi-driver/blob/5fcdc04a02/docs/authentication.md
- Filestore (`filestore.csi.storage.gke.io`): handle `modeInstance/<location>/<instance>/<share>`; the node mounts
  `<ip>:/<share>` from the volume attributes.
  https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/filestore-csi-driver
- Parallelstore (`parallelstore.csi.storage.gke.io`): handle `<project>/<location>/<instance>/default-pool/
  default-container`, attributes `accessPoints` (comma-separated IPs) and `network` (the cluster's VPC); capacity one
  of 12Ti, 16Ti, 20Ti; pods carry `gke-parallelstore/volumes: "true"` (xpk).
  https://cloud.google.com/parallelstore/docs/csi-driver-reference
- Managed Lustre (`lustre.csi.storage.gke.io`): handle `<project>/<zone>/<instance>`, attributes `ip` and
  `filesystem`. The driver also accepts `<project>/<zone>/<instance>:<suffix>`, which gives several volumes of one
  instance distinct handles so kubelet mounts each; the suffix here is the namespace.
  https://github.com/GoogleCloudPlatform/lustre-csi-driver/blob/89f1eb73bc/pkg/util/util.go
- Persistent Disk (`pd.csi.storage.gke.io`): handle `projects/<p>/zones/<z>/disks/<d>` (or `regions/<r>`), `ext4`.
  Many nodes may read a disk (ReadOnlyMany, `readOnly`); a read-write disk attaches to one node (ReadWriteOnce), so
  one namespace at most may use it. A zonal disk attaches only in its zone: the volume's node affinity says so.
  https://cloud.google.com/kubernetes-engine/docs/how-to/persistent-volumes/readonlymany-disks
"""

from __future__ import annotations

import copy
import ipaddress
import posixpath
import re
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from tpuplane.infra.args import Source
from tpuplane.infra.errors import ConfigError, Problem, problems_of
from tpuplane.infra.model import Allowed, ConfigModel, Hint
from tpuplane.infra.naming import DNS_LABEL, PROJECT_ID, REGION, ZONE
from tpuplane.infra.pathways.proxy import parse_gcs_location
from tpuplane.infra.pathways.service import DEFAULT_SHM_DIR
from tpuplane.infra.quantity import parse_quantity

# Volume names a pod already uses or the GCS FUSE webhook injects: a storage named so would collide.
RESERVED_VOLUME_PREFIXES = ("gke-", "gcsfuse-")
RESERVED_VOLUME_NAMES = frozenset({"dshm", "sidecar-shared-memory", "shared-tmp"})
STORAGE_NAME_MAX = 40  # a volume name (DNS label), with room for `<storage>.<namespace>` in a label value

ZONE_TOPOLOGY_KEY = "topology.gke.io/zone"  # the Persistent Disk CSI driver's topology key
GCS_NOMINAL_CAPACITY = "5Gi"  # a bucket has no size: the volume and claim only have to agree
PARALLELSTORE_CAPACITIES = ("12Ti", "16Ti", "20Ti")
GCSFUSE_POD_ANNOTATIONS = {
    "gke-gcsfuse/volumes": "true",
    "gke-gcsfuse/cpu-limit": "0",
    "gke-gcsfuse/memory-limit": "0",
    "gke-gcsfuse/ephemeral-storage-limit": "0",
}
PARALLELSTORE_POD_ANNOTATIONS = {"gke-parallelstore/volumes": "true"}
# gcsfuse flags tpuplane derives from other fields: the folder of `gs://bucket/folder`, and `readOnly`.
_DERIVED_GCSFUSE_OPTIONS = {"only-dir": "give the folder in the bucket: gs://<bucket>/<folder>",
                            "ro": "set readOnly: true", "rw": "set readOnly: false"}
_GCSFUSE_OPTION = re.compile(r"[a-z][a-z0-9_-]*(:[a-z0-9_-]+)*([:=][^,\s=]+)?")
_FOLDER = re.compile(r"[A-Za-z0-9_.\-/]*")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")  # instance, share, disk and file system names
_QUANTITY_ALLOWED = "a Kubernetes quantity such as 1Ti, 500Gi or 2048Gi"
_NETWORK = re.compile(rf"(projects/{PROJECT_ID.pattern}/global/networks/)?{DNS_LABEL.pattern}")
_LOCATION = re.compile(rf"{REGION.pattern}(-[a-z])?")
MOUNT_LOCALITIES = ("node", "pod")


def _quantity_problems(path: str, value: str) -> list[Problem]:
    try:
        ok = parse_quantity(value) > 0
    except ValueError:
        ok = False
    return [] if ok else [Problem(path, value, f"{_QUANTITY_ALLOWED}, above zero and below 8Ei")]


def _ip_problems(path: str, value: str) -> list[Problem]:
    try:
        ipaddress.IPv4Address(value)
    except ValueError:
        return [Problem(path, value, "an IPv4 address, e.g. 10.90.0.2", "the instance's IP address in your VPC")]
    return []


def _pattern_problems(path: str, value: str | None, pattern: re.Pattern[str], allowed: str, hint: str = ""
                      ) -> list[Problem]:
    if value is None:  # an optional field left out
        return []
    return [] if pattern.fullmatch(value) and len(value) <= 253 else [Problem(path, value, allowed, hint)]


def _project_problems(source: Source, project: str | None) -> list[Problem]:
    return _pattern_problems(source.path("project"), project, PROJECT_ID, "a GCP project id, e.g. acme-ml",
                             "leave it out for the stack's project")


# ---- the kinds: each one key of a storage entry -------------------------------------------------------------------


class StorageKind(ConfigModel):
    """What every kind says of itself: its key in a storage entry and its CSI driver (whose GKE add-on
    `tpuplane.infra.fleet.cluster.CSI_DRIVER_ADDONS` names)."""

    kind: ClassVar[str]  # its key in a storage entry, and its CSI driver's entry in CSI_DRIVER_ADDONS
    driver: ClassVar[str]

    def problems(self, source: Source) -> list[Problem]:
        raise NotImplementedError

    def handle(self, namespace: str) -> str:
        raise NotImplementedError

    def attributes(self) -> dict[str, str]:
        return {}

    def options(self) -> list[str]:
        return []

    def capacity(self) -> str:
        return getattr(self, "size")

    def with_project(self, project: str) -> "StorageKind":
        """The kind with the stack's project where it names none (instances and disks live in a project)."""
        if "project" in type(self).model_fields and getattr(self, "project") is None:
            return self.model_copy(update={"project": project})
        return self



class GcsBucket(StorageKind):
    """A Cloud Storage bucket (or one folder of it) through Cloud Storage FUSE."""

    kind: ClassVar[str] = "gcs"
    driver: ClassVar[str] = "gcsfuse.csi.storage.gke.io"

    bucket: Annotated[str, Allowed("gs://<bucket>[/<folder>], or a bucket name")]
    mount_options: list[str] = []
    file_cache_capacity: str | None = None
    file_cache_for_range_read: bool = False
    metadata_cache_ttl_seconds: int | None = None

    @property
    def bucket_name(self) -> str:
        return parse_gcs_location(self.bucket).removeprefix("gs://").partition("/")[0]

    @property
    def folder(self) -> str:
        return parse_gcs_location(self.bucket).removeprefix("gs://").partition("/")[2]

    def problems(self, source: Source) -> list[Problem]:
        bucket_path = source.path("bucket")
        problems = problems_of(lambda: parse_gcs_location(self.bucket, path=bucket_path))
        if not problems and not _FOLDER.fullmatch(self.folder):
            problems.append(Problem(bucket_path, self.bucket, "gs://<bucket>[/<folder>], the folder of letters, "
                                    "digits, '/', '-', '_' and '.'", "gcsfuse mounts it with only-dir=<folder>"))
        for i, option in enumerate(self.mount_options):
            where = source.path("mount_options", i)
            name = re.split("[:=]", option, maxsplit=1)[0]
            if name in _DERIVED_GCSFUSE_OPTIONS:
                problems.append(Problem(where, option, "a gcsfuse flag tpuplane does not set itself",
                                        _DERIVED_GCSFUSE_OPTIONS[name]))
            elif not _GCSFUSE_OPTION.fullmatch(option):
                problems.append(Problem(where, option, "one gcsfuse flag per item: name[=value] or section:key:value, "
                                        "no commas or spaces", "e.g. implicit-dirs, uid=1001, "
                                                               "metadata-cache:ttl-secs:600"))
        if self.file_cache_capacity is not None and self.file_cache_capacity != "-1":
            problems += _quantity_problems(source.path("file_cache_capacity"), self.file_cache_capacity)
        if self.file_cache_for_range_read and self.file_cache_capacity is None:
            problems.append(Problem(source.path("file_cache_for_range_read"), True, "false without a file cache",
                                    f"set {source.key('file_cache_capacity')} to turn the file cache on"))
        ttl = self.metadata_cache_ttl_seconds
        if ttl is not None and ttl < -1:
            problems.append(Problem(source.path("metadata_cache_ttl_seconds"), ttl,
                                    "seconds, 0 or more, or -1 (never expires)"))
        return problems

    def handle(self, namespace: str) -> str:
        return self.bucket_name

    def attributes(self) -> dict[str, str]:
        attributes = {"hostNetworkPodKSA": "true"}
        if self.file_cache_capacity is not None:
            attributes["fileCacheCapacity"] = self.file_cache_capacity
            attributes["fileCacheForRangeRead"] = "true" if self.file_cache_for_range_read else "false"
        if self.metadata_cache_ttl_seconds is not None:
            attributes["metadataCacheTTLSeconds"] = str(self.metadata_cache_ttl_seconds)
        return attributes

    def options(self) -> list[str]:
        return [*self.mount_options, *([f"only-dir={self.folder}"] if self.folder else [])]

    def capacity(self) -> str:
        return GCS_NOMINAL_CAPACITY


class FilestoreShare(StorageKind):
    """The file share of an existing Filestore instance."""

    kind: ClassVar[str] = "filestore"
    driver: ClassVar[str] = "filestore.csi.storage.gke.io"

    location: str
    instance: str
    share: str
    ip: str
    size: str

    def problems(self, source: Source) -> list[Problem]:
        return (_pattern_problems(source.path("location"), self.location, _LOCATION,
                                  "a zone or region, e.g. us-east5-b")
                + _pattern_problems(source.path("instance"), self.instance, DNS_LABEL, "a Filestore instance name")
                + _pattern_problems(source.path("share"), self.share, _TOKEN, "the file share's name, e.g. vol1")
                + _ip_problems(source.path("ip"), self.ip) + _quantity_problems(source.path("size"), self.size))

    def handle(self, namespace: str) -> str:
        return f"modeInstance/{self.location}/{self.instance}/{self.share}"

    def attributes(self) -> dict[str, str]:
        return {"ip": self.ip, "volume": self.share}


class ParallelstoreInstance(StorageKind):
    """An existing Parallelstore instance (available by invitation only)."""

    kind: ClassVar[str] = "parallelstore"
    driver: ClassVar[str] = "parallelstore.csi.storage.gke.io"

    location: str
    instance: str
    access_points: list[str]
    network: str
    size: str = PARALLELSTORE_CAPACITIES[0]
    mount_locality: str | None = None
    project: str | None = None

    def problems(self, source: Source) -> list[Problem]:
        problems = (_project_problems(source, self.project)
                    + _pattern_problems(source.path("location"), self.location, _LOCATION, "a zone, e.g. us-east5-b")
                    + _pattern_problems(source.path("instance"), self.instance, DNS_LABEL,
                                        "a Parallelstore instance name")
                    + _pattern_problems(source.path("network"), self.network, _NETWORK,
                                        "a VPC name or projects/<project>/global/networks/<name>",
                                        "the cluster's network: the driver checks they match"))
        if not self.access_points:
            problems.append(Problem(source.path("access_points"), [], "the instance's access point IPs, at least one"))
        for i, ip in enumerate(self.access_points):
            problems += _ip_problems(source.path("access_points", i), ip)
        if self.size not in PARALLELSTORE_CAPACITIES:
            problems.append(Problem(source.path("size"), self.size, f"one of {', '.join(PARALLELSTORE_CAPACITIES)}",
                                    "the values the Parallelstore CSI driver accepts for a volume's capacity"))
        if self.mount_locality is not None and self.mount_locality not in MOUNT_LOCALITIES:
            problems.append(Problem(source.path("mount_locality"), self.mount_locality, " or ".join(MOUNT_LOCALITIES)))
        return problems

    def handle(self, namespace: str) -> str:
        return f"{self.project}/{self.location}/{self.instance}/default-pool/default-container"

    def attributes(self) -> dict[str, str]:
        attributes = {"accessPoints": ",".join(self.access_points), "network": self.network}
        if self.mount_locality:
            attributes["mountLocality"] = self.mount_locality
        return attributes


class LustreInstance(StorageKind):
    """An existing Google Cloud Managed Lustre instance.

    `enable_legacy_lustre_port` is GKE's cluster add-on setting (`addonsConfig.lustreCsiDriverConfig.
    enableLegacyLustrePort`): the driver then runs LNet on port 6988, "a workaround for a port conflict with the
    gke-metadata-server" (which every tpuplane cluster runs: Workload Identity), "required ONLY" for nodes older
    than GKE 1.33.2-gke.4655000 or an instance created with `gke-support-enabled`
    (https://cloud.google.com/python/docs/reference/container/latest/google.cloud.container_v1.types.LustreCsiDriverConfig).
    One setting serves the whole cluster, so every Lustre entry of a stack must agree on it."""

    kind: ClassVar[str] = "lustre"
    driver: ClassVar[str] = "lustre.csi.storage.gke.io"

    zone: str
    instance: str
    ip: str
    filesystem: str
    size: str
    project: str | None = None
    enable_legacy_lustre_port: bool = False

    def problems(self, source: Source) -> list[Problem]:
        return (_project_problems(source, self.project)
                + _pattern_problems(source.path("zone"), self.zone, ZONE, "a zone, e.g. us-east5-b")
                + _pattern_problems(source.path("instance"), self.instance, DNS_LABEL,
                                    "a Managed Lustre instance name")
                + _pattern_problems(source.path("filesystem"), self.filesystem, _TOKEN,
                                    "the instance's file system name")
                + _ip_problems(source.path("ip"), self.ip) + _quantity_problems(source.path("size"), self.size))

    def handle(self, namespace: str) -> str:
        return f"{self.project}/{self.zone}/{self.instance}:{namespace}"

    def attributes(self) -> dict[str, str]:
        return {"filesystem": self.filesystem, "ip": self.ip}


class PersistentDisk(StorageKind):
    """An existing Persistent Disk or Hyperdisk, populated beforehand."""

    kind: ClassVar[str] = "disk"
    driver: ClassVar[str] = "pd.csi.storage.gke.io"

    location: str
    disk: str
    size: str
    fs_type: str = "ext4"
    project: str | None = None

    @property
    def zonal(self) -> bool:
        return ZONE.fullmatch(self.location) is not None

    def problems(self, source: Source) -> list[Problem]:
        return (_project_problems(source, self.project)
                + _pattern_problems(source.path("location"), self.location, _LOCATION,
                                    "the disk's zone (e.g. us-east5-b), or its region for a regional disk")
                + _pattern_problems(source.path("disk"), self.disk, DNS_LABEL, "a disk name")
                + _quantity_problems(source.path("size"), self.size)
                + ([] if self.fs_type in ("ext4", "xfs") else
                   [Problem(source.path("fs_type"), self.fs_type, "ext4 or xfs")]))

    def handle(self, namespace: str) -> str:
        scope = "zones" if self.zonal else "regions"
        return f"projects/{self.project}/{scope}/{self.location}/disks/{self.disk}"


STORAGE_KINDS: dict[str, type[StorageKind]] = {cls.kind: cls for cls in
                                               (GcsBucket, FilestoreShare, ParallelstoreInstance, LustreInstance,
                                                PersistentDisk)}


class StorageEntry(ConfigModel):
    """`StorageVolumeArgs`, one `tpuplane:storage.volumes` entry: existing storage, the teams that may mount it,
    and whether they may write. Exactly one kind key says what it is."""

    name: Annotated[str, Hint("workloads mount the storage by this name: --mount NAME:/path")]
    teams: Annotated[list[str], Allowed("a list of team names")]
    read_only: bool = False
    gcs: GcsBucket | None = None
    filestore: FilestoreShare | None = None
    parallelstore: ParallelstoreInstance | None = None
    lustre: LustreInstance | None = None
    disk: PersistentDisk | None = None

    @property
    def kinds(self) -> list[str]:
        """The kind keys this entry gives (exactly one, once its rules passed)."""
        return [kind for kind in STORAGE_KINDS if getattr(self, kind) is not None]

    @property
    def source(self) -> StorageKind:
        """The storage itself; valid once the entry's rules passed."""
        return getattr(self, self.kinds[0])


@dataclass(frozen=True)
class Storage:
    """One storage entry resolved for rendering: its kind (with the stack's project filled in), whether jobs may
    write to it, and the team namespaces that may mount it."""

    name: str
    source: StorageKind
    read_only: bool
    namespaces: tuple[str, ...]

    @property
    def kind(self) -> str:
        return self.source.kind

    @property
    def single_writer(self) -> bool:
        return single_writer(self.source, self.read_only)


def single_writer(source: StorageKind, read_only: bool) -> bool:
    """A read-write disk attaches to one node only (ReadWriteOnce)."""
    return isinstance(source, PersistentDisk) and not read_only


def entry_problems(entry: StorageEntry, source: Source, teams: list[str] | None) -> list[Problem]:
    """Every rule one storage entry must pass; `teams` are the names of the teams of the stack (or the Args), None
    when they could not be read (their section reports why)."""
    problems = []
    name_path = source.path("name")
    if not DNS_LABEL.fullmatch(entry.name) or len(entry.name) > STORAGE_NAME_MAX:
        problems.append(Problem(name_path, entry.name, f"a DNS label of at most {STORAGE_NAME_MAX} characters",
                                "workloads mount the storage by this name; it names the volume in their pods"))
    elif entry.name in RESERVED_VOLUME_NAMES or entry.name.startswith(RESERVED_VOLUME_PREFIXES):
        problems.append(Problem(name_path, entry.name, "a name other than dshm, shared-tmp, sidecar-shared-memory "
                                "and names starting with gke- or gcsfuse-", "tpuplane and GKE name pod volumes so"))
    if not entry.teams:
        problems.append(Problem(source.path("teams"), [], "at least one team that may mount it"
                                + (f": {', '.join(teams)}" if teams else "")))
    for i, team in enumerate(entry.teams):
        if teams is not None and team not in teams:
            problems.append(Problem(source.path("teams", i), team, f"a team of the stack: {', '.join(teams)}",
                                    "storage is mounted in the namespaces of the teams named here"))
        elif team in entry.teams[:i]:
            problems.append(Problem(source.path("teams", i), team, "each team once"))
    kinds = entry.kinds
    if len(kinds) != 1:
        keys = [source.key(kind) for kind in STORAGE_KINDS]
        problems.append(Problem(source.path(kinds[1]) if len(kinds) > 1 else source.root,
                                ", ".join(source.key(k) for k in kinds) or None,
                                f"exactly one of {', '.join(keys)}", "each entry is one bucket, file system or disk"))
        return problems
    if single_writer(entry.source, entry.read_only) and len(set(entry.teams)) > 1:
        problems.append(Problem(source.path("teams"), list(entry.teams), "one team for a read-write disk",
                                "a read-write Persistent Disk attaches to one node (ReadWriteOnce); set "
                                f"{source.key('read_only')}: true to share it"))
    return problems + entry.source.problems(source.at(kinds[0]))


# ---- rendering ----------------------------------------------------------------------------------------------------

MANAGED_BY_LABELS = {"app.kubernetes.io/managed-by": "tpuplane"}
STORAGE_LABEL = "tpuplane.dev/storage"


def volume_name(storage: Storage, namespace: str) -> str:
    return f"{storage.name}.{namespace}"


def _access_modes(storage: Storage) -> list[str]:
    if storage.read_only:
        return ["ReadOnlyMany"]
    return ["ReadWriteOnce"] if storage.single_writer else ["ReadWriteMany"]


def _labels(storage: Storage) -> dict[str, str]:
    return {**MANAGED_BY_LABELS, STORAGE_LABEL: storage.name}


def persistent_volume(storage: Storage, namespace: str) -> dict[str, Any]:
    """The volume of `storage` that the claim in `namespace` binds, and no other."""
    source = storage.source
    csi: dict[str, Any] = {"driver": source.driver, "volumeHandle": source.handle(namespace)}
    if attributes := source.attributes():
        csi["volumeAttributes"] = attributes
    if isinstance(source, PersistentDisk):
        csi["fsType"] = source.fs_type
    if storage.read_only:
        csi["readOnly"] = True
    spec: dict[str, Any] = {
        "accessModes": _access_modes(storage),
        "capacity": {"storage": source.capacity()},
        "claimRef": {"name": storage.name, "namespace": namespace},
        "csi": csi,
        "persistentVolumeReclaimPolicy": "Retain",
        # No storageClassName: a volume without one is of no class, which its claim asks for. (The Kubernetes
        # provider drops an empty one from a volume's inputs: sent, it would never match the stack's state.)
        "volumeMode": "Filesystem",
    }
    if options := source.options():
        spec["mountOptions"] = options
    if isinstance(source, PersistentDisk) and source.zonal:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": ZONE_TOPOLOGY_KEY, "operator": "In", "values": [source.location]}]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"labels": _labels(storage), "name": volume_name(storage, namespace)}, "spec": spec}


def persistent_volume_claim(storage: Storage, namespace: str) -> dict[str, Any]:
    """The claim workloads in `namespace` mount, named after the storage."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"labels": _labels(storage), "name": storage.name, "namespace": namespace},
        "spec": {
            "accessModes": _access_modes(storage),
            "resources": {"requests": {"storage": storage.source.capacity()}},
            "storageClassName": "",
            "volumeMode": "Filesystem",
            "volumeName": volume_name(storage, namespace),
        },
    }


def render_storage(storages: list[Storage]) -> list[dict[str, Any]]:
    """Every volume and claim, by storage name, then namespace: the order of the config does not matter."""
    objects = []
    for storage in sorted(storages, key=lambda s: s.name):
        for namespace in sorted(storage.namespaces):
            objects += [persistent_volume(storage, namespace), persistent_volume_claim(storage, namespace)]
    return objects


# ---- mounts -------------------------------------------------------------------------------------------------------

# Where tpuplane and GKE mount things in a TPU pod: a storage mounted there would hide them or be hidden.
RESERVED_MOUNT_PATHS = ("/dev", "/proc", "/sys", "/etc", "/var/run", DEFAULT_SHM_DIR)


@dataclass(frozen=True)
class Mount:
    """`NAME:/path[:ro]`: a storage of the stack at a path in the workload's containers."""

    storage: str
    path: str
    read_only: bool = False

    @classmethod
    def parse(cls, text: str, *, path: str = "--mount") -> "Mount":
        name, sep, rest = text.partition(":")
        mount_path, _, flag = rest.partition(":")
        if not sep or not name or not mount_path or flag not in ("", "ro", "rw"):
            raise ConfigError.at(path, text, "NAME:/path or NAME:/path:ro", "NAME is a storage entry of the stack")
        return cls(name, mount_path, flag == "ro")

    def __str__(self) -> str:
        return f"{self.storage}:{self.path}{':ro' if self.read_only else ''}"


def lustre_port_problems(entries: list[StorageEntry], source: Source) -> list[Problem]:
    """The cluster's Lustre driver has one port: every Lustre entry asks for the same one as the first."""
    lustre = [(i, entry.lustre) for i, entry in enumerate(entries) if entry.lustre is not None]
    if not lustre:
        return []
    first, wanted = lustre[0][0], lustre[0][1].enable_legacy_lustre_port
    return [Problem(source.path("volumes", i, "lustre", "enable_legacy_lustre_port"),
                    instance.enable_legacy_lustre_port, f"{wanted}, as volumes[{first}] has it",
                    "GKE sets the Lustre driver's port for the whole cluster: every instance a cluster mounts "
                    "must take the same one")
            for i, instance in lustre[1:] if instance.enable_legacy_lustre_port != wanted]


def lustre_legacy_port(entries: list[StorageEntry]) -> bool:
    """Whether the cluster's Lustre driver runs on the legacy port (checked: the entries agree)."""
    return any(entry.lustre is not None and entry.lustre.enable_legacy_lustre_port for entry in entries)


def mount_path(path: str, index: int) -> str:
    """Where mount `index` was given: `mounts[1]` of a file's or Args' list, `--mount` on the command line (a
    repeated option has no index: the error quotes the value given)."""
    return path if path.startswith("--") else f"{path}[{index}]"


def mount_problems(mounts: list[Mount], storages: list[Storage], *, namespace: str, pods: int,
                   path: str = "--mount") -> list[Problem]:
    """Every rule the mounts of one workload break: the storage exists and `namespace` may use it, paths are
    absolute, distinct and outside the system's, a read-only storage is mounted read-only, and a read-write disk
    serves a workload of one pod."""
    by_name = {s.name: s for s in storages}
    problems, seen_paths = [], []
    for i, mount in enumerate(mounts):
        where = mount_path(path, i)
        storage = by_name.get(mount.storage)
        if storage is None:
            listed = ", ".join(sorted(by_name)) or "none: the stack has no storage entries"
            problems.append(Problem(where, str(mount), f"a storage of the stack: {listed}"))
            continue
        if namespace not in storage.namespaces:
            problems.append(Problem(where, str(mount), f"a storage namespace {namespace} may use; "
                                    f"{storage.name} is for {', '.join(sorted(storage.namespaces))}",
                                    "add the team to the storage's teams, or run in one of those namespaces"))
        normal = posixpath.normpath(mount.path)
        if not mount.path.startswith("/") or normal != mount.path.rstrip("/") or normal == "/" or "//" in mount.path \
                or any(c in mount.path for c in ":,\n\r\t\\") or len(mount.path) > 1024:
            problems.append(Problem(where, str(mount), "an absolute path other than /, without '..', '.' or '//'"))
        elif any(normal == p or normal.startswith(p + "/") for p in RESERVED_MOUNT_PATHS):
            problems.append(Problem(where, str(mount), f"a path outside {', '.join(RESERVED_MOUNT_PATHS)}"))
        elif normal in seen_paths:
            problems.append(Problem(where, str(mount), "a path no other mount of the workload uses"))
        seen_paths.append(normal)
        if storage.read_only and not mount.read_only:
            problems.append(Problem(where, str(mount), f"{mount.storage}:{mount.path}:ro",
                                    f"storage {storage.name} is read-only"))
        if storage.single_writer and pods > 1:
            problems.append(Problem(where, str(mount), "a read-write disk in a workload of one pod",
                                    f"this workload has {pods} pods on as many nodes, and a read-write Persistent Disk "
                                    "attaches to one node; make the storage readOnly, or use a bucket or file system"))
    names = [m.storage for m in mounts]
    problems += [Problem(mount_path(path, i), str(m), "each storage mounted once")
                 for i, m in enumerate(mounts) if m.storage in names[:i]]
    return problems


@dataclass(frozen=True)
class PodMounts:
    """What a workload's pods get for their mounts: volumes, each container's mounts, pod annotations."""

    volumes: list[dict[str, Any]]
    volume_mounts: list[dict[str, Any]]
    annotations: dict[str, str]
    kinds: frozenset[str]


def pod_mounts(mounts: list[Mount], storages: list[Storage]) -> PodMounts:
    """The pod side of checked mounts: each storage's claim as a volume named after it."""
    by_name = {s.name: s for s in storages}
    volumes, volume_mounts, kinds = [], [], set()
    for mount in mounts:
        storage = by_name[mount.storage]
        kinds.add(storage.kind)
        read_only = storage.read_only or mount.read_only
        claim: dict[str, Any] = {"claimName": storage.name}
        if read_only:
            claim["readOnly"] = True
        volumes.append({"name": storage.name, "persistentVolumeClaim": claim})
        volume_mounts.append({"mountPath": posixpath.normpath(mount.path), "name": storage.name,
                              **({"readOnly": True} if read_only else {})})
    annotations = {**(GCSFUSE_POD_ANNOTATIONS if GcsBucket.kind in kinds else {}),
                   **(PARALLELSTORE_POD_ANNOTATIONS if ParallelstoreInstance.kind in kinds else {})}
    return PodMounts(volumes, volume_mounts, dict(sorted(annotations.items())), frozenset(kinds))


def with_pod_mounts(pod: dict[str, Any], metadata: dict[str, Any], mounts: PodMounts | None, container: str
                    ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The pod with the storage mounted in its container `container` (if it has one), and its metadata with the
    drivers' annotations. Copies: each job's pods are their own (no YAML anchors)."""
    named = [c for c in pod.get("containers", []) if c["name"] == container]
    if mounts is None or not mounts.volumes or not named:
        return pod, metadata
    containers = [{**c, "volumeMounts": [*c.get("volumeMounts", []), *copy.deepcopy(mounts.volume_mounts)]}
                  if c in named else c for c in pod["containers"]]
    pod = {**pod, "containers": containers, "volumes": [*pod.get("volumes", []), *copy.deepcopy(mounts.volumes)]}
    return pod, {**metadata, "annotations": dict(mounts.annotations)} if mounts.annotations else metadata
