"""Bad input to storage, identity, autoscaling, node auto-provisioning and the dashboard, key by key: each is refused
before any resource exists, at the key the user wrote (the stack config's camelCase path, or the Args field), with
what is allowed. A valid stack using every one of them is accepted first, so each refusal is that key's alone."""

from __future__ import annotations

import copy
from typing import Any, Callable

import pulumi
import pytest
from conftest import STACKS, config_problems

from tpuplane.components import FleetDashboard, TeamStorage, TpuCluster, TpuSlicePool
from tpuplane.components.offline import run_program_file, run_under_mocks
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.cluster import plan_cluster
from tpuplane.infra.stack import load_stack_config

GCS = {"bucket": "gs://acme-ml-datasets/imagenet", "mountOptions": ["implicit-dirs"]}
FILESTORE = {"location": "us-east5-b", "instance": "shared", "share": "vol1", "ip": "10.90.0.2", "size": "1Ti"}
PARALLELSTORE = {"location": "us-east5-b", "instance": "scratch", "accessPoints": ["10.90.1.2"], "network": "default"}
LUSTRE = {"zone": "us-east5-b", "instance": "lustre1", "ip": "10.90.2.2", "filesystem": "lfs", "size": "9000Gi"}
DISK = {"location": "us-east5-b", "disk": "dataset-disk", "size": "500Gi"}
STACK: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b",
                         "autoprovisioning": {"cpu": 10000, "memoryGb": 40000, "tpuChips": {"v6e": 96}}},
    "tpuplane:tpuPools": [{"name": "train", "tpuType": "v6e-16", "capacity": "spot",
                           "autoscaling": {"minSlices": 0, "maxSlices": 4}},
                          {"name": "eval", "tpuType": "v6e-16", "capacity": "flex-start", "slices": 2}],
    "tpuplane:kueue": {"teams": [{"name": "research", "share": 0.5}, {"name": "evals", "share": 0.5}]},
    "tpuplane:storage": {
        "volumes": [
            {"name": "datasets", "gcs": GCS, "readOnly": True, "teams": ["research", "evals"]},
            {"name": "shared", "filestore": FILESTORE, "teams": ["research"]},
            {"name": "scratch", "parallelstore": PARALLELSTORE, "teams": ["research"]},
            {"name": "lustre", "lustre": LUSTRE, "teams": ["evals"]},
            {"name": "disk", "disk": DISK, "readOnly": True, "teams": ["research", "evals"]},
        ],
        "roles": {"research": ["roles/aiplatform.user"]},
        "projectNumber": "123456789012",
    },
    "tpuplane:dashboard": {"displayName": "Fleet", "scrapeInterval": "30s"},
}


def changed(path: str, value: Any) -> dict[str, Any]:
    """STACK with the value at `path` (section, then keys and list indexes, '.'-separated) replaced or appended;
    `...` deletes."""
    raw = copy.deepcopy(STACK)
    section, *keys = path.split(" ", 1)[0], *path.split(" ", 1)[1:]
    parts = [int(k) if k.isdigit() else k for k in (keys[0].split(".") if keys else [])]
    if not parts:
        raw[section] = value
        return raw
    node = raw[section]
    for part in parts[:-1]:
        node = node[part]
    if value is ...:
        del node[parts[-1]]
    elif isinstance(node, list) and parts[-1] == len(node):  # one past the end: a new entry
        node.append(value)
    else:
        node[parts[-1]] = value
    return raw


def test_the_stack_using_every_feature_is_accepted():
    cfg = load_stack_config(STACK)

    assert [s.kind for s in cfg.storage.storages] == ["gcs", "filestore", "parallelstore", "lustre", "disk"]
    assert cfg.cluster.csi_drivers == ["disk", "filestore", "gcs", "lustre", "parallelstore"]
    assert cfg.tpu_pools[0].slices == 4 and cfg.dashboard is not None and cfg.cluster.managed_prometheus


def test_a_lustre_instance_on_the_legacy_port_sets_the_clusters_driver():
    """GKE's enable_legacy_lustre_port is the cluster's Lustre add-on setting: one entry asking turns it on."""
    raw = changed(f"{V}.3.lustre", {**LUSTRE, "enableLegacyLustrePort": True})

    assert load_stack_config(raw).cluster.lustre_legacy_port and not load_stack_config(STACK).cluster.lustre_legacy_port


def test_the_clusters_plan_turns_on_each_storage_kinds_driver_with_lustres_legacy_port():
    raw = changed(f"{V}.3.lustre", {**LUSTRE, "enableLegacyLustrePort": True})

    assert plan_cluster(load_stack_config(raw).cluster).addons == {
        "gce_persistent_disk_csi_driver_config": {"enabled": True},
        "gcp_filestore_csi_driver_config": {"enabled": True},
        "gcs_fuse_csi_driver_config": {"enabled": True},
        "lustre_csi_driver_config": {"enabled": True, "enable_legacy_lustre_port": True},
        "parallelstore_csi_driver_config": {"enabled": True},
    }


V = "tpuplane:storage volumes"
BAD_STACK = [
    # storage: the entry
    (f"{V}.0", {"name": "d", "nfs": {"server": "x"}, "teams": ["research"]}, "tpuplane:storage.volumes[0].nfs",
     "no such key; the keys here are disk, filestore, gcs, lustre, name, parallelstore, readOnly, teams"),
    (f"{V}.0", {"name": "d", "teams": ["research"]}, "tpuplane:storage.volumes[0]",
     "exactly one of gcs, filestore, parallelstore, lustre, disk"),
    (f"{V}.0.filestore", FILESTORE, "tpuplane:storage.volumes[0].filestore", "exactly one of"),
    (f"{V}.0.name", "Data", "tpuplane:storage.volumes[0].name", "a DNS label"),
    (f"{V}.0.name", "dshm", "tpuplane:storage.volumes[0].name", "a name other than dshm"),
    (f"{V}.1.name", "datasets", "tpuplane:storage.volumes[1].name", "a name no other entry uses"),
    (f"{V}.0.teams", [], "tpuplane:storage.volumes[0].teams", "at least one team"),
    (f"{V}.0.teams", ["research", "platform"], "tpuplane:storage.volumes[0].teams[1]", "a team of the stack"),
    (f"{V}.0.teams", ["research", "research"], "tpuplane:storage.volumes[0].teams[1]", "each team once"),
    (f"{V}.0.teams", "research", "tpuplane:storage.volumes[0].teams", "a list of team names"),
    (f"{V}.0.readOnly", "yes", "tpuplane:storage.volumes[0].readOnly", "true or false"),
    # storage: each kind
    (f"{V}.0.gcs.bucket", "gs://goog-data", "tpuplane:storage.volumes[0].gcs.bucket", "gs://<bucket>"),
    (f"{V}.0.gcs.bucket", "gs://Acme", "tpuplane:storage.volumes[0].gcs.bucket", "lowercase"),
    (f"{V}.0.gcs.bucket", "gs://acme/a,b", "tpuplane:storage.volumes[0].gcs.bucket", "only-dir=<folder>"),
    (f"{V}.0.gcs.bucket", ..., "tpuplane:storage.volumes[0].gcs.bucket", "this key is required"),
    (f"{V}.0.gcs.mountOptions", ["implicit-dirs", "ro"], "tpuplane:storage.volumes[0].gcs.mountOptions[1]",
     "set readOnly: true"),
    (f"{V}.0.gcs.mountOptions", ["uid=1 --x"], "tpuplane:storage.volumes[0].gcs.mountOptions[0]", "no commas"),
    (f"{V}.0.gcs.fileCacheCapacity", "lots", "tpuplane:storage.volumes[0].gcs.fileCacheCapacity", "quantity"),
    (f"{V}.0.gcs.fileCacheForRangeRead", True, "tpuplane:storage.volumes[0].gcs.fileCacheForRangeRead",
     "without a file cache"),
    (f"{V}.0.gcs.metadataCacheTtlSeconds", -5, "tpuplane:storage.volumes[0].gcs.metadataCacheTtlSeconds", "-1"),
    (f"{V}.1.filestore.ip", "10.0.0.300", "tpuplane:storage.volumes[1].filestore.ip", "an IPv4 address"),
    (f"{V}.1.filestore.location", "mars", "tpuplane:storage.volumes[1].filestore.location", "a zone or region"),
    (f"{V}.1.filestore.size", "1Tb", "tpuplane:storage.volumes[1].filestore.size", "quantity"),
    (f"{V}.2.parallelstore.size", "13Ti", "tpuplane:storage.volumes[2].parallelstore.size", "12Ti, 16Ti, 20Ti"),
    (f"{V}.2.parallelstore.accessPoints", [], "tpuplane:storage.volumes[2].parallelstore.accessPoints",
     "at least one"),
    (f"{V}.2.parallelstore.network", "my net", "tpuplane:storage.volumes[2].parallelstore.network", "a VPC name"),
    (f"{V}.2.parallelstore.project", "Acme", "tpuplane:storage.volumes[2].parallelstore.project", "project id"),
    (f"{V}.3.lustre.zone", "us-east5", "tpuplane:storage.volumes[3].lustre.zone", "a zone"),
    (f"{V}.3.lustre.enableLegacyLustrePort", "yes", "tpuplane:storage.volumes[3].lustre.enableLegacyLustrePort",
     "true or false"),
    (f"{V}.5", {"name": "lustre2", "lustre": {**LUSTRE, "instance": "lustre2", "enableLegacyLustrePort": True},
                "teams": ["evals"]},
     "tpuplane:storage.volumes[5].lustre.enableLegacyLustrePort", "False, as volumes[3] has it"),
    (f"{V}.4.disk.fsType", "ntfs", "tpuplane:storage.volumes[4].disk.fsType", "ext4 or xfs"),
    (f"{V}.4.readOnly", False, "tpuplane:storage.volumes[4].teams", "one team for a read-write disk"),
    # identity
    ("tpuplane:storage roles.platform", ["roles/viewer"], "tpuplane:storage.roles", "a team of the stack"),
    ("tpuplane:storage roles.research", ["roles/owner"], "tpuplane:storage.roles.research[0]",
     "a role other than"),
    ("tpuplane:storage roles.research", ["storage.admin"], "tpuplane:storage.roles.research[0]", "an IAM role"),
    ("tpuplane:storage projectNumber", 123456789012, "tpuplane:storage.projectNumber", "text, not a number"),
    ("tpuplane:storage projectNumber", "12a", "tpuplane:storage.projectNumber", "digits only"),
    ("tpuplane:storage", ["datasets"], "tpuplane:storage", "a mapping"),
    # autoscaling slice groups
    ("tpuplane:tpuPools 0.autoscaling.minSlices", 5, "tpuplane:tpuPools[0].autoscaling.minSlices",
     "at most maxSlices (4)"),
    ("tpuplane:tpuPools 0.autoscaling.maxSlices", 0, "tpuplane:tpuPools[0].autoscaling.maxSlices",
     "greater than or equal to 1"),
    ("tpuplane:tpuPools 0.autoscaling.minSlices", ..., "tpuplane:tpuPools[0].autoscaling.minSlices", "required"),
    ("tpuplane:tpuPools 0.slices", 3, "tpuplane:tpuPools[0].slices", "as tpuplane:tpuPools[0].autoscaling.maxSlices"),
    ("tpuplane:tpuPools 1.autoscaling", {"minSlices": 0, "maxSlices": 2}, "tpuplane:tpuPools[1].autoscaling",
     "no autoscaling range on a flex-start or queued group"),
    ("tpuplane:tpuPools 0.autoscaling.maxSlice", 4, "tpuplane:tpuPools[0].autoscaling.maxSlice", "no such key"),
    # node auto-provisioning
    ("tpuplane:cluster autoprovisioning.cpu", 100, "tpuplane:cluster.autoprovisioning.cpu", "at least"),
    ("tpuplane:cluster autoprovisioning.memoryGb", ..., "tpuplane:cluster.autoprovisioning.memoryGb", "required"),
    ("tpuplane:cluster autoprovisioning.tpuChips", {"v6e": 32}, "tpuplane:cluster.autoprovisioning.tpuChips.v6e",
     "at least 96"),
    ("tpuplane:cluster autoprovisioning.tpuChips", {"v6e": 96, "tpu7": 8},
     "tpuplane:cluster.autoprovisioning.tpuChips", "one of v4, v5e, v5p, v6e, tpu7x"),
    ("tpuplane:cluster autoprovisioning.tpuChips", {"v6e": "96"}, "tpuplane:cluster.autoprovisioning.tpuChips.v6e",
     "integer"),
    # the dashboard
    ("tpuplane:dashboard scrapeInterval", "1h", "tpuplane:dashboard.scrapeInterval", "between 5s and 10m"),
    ("tpuplane:dashboard scrapeInterval", "2s", "tpuplane:dashboard.scrapeInterval", "between 5s and 10m"),
    ("tpuplane:dashboard displayName", "   ", "tpuplane:dashboard.displayName", "not blank"),
    ("tpuplane:dashboard displayName", "TPU\nfleet", "tpuplane:dashboard.displayName", "without control characters"),
    ("tpuplane:dashboard displayName", "TPU\u202efleet", "tpuplane:dashboard.displayName", "without control"),
    ("tpuplane:dashboard displayName", "x" * 300, "tpuplane:dashboard.displayName", "at most 256"),
    ("tpuplane:dashboard cluster", "other", "tpuplane:dashboard.cluster", "no such key"),
]


@pytest.mark.parametrize(("where", "value", "path", "allowed"), BAD_STACK,
                         ids=[f"{w}={str(v)[:30]}" for w, v, _, _ in BAD_STACK])
def test_a_bad_value_is_refused_at_its_key(where, value, path, allowed):
    [problem] = config_problems(changed(where, value))  # that key's, and no other section's in its wake

    assert (problem.path, allowed in f"{problem.allowed} {problem.hint}") == (path, True), str(problem)


@pytest.mark.parametrize(("where", "value"), [(f"{V}.0.gcs.bucket", "gs://Acme"),
                                              ("tpuplane:tpuPools 0.autoscaling.minSlices", 9),
                                              ("tpuplane:cluster autoprovisioning.cpu", 1),
                                              ("tpuplane:dashboard scrapeInterval", "0s")])
def test_the_stack_program_registers_nothing_for_a_bad_value(where, value, registrations):
    with pytest.raises(pulumi.RunError) as raised:
        run_program_file(STACKS / "__main__.py", changed(where, value), project="tpuplane", stack="test")

    assert isinstance(raised.value.__cause__, ConfigError)
    assert registrations == []


# ---- the same fields as components' Args ----------------------------------------------------------------------

STORAGE_ARGS = {"project": "acme-ml", "teams": [{"name": "research"}],
                "volumes": [{"name": "datasets", "teams": ["research"], "gcs": {"bucket": "gs://acme-data"}}]}
CLUSTER_ARGS = {"project": "acme-ml", "region": "us-east5", "name": "fleet", "zone": "us-east5-b"}
POOL_ARGS = {"project": "acme-ml", "location": "us-east5", "zone": "us-east5-b", "cluster": "fleet",
             "tpu_type": "v6e-16", "capacity": "spot"}
DASHBOARD_ARGS = {"project": "acme-ml", "cluster_name": "fleet"}


def build(component: Callable[..., Any], args: dict[str, Any]) -> Callable[[], Any]:
    return lambda: component("subject", args)


BAD_ARGS = [
    (TeamStorage, {**STORAGE_ARGS, "volumes": [{"name": "d", "teams": ["research"], "nfs": {}}]},
     "TeamStorageArgs.volumes[0].nfs", "one of disk, filestore, gcs, lustre, name, parallelstore, read_only, teams"),
    (TeamStorage, {**STORAGE_ARGS, "volumes": [{"name": "d", "teams": ["ops"], "gcs": {"bucket": "gs://acme"}}]},
     "TeamStorageArgs.volumes[0].teams[0]", "a team of the stack: research"),
    (TeamStorage, {**STORAGE_ARGS, "volumes": [{"name": "d", "teams": ["research"],
                                                "gcs": {"bucket": "gs://acme", "mount_options": ["rw"]}}]},
     "TeamStorageArgs.volumes[0].gcs.mount_options[0]", "set readOnly: false"),
    (TeamStorage, {**STORAGE_ARGS, "teams": [{"name": "Research"}]}, "TeamStorageArgs.teams[0].name", "DNS label"),
    (TeamStorage, {**STORAGE_ARGS, "roles": {"research": ["roles/iam.workloadIdentityUser"]}},
     "TeamStorageArgs.roles.research[0]", "a role other than"),
    (TeamStorage, {**STORAGE_ARGS, "project_number": "0123"}, "TeamStorageArgs.project_number", "digits only"),
    (TpuCluster, {**CLUSTER_ARGS, "autoprovisioning": {"cpu": 1, "memory_gb": 1}}, "TpuClusterArgs.autoprovisioning.cpu",
     "at least 160"),
    (TpuCluster, {**CLUSTER_ARGS, "csi_drivers": ["nfs"]}, "TpuClusterArgs.csi_drivers", "storage kinds among"),
    (TpuCluster, {**CLUSTER_ARGS, "lustre_legacy_port": True}, "TpuClusterArgs.lustre_legacy_port",
     "with lustre in csi_drivers"),
    (TpuSlicePool, {**POOL_ARGS, "autoscaling": {"min_slices": 3, "max_slices": 2}},
     "TpuSlicePoolArgs.autoscaling.min_slices", "at most max_slices (2)"),
    (TpuSlicePool, {**POOL_ARGS, "capacity": "queued", "autoscaling": {"min_slices": 0, "max_slices": 2}},
     "TpuSlicePoolArgs.autoscaling", "no autoscaling range"),
    (FleetDashboard, {**DASHBOARD_ARGS, "scrape_interval": "30"}, "FleetDashboardArgs.scrape_interval", "5s and 10m"),
    (FleetDashboard, {"project": "acme-ml"}, "FleetDashboardArgs.cluster_name", "required"),
]


@pytest.mark.parametrize(("component", "args", "path", "allowed"), BAD_ARGS, ids=[p for _, _, p, _ in BAD_ARGS])
def test_a_bad_args_field_is_refused_by_its_name_and_registers_nothing(component, args, path, allowed,
                                                                       registrations):
    with pytest.raises(ConfigError) as raised:
        run_under_mocks(build(component, args), {})

    assert any(p.path == path and allowed in f"{p.allowed} {p.hint}" for p in raised.value.problems), raised.value
    assert registrations == []


# ---- workloads: mounts and per-job Pathways ------------------------------------------------------------------

JOB = {"tpuType": "v6e-16", "capacity": "spot", "image": "img:1", "command": "python train.py"}
PATHWAYS = {"gcsScratch": "gs://acme-ml-scratch/jobs"}


def workload_problems(document: dict[str, Any], *, on_stack: bool = True) -> list[tuple[str, str]]:
    """(path, allowed and hint) of each problem `workload render` would refuse the document for."""
    from tpuplane.infra.args import Source, read
    from tpuplane.infra.batch.workload import TpuWorkloadSpec, render_tpu_jobset
    from tpuplane.infra.errors import problems_of

    cfg = load_stack_config(STACK)
    spec = read(TpuWorkloadSpec, {"name": "train", "namespace": "evals", "queue": "evals", "jobs": [JOB],
                                  **document}, Source.config("", TpuWorkloadSpec))
    problems = problems_of(lambda: render_tpu_jobset(spec, cfg.batch if on_stack else None,
                                                     storage=cfg.storage if on_stack else None))
    assert problems, "the workload was accepted"
    return [(p.path, f"{p.allowed} {p.hint}") for p in problems]


BAD_WORKLOADS = [
    ({"mounts": ["shared:/shared"]}, "mounts[0]", "shared is for research"),
    ({"mounts": ["nope:/x"]}, "mounts[0]", "a storage of the stack: datasets, disk, lustre, scratch, shared"),
    ({"mounts": ["datasets"]}, "mounts[0]", "NAME:/path"),
    ({"mounts": ["datasets:/data"]}, "mounts[0]", "datasets:/data:ro"),
    ({"mounts": ["datasets:/dev/data:ro"]}, "mounts[0]", "a path outside /dev"),
    ({"mounts": ["datasets:/a:ro", "disk:/a:ro"]}, "mounts[1]", "a path no other mount of the workload uses"),
    ({"pathways": {}}, "pathways.gcsScratch", "gs://<bucket>[/<folder>]"),
    ({"pathways": {"gcsScratch": "gs://Bad"}}, "pathways.gcsScratch", "lowercase"),
    ({"pathways": PATHWAYS, "jobs": [JOB, {**JOB, "name": "b"}]}, "jobs", "one job: the Pathways workers"),
    ({"pathways": {**PATHWAYS, "headless": True}}, "jobs[0].image", "no image with pathways.headless"),
    ({"pathways": PATHWAYS, "jobs": [{"tpuType": "v6e-16", "capacity": "spot"}]}, "jobs[0].image",
     "this field is required"),
    ({"pathways": {**PATHWAYS, "serverImage": "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest"}},
     "pathways.serverImage", "a pinned tag or digest"),
    ({"pathways": {**PATHWAYS, "serverImage": "us-docker.pkg.dev/p/server:1", "jaxVersion": "0.9.0"}},
     "pathways", "at most one of serverImage and jaxVersion"),
    ({"pathways": {**PATHWAYS, "jaxVersion": "latest"}}, "pathways.jaxVersion", "a JAX release version"),
    ({"pathways": {**PATHWAYS, "sidecarImage": "Not An Image"}}, "pathways.sidecarImage", "an image reference"),
    ({"pathways": PATHWAYS, "restartOnExitCodes": [42]}, "restartOnExitCodes", "none with pathways"),
    ({"pathways": {**PATHWAYS, "replicas": 2}}, "pathways.replicas", "no such key"),
]


@pytest.mark.parametrize(("document", "path", "allowed"), BAD_WORKLOADS, ids=[str(d)[:60] for d, _, _ in BAD_WORKLOADS])
def test_a_bad_mount_or_pathways_option_is_refused_at_its_key(document, path, allowed):
    from tpuplane.infra.errors import ConfigError as Refused

    try:
        problems = workload_problems(document)
    except Refused as exc:  # the document's own schema
        problems = [(p.path, f"{p.allowed} {p.hint}") for p in exc.problems]

    assert any(where == path and allowed in text for where, text in problems), problems


def test_mounts_need_the_stacks_storage():
    assert workload_problems({"mounts": ["datasets:/data:ro"]}, on_stack=False) == [
        ("mounts", "mounts of a stack's storage, checked against it render against the stack (--stack or --config), "
                   "whose tpuplane:storage declares them")]


def test_pathways_on_a_generation_pathways_does_not_serve_is_refused():
    problems = workload_problems({"pathways": PATHWAYS, "jobs": [{**JOB, "tpuType": "v4-16"}]}, on_stack=False)

    assert ("jobs[0].tpuType", "a TPU of v5e, v5p, v6e, tpu7x the generations Pathways serves") in problems
