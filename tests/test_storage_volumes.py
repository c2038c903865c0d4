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
    mount_problems,
    persistent_volume,
    persistent_volume_claim,
    pod_mounts,
    render_storage,
)

SOURCES = {
    "gcs": GcsBucket(bucket="gs://acme-data/imagenet", mount_options=["implicit-dirs"], file_cache_capacity="200Gi",
                     file_cache_for_range_read=True, metadata_cache_ttl_seconds=-1),
    "filestore": FilestoreShare(location="us-east5-b", instance="shared", share="vol1", ip="10.90.0.2", size="1Ti"),
    "parallelstore": ParallelstoreInstance(project="acme-ml", location="us-east5-b", instance="scratch",
                                           access_points=["10.90.1.2", "10.90.1.3"],
                                           network="projects/acme-ml/global/networks/tpu-vpc"),
    "lustre": LustreInstance(project="acme-ml", zone="us-east5-b", instance="lustre1", ip="10.90.2.2",
                             filesystem="lfs", size="9000Gi"),
    "disk": PersistentDisk(project="acme-ml", location="us-east5-b", disk="dataset-disk", size="500Gi"),
}


def storage(kind="gcs", *, name="data", read_only=True, namespaces=("team-a", "team-b"), **source_changes):
    source = SOURCES[kind].model_copy(update=source_changes)
    return Storage(name, source, read_only, namespaces)


@pytest.mark.parametrize("kind", list(SOURCES))
@pytest.mark.parametrize("read_only", [True, False])
def test_every_kind_renders_volumes_and_claims_the_api_server_accepts(kind, read_only):
    namespaces = ("team-a",) if kind == "disk" and not read_only else ("team-a", "team-b")
    entry = storage(kind, read_only=read_only, namespaces=namespaces)

    validate_manifests(render_storage([entry]))


@pytest.mark.parametrize("kind", list(SOURCES))
def test_each_claim_binds_only_its_own_volume(kind):
    entry = storage(kind)
    volume, claim = persistent_volume(entry, "team-b"), persistent_volume_claim(entry, "team-b")

    assert claim["metadata"] == {**claim["metadata"], "name": "data", "namespace": "team-b"}
    assert claim["spec"]["volumeName"] == volume["metadata"]["name"] == "data.team-b"
    assert volume["spec"]["claimRef"] == {"name": "data", "namespace": "team-b"}
    # the claim asks for no class ("", where leaving it out would ask for the default class); a volume left without
    # one is of no class (and Pulumi's Kubernetes provider drops an empty one from the volume's inputs)
    assert "storageClassName" not in volume["spec"] and claim["spec"]["storageClassName"] == ""
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
    disk = persistent_volume(storage("disk", read_only=False, namespaces=("t",)), "t")["spec"]
    assert disk["accessModes"] == ["ReadWriteOnce"] and "readOnly" not in disk["csi"]


def test_lustre_volumes_of_one_instance_get_distinct_handles():
    entry = storage("lustre")

    handles = {persistent_volume(entry, ns)["spec"]["csi"]["volumeHandle"] for ns in entry.namespaces}

    assert handles == {"acme-ml/us-east5-b/lustre1:team-a", "acme-ml/us-east5-b/lustre1:team-b"}


def test_a_zonal_disk_pins_its_volume_to_its_zone_and_a_regional_one_does_not():
    zonal = persistent_volume(storage("disk"), "t")["spec"]
    regional = persistent_volume(storage("disk", location="us-east5"), "t")["spec"]

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
    storages = [storage(), storage("disk", name="disk", read_only=False, namespaces=("team-a",))]

    problems = mount_problems([Mount.parse(text)], storages, namespace="team-a", pods=1)

    assert [p.allowed for p in problems if allowed and allowed in p.allowed] or (allowed is None and not problems)


def test_a_mount_into_a_namespace_the_storage_does_not_serve_is_refused():
    [problem] = mount_problems([Mount.parse("data:/data:ro")], [storage()], namespace="team-c", pods=1)

    assert problem.path == "--mount" and "data is for team-a, team-b" in problem.allowed


def test_a_read_write_disk_serves_one_pod_only():
    disk = storage("disk", name="disk", read_only=False, namespaces=("t",))

    assert mount_problems([Mount.parse("disk:/ckpt")], [disk], namespace="t", pods=1) == []
    [problem] = mount_problems([Mount.parse("disk:/ckpt")], [disk], namespace="t", pods=8)
    assert "this workload has 8 pods" in problem.hint


def test_two_mounts_of_one_path_or_one_storage_are_refused():
    storages = [storage(), storage("filestore", name="fs", read_only=False)]
    mounts = [Mount.parse("data:/x:ro"), Mount.parse("fs:/x"), Mount.parse("data:/y:ro")]

    problems = mount_problems(mounts, storages, namespace="team-a", pods=1)

    assert [(p.path, p.given, p.allowed) for p in problems] == [
        ("--mount", "fs:/x", "a path no other mount of the workload uses"),
        ("--mount", "data:/y:ro", "each storage mounted once")]


def test_mounts_of_a_list_field_are_indexed_every_one():
    mounts = [Mount.parse("nope:/x"), Mount.parse("data:/y:ro")]

    assert [p.path for p in mount_problems(mounts, [storage()], namespace="team-c", pods=1, path="mounts")] == [
        "mounts[0]", "mounts[1]"]


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
