"""Existing storage as PersistentVolumes and claims, one pair per storage and team namespace, mounted by name."""

import pytest

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.k8s_validation import validate_manifests
from tpuplane.infra.storage.volumes import (
    FilestoreShare,
    GcsBucket,
    LustreInstance,
    Mount,
    ParallelstoreInstance,
    PersistentDisk,
    Storage,
    check_storages,
    gcs_ephemeral_volume,
    mount_problems,
    persistent_volume,
    persistent_volume_claim,
    pod_mounts,
    render_storage,
    required_addons,
    storage_problems,
)

SOURCES = {
    "gcsfuse": GcsBucket("gs://acme-data/imagenet", mount_options=("implicit-dirs",), file_cache_capacity="200Gi",
                         file_cache_for_range_read=True, metadata_cache_ttl_seconds=-1),
    "filestore": FilestoreShare("us-east5-b", "shared", "vol1", "10.90.0.2", "1Ti"),
    "parallelstore": ParallelstoreInstance("acme-ml", "us-east5-b", "scratch", ("10.90.1.2", "10.90.1.3"),
                                           "projects/acme-ml/global/networks/tpu-vpc"),
    "lustre": LustreInstance("acme-ml", "us-east5-b", "lustre1", "10.90.2.2", "lfs", "9000Gi"),
    "pd": PersistentDisk("acme-ml", "us-east5-b", "dataset-disk", "500Gi"),
}


def storage(kind="gcsfuse", *, name="data", read_only=True, namespaces=("team-a", "team-b"), **source_changes):
    source = SOURCES[kind]
    if source_changes:
        source = type(source)(**{**source.__dict__, **source_changes})
    return Storage(name, source, read_only, namespaces)


@pytest.mark.parametrize("kind", list(SOURCES))
@pytest.mark.parametrize("read_only", [True, False])
def test_every_kind_renders_volumes_and_claims_the_api_server_accepts(kind, read_only):
    namespaces = ("team-a",) if kind == "pd" and not read_only else ("team-a", "team-b")
    entry = storage(kind, read_only=read_only, namespaces=namespaces)
    assert storage_problems(entry, "tpuplane:storage[0]") == []

    validate_manifests(render_storage([entry]))


@pytest.mark.parametrize("kind", list(SOURCES))
def test_each_claim_binds_only_its_own_volume(kind):
    entry = storage(kind)
    volume, claim = persistent_volume(entry, "team-b"), persistent_volume_claim(entry, "team-b")

    assert claim["metadata"] == {**claim["metadata"], "name": "data", "namespace": "team-b"}
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"] == "data.team-b"
    assert volume["spec"]["claimRef"] == {"name": "data", "namespace": "team-b"}
    assert volume["spec"]["storageClassName"] == claim["spec"]["storageClassName"] == ""
    assert volume["spec"]["capacity"]["storage"] == claim["spec"]["resources"]["requests"]["storage"]
    assert volume["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_render_storage_is_ordered_by_name_then_namespace_whatever_the_config_order():
    a, b = storage(name="b", namespaces=("z", "a")), storage("filestore", name="a", namespaces=("m",))

    names = [(o["kind"], o["metadata"]["name"]) for o in render_storage([a, b])]

    assert names == [("PersistentVolume", "a.m"), ("PersistentVolumeClaim", "a"), ("PersistentVolume", "b.a"),
                     ("PersistentVolumeClaim", "b"), ("PersistentVolume", "b.z"), ("PersistentVolumeClaim", "b")]


def test_gcs_bucket_is_the_handle_its_folder_an_only_dir_option_and_host_network_pods_opt_in():
    csi = persistent_volume(storage(), "team-a")["spec"]

    assert csi["csi"]["volumeHandle"] == "acme-data"
    assert csi["mountOptions"] == ["implicit-dirs", "only-dir=imagenet"]
    assert csi["csi"]["volumeAttributes"] == {"hostNetworkPodKSA": "true", "fileCacheCapacity": "200Gi",
                                              "fileCacheForRangeRead": "true", "metadataCacheTTLSeconds": "-1"}


def test_read_only_is_enforced_by_access_mode_and_by_the_driver():
    spec = persistent_volume(storage(read_only=True), "team-a")["spec"]

    assert spec["accessModes"] == ["ReadOnlyMany"] and spec["csi"]["readOnly"] is True


def test_read_write_file_systems_are_shared_but_a_read_write_disk_attaches_to_one_node():
    assert persistent_volume(storage("filestore", read_only=False), "t")["spec"]["accessModes"] == ["ReadWriteMany"]
    disk = persistent_volume(storage("pd", read_only=False, namespaces=("t",)), "t")["spec"]
    assert disk["accessModes"] == ["ReadWriteOnce"] and "readOnly" not in disk["csi"]


def test_lustre_volumes_of_one_instance_get_distinct_handles():
    entry = storage("lustre")

    handles = {persistent_volume(entry, ns)["spec"]["csi"]["volumeHandle"] for ns in entry.namespaces}

    assert handles == {"acme-ml/us-east5-b/lustre1:team-a", "acme-ml/us-east5-b/lustre1:team-b"}


def test_a_zonal_disk_pins_its_volume_to_its_zone_and_a_regional_one_does_not():
    zonal = persistent_volume(storage("pd"), "t")["spec"]
    regional = persistent_volume(storage("pd", location="us-east5"), "t")["spec"]

    assert zonal["csi"]["volumeHandle"] == "projects/acme-ml/zones/us-east5-b/disks/dataset-disk"
    assert zonal["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["us-east5-b"]
    assert regional["csi"]["volumeHandle"] == "projects/acme-ml/regions/us-east5/disks/dataset-disk"
    assert "nodeAffinity" not in regional


def test_filestore_and_parallelstore_handles_and_attributes_follow_their_drivers():
    filestore = persistent_volume(storage("filestore"), "t")["spec"]["csi"]
    parallelstore = persistent_volume(storage("parallelstore", mount_locality="node"), "t")["spec"]["csi"]

    assert (filestore["volumeHandle"], filestore["volumeAttributes"]) == (
        "modeInstance/us-east5-b/shared/vol1", {"ip": "10.90.0.2", "volume": "vol1"})
    assert parallelstore["volumeHandle"] == "acme-ml/us-east5-b/scratch/default-pool/default-container"
    assert parallelstore["volumeAttributes"] == {"accessPoints": "10.90.1.2,10.90.1.3", "mountLocality": "node",
                                                 "network": "projects/acme-ml/global/networks/tpu-vpc"}


def test_the_ephemeral_form_of_a_bucket_carries_the_same_attributes_inline():
    volume = gcs_ephemeral_volume(storage())

    validate_manifests([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "c", "image": "busybox"}], "volumes": [volume]}}])
    assert volume["csi"]["volumeAttributes"]["bucketName"] == "acme-data"
    assert volume["csi"]["volumeAttributes"]["mountOptions"] == "implicit-dirs,only-dir=imagenet"


def test_only_a_bucket_has_an_ephemeral_form():
    with pytest.raises(ValueError, match="only gcsfuse"):
        gcs_ephemeral_volume(storage("filestore"))


def test_required_addons_are_the_drivers_of_the_kinds_in_use():
    assert required_addons([storage(), storage("lustre", name="l"), storage(name="again")]) == [
        "gcs_fuse_csi_driver_config", "lustre_csi_driver_config"]


BAD_STORAGE = [
    ({"name": "Data"}, "tpuplane:storage[0].name", "a DNS label"),
    ({"name": "x" * 41}, "tpuplane:storage[0].name", "at most 40"),
    ({"name": "dshm"}, "tpuplane:storage[0].name", "a name other than dshm"),
    ({"name": "gke-gcsfuse-cache"}, "tpuplane:storage[0].name", "a name other than dshm"),
    ({"namespaces": ()}, "tpuplane:storage[0].teams", "at least one team"),
    ({"namespaces": ("a", "a")}, "tpuplane:storage[0].teams", "each team once"),
    ({"namespaces": ("Team A",)}, "tpuplane:storage[0].teams[0]", "a team namespace"),
    ({"kind": "pd", "read_only": False}, "tpuplane:storage[0].teams", "one team for a read-write disk"),
    ({"bucket": "gs://Acme"}, "tpuplane:storage[0].bucket", "bucket names are lowercase"),
    ({"bucket": "gs://goog-data"}, "tpuplane:storage[0].bucket", "GCS reserves names"),
    ({"bucket": "gs://10.0.0.1"}, "tpuplane:storage[0].bucket", "IP address"),
    ({"bucket": "ab"}, "tpuplane:storage[0].bucket", "3-63 characters"),
    ({"mount_options": ("implicit-dirs,ro",)}, "tpuplane:storage[0].mountOptions", "one gcsfuse flag per item"),
    ({"mount_options": ("only-dir=x",)}, "tpuplane:storage[0].mountOptions", "gs://<bucket>/<folder>"),
    ({"mount_options": ("ro",)}, "tpuplane:storage[0].mountOptions", "set readOnly: true"),
    ({"mount_options": ("uid=1 --foo",)}, "tpuplane:storage[0].mountOptions", "no commas or spaces"),
    ({"file_cache_capacity": "lots"}, "tpuplane:storage[0].fileCacheCapacity", "a Kubernetes quantity"),
    ({"file_cache_capacity": "0"}, "tpuplane:storage[0].fileCacheCapacity", "above zero"),
    ({"file_cache_capacity": "1e400"}, "tpuplane:storage[0].fileCacheCapacity", "below 8Ei"),
    ({"bucket": "gs://acme/a,b"}, "tpuplane:storage[0].bucket", "only-dir=<folder>"),
    ({"bucket": "gs://acme/<b>"}, "tpuplane:storage[0].bucket", "only-dir=<folder>"),
    ({"file_cache_capacity": None}, "tpuplane:storage[0].fileCacheForRangeRead", "without a file cache"),
    ({"metadata_cache_ttl_seconds": -2}, "tpuplane:storage[0].metadataCacheTtlSeconds", "-1 (never expires)"),
    ({"kind": "filestore", "ip": "10.0.0.300"}, "tpuplane:storage[0].ip", "an IPv4 address"),
    ({"kind": "filestore", "location": "mars"}, "tpuplane:storage[0].location", "a zone or region"),
    ({"kind": "filestore", "share": "a b"}, "tpuplane:storage[0].share", "file share"),
    ({"kind": "filestore", "size": "1Tb"}, "tpuplane:storage[0].size", "a Kubernetes quantity"),
    ({"kind": "parallelstore", "access_points": ()}, "tpuplane:storage[0].accessPoints", "at least one"),
    ({"kind": "parallelstore", "access_points": ("10.0.0.1,10.0.0.2",)}, "tpuplane:storage[0].accessPoints[0]",
     "an IPv4 address"),
    ({"kind": "parallelstore", "size": "13Ti"}, "tpuplane:storage[0].size", "one of 12Ti, 16Ti, 20Ti"),
    ({"kind": "parallelstore", "network": "my net"}, "tpuplane:storage[0].network", "a VPC name"),
    ({"kind": "parallelstore", "mount_locality": "cluster"}, "tpuplane:storage[0].mountLocality", "node or pod"),
    ({"kind": "lustre", "zone": "us-east5"}, "tpuplane:storage[0].zone", "a zone"),
    ({"kind": "lustre", "project": "Acme"}, "tpuplane:storage[0].project", "a GCP project id"),
    ({"kind": "pd", "fs_type": "ntfs"}, "tpuplane:storage[0].fsType", "ext4 or xfs"),
    ({"kind": "pd", "disk": "disk\nname"}, "tpuplane:storage[0].disk", "a disk name"),
]


@pytest.mark.parametrize(("changes", "path", "allowed"), BAD_STORAGE, ids=[p + ":" + str(c) for c, p, _ in BAD_STORAGE])
def test_bad_storage_entries_are_refused_with_their_path(changes, path, allowed):
    changes = dict(changes)
    kind = changes.pop("kind", "gcsfuse")
    entry = storage(kind, **{k: changes.pop(k) for k in ("name", "read_only", "namespaces") if k in changes},
                    **changes)

    with pytest.raises(ConfigError) as caught:
        check_storages([entry], "tpuplane:storage")

    assert any(p.path == path and allowed in f"{p.allowed} {p.hint}" for p in caught.value.problems), caught.value


def test_two_entries_may_not_share_a_name():
    with pytest.raises(ConfigError, match=r"storage\[1\]\.name: got 'data'; allowed: a name no other"):
        check_storages([storage(), storage("lustre")], "tpuplane:storage")


# ---- mounts -----------------------------------------------------------------------------------------------------


def test_mount_parses_name_path_and_read_only_flag():
    assert Mount.parse("data:/data:ro") == Mount("data", "/data", True)
    assert Mount.parse("data:/data") == Mount("data", "/data", False)
    assert str(Mount("data", "/data", True)) == "data:/data:ro"


@pytest.mark.parametrize("text", ["data", "data:", ":/data", "data:/d:rx"])
def test_a_malformed_mount_is_refused(text):
    with pytest.raises(ConfigError, match="NAME:/path"):
        Mount.parse(text)


BAD_MOUNTS = [
    ("nope:/data", "a storage of the stack: data, disk"),
    ("data:/data:ro", None),
    ("data:relative", "an absolute path"),
    ("data:/", "an absolute path"),
    ("data:/a/../b", "without '..'"),
    ("data://data", "without '..'"),
    ("data:/dev/shm/x", "a path outside /dev"),
    ("data:/tmp/shared-memory", "a path outside"),
    ("data:/data", "data:/data:ro"),
]


@pytest.mark.parametrize(("text", "allowed"), BAD_MOUNTS)
def test_mount_rules(text, allowed):
    storages = [storage(), storage("pd", name="disk", read_only=False, namespaces=("team-a",))]

    problems = mount_problems([Mount.parse(text)], storages, namespace="team-a", pods=1)

    assert [p.allowed for p in problems if allowed and allowed in p.allowed] or (allowed is None and not problems)


def test_a_mount_into_a_namespace_the_storage_does_not_serve_is_refused():
    [problem] = mount_problems([Mount.parse("data:/data:ro")], [storage()], namespace="team-c", pods=1)

    assert problem.path == "--mount" and "data is for team-a, team-b" in problem.allowed


def test_a_read_write_disk_serves_one_pod_only():
    disk = storage("pd", name="disk", read_only=False, namespaces=("t",))

    assert mount_problems([Mount.parse("disk:/ckpt")], [disk], namespace="t", pods=1) == []
    [problem] = mount_problems([Mount.parse("disk:/ckpt")], [disk], namespace="t", pods=8)
    assert "this workload has 8 pods" in problem.hint


def test_two_mounts_of_one_path_or_one_storage_are_refused():
    storages = [storage(), storage("filestore", name="fs", read_only=False)]
    mounts = [Mount.parse("data:/x:ro"), Mount.parse("fs:/x"), Mount.parse("data:/y:ro")]

    problems = mount_problems(mounts, storages, namespace="team-a", pods=1)

    assert [(p.path, p.allowed) for p in problems] == [("--mount[1]", "a path no other mount of the workload uses"),
                                                      ("--mount[2]", "each storage mounted once")]


def test_pod_mounts_give_each_claim_a_volume_and_the_drivers_their_annotations():
    storages = [storage(), storage("parallelstore", name="scratch", read_only=False)]

    mounts = pod_mounts([Mount.parse("data:/data/:ro"), Mount.parse("scratch:/scratch")], storages)

    assert mounts.volumes == [{"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}},
                              {"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}}]
    assert mounts.volume_mounts == [{"mountPath": "/data", "name": "data", "readOnly": True},
                                    {"mountPath": "/scratch", "name": "scratch"}]
    assert mounts.annotations == {"gke-gcsfuse/cpu-limit": "0", "gke-gcsfuse/ephemeral-storage-limit": "0",
                                  "gke-gcsfuse/memory-limit": "0", "gke-gcsfuse/volumes": "true",
                                  "gke-parallelstore/volumes": "true"}


def test_a_read_write_storage_may_be_mounted_read_only():
    mounts = pod_mounts([Mount.parse("fs:/fs:ro")], [storage("filestore", name="fs", read_only=False)])

    assert mounts.volumes[0]["persistentVolumeClaim"]["readOnly"] is True
    assert mounts.annotations == {}
