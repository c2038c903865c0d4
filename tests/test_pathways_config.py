"""`tpuplane:pathways`: what a valid service config derives, and every rule that rejects a bad one."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from conftest import REPO, refusals

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.machines import gke_allocatable, machine_shape
from tpuplane.infra.pathways.config import plan_service
from tpuplane.infra.pathways.service import pathways_cpu_requirements, scratch_bucket_name
from tpuplane.infra.stack import load_stack_config

BASE: dict[str, Any] = {
    "gcp:project": "acme-ml",
    "gcp:region": "us-east5",
    "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b", "cpuPool": {"machineType": "n2-standard-32"}},
    "tpuplane:tpuPools": [
        {"name": "serve", "tpuType": "v6e-8", "machineType": "ct6e-standard-8t", "slices": 2},
        {"name": "big", "tpuType": "v5p-128", "slices": 2},
        {"name": "ir", "tpuType": "tpu7x-16", "slices": 3, "capacity": "spot"},
        {"name": "old", "tpuType": "v4-8"},
        {"name": "dws", "tpuType": "v6e-16", "capacity": "queued"},
    ],
    "tpuplane:kueue": {"teams": [{"name": "research", "share": 0.5},
                                 {"name": "prod", "namespace": "prod-ml", "share": 0.5}]},
    "tpuplane:pathways": {"name": "pw", "tpuPool": "big", "jaxVersion": "0.9.0"},
}


def service_plan_of(cfg):
    """The service a stack plans: the section read as the component's Args, planned as the component plans it."""
    return plan_service(cfg.pathways)


@pytest.fixture
def raw() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def pathways(raw: dict[str, Any], **changes: Any) -> dict[str, Any]:
    section = {**raw["tpuplane:pathways"], **changes}
    raw["tpuplane:pathways"] = {k: v for k, v in section.items() if v is not None}
    return raw


# ---- what a valid config derives --------------------------------------------------------------------------------


def test_service_plan_defaults_to_every_slice_of_the_pool(raw):
    plan = service_plan_of(load_stack_config(raw))
    assert (plan.slices, plan.node_pools) == (2, ["big-0", "big-1"])
    assert plan.instance_type == "tpuv5:4x4x4"


def test_service_plan_derives_server_and_proxy_images_from_one_jax_version(raw):
    plan = service_plan_of(load_stack_config(raw))
    assert plan.server_image == "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.9.0"
    assert plan.proxy_image == "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.9.0"


def test_service_plan_keeps_the_digest_of_a_given_server_image(raw):
    image = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.8.0@sha256:" + "c" * 64
    plan = service_plan_of(load_stack_config(pathways(raw, jaxVersion=None, serverImage=image)))
    assert plan.proxy_image == image.replace("/server:", "/proxy_server:")


def test_service_plan_uses_a_subset_of_slices_in_pool_order(raw):
    plan = service_plan_of(load_stack_config(pathways(raw, slices=1)))
    assert (plan.slices, plan.node_pools) == (1, ["big-0"])


def test_service_plan_creates_a_bucket_when_none_is_given(raw):
    plan = service_plan_of(load_stack_config(raw))
    assert plan.create_bucket
    assert plan.gcs_scratch_location == f"gs://{plan.bucket}" == "gs://acme-ml-fleet-pw-pathways"


@pytest.mark.parametrize("given, bucket, location", [
    ("scratch-bucket", "scratch-bucket", "gs://scratch-bucket"),
    ("gs://scratch-bucket/pathways/", "scratch-bucket", "gs://scratch-bucket/pathways"),
])
def test_service_plan_uses_an_existing_bucket(raw, given, bucket, location):
    plan = service_plan_of(load_stack_config(pathways(raw, gcsBucket=given)))
    assert (plan.create_bucket, plan.bucket, plan.gcs_scratch_location) == (False, bucket, location)


def test_service_plan_names_the_workload_policy_of_tpu7x_multi_host_pools(raw):
    plan = service_plan_of(load_stack_config(pathways(raw, tpuPool="ir")))
    assert plan.placement_policy == "fleet-ir-wp"
    assert plan.capacity == "spot"


def test_service_plan_admits_the_namespaces_of_kueue_teams(raw):
    plan = service_plan_of(load_stack_config(raw))
    assert plan.proxy_namespaces == ["prod-ml", "research"]
    assert plan.workload_identity_members("acme-ml") == [
        "serviceAccount:acme-ml.svc.id.goog[prod-ml/default]",
        "serviceAccount:acme-ml.svc.id.goog[pw/default]",
        "serviceAccount:acme-ml.svc.id.goog[research/default]",
    ]


def test_the_stacks_project_number_reaches_the_service_grants(raw):
    """`tpuplane:storage.projectNumber` names every Workload Identity member of the stack in the principal:// form."""
    cfg = load_stack_config({**raw, "tpuplane:storage": {"projectNumber": "123456789012"}})

    assert cfg.pathways.project_number == "123456789012"
    assert service_plan_of(cfg).workload_identity_members("acme-ml", cfg.pathways.project_number)[0] == (
        "principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/"
        "acme-ml.svc.id.goog/subject/ns/prod-ml/sa/default")


def test_service_plan_grants_the_default_namespace_without_teams(raw):
    """Without Kueue teams, clients create their proxies in `default`: those pods need the bucket too."""
    del raw["tpuplane:kueue"]
    assert service_plan_of(load_stack_config(raw)).workload_identity_members("acme-ml") == [
        "serviceAccount:acme-ml.svc.id.goog[default/default]",
        "serviceAccount:acme-ml.svc.id.goog[pw/default]",
    ]


def test_service_plan_sidecar_jax_defaults_to_the_service_jax(raw):
    cfg = load_stack_config(pathways(raw, jaxVersion="0.10.0", sidecar={"requirements": "sidecar/requirements.txt"}),
                            project_dir=REPO)
    assert cfg.pathways.sidecar_jax_version == "0.10.0"
    assert cfg.sidecar.jax_version == "0.10.0"


def test_service_plan_sidecar_jax_defaults_to_the_jax_tag_of_the_server_image(raw):
    image = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.10.0@sha256:" + "c" * 64
    cfg = load_stack_config(pathways(raw, jaxVersion=None, serverImage=image, sidecar={}))
    assert cfg.pathways.sidecar_jax_version == "0.10.0"


def test_sidecar_build_context_defaults_to_the_folder_of_the_requirements(raw):
    cfg = load_stack_config(pathways(raw, jaxVersion="0.10.0", sidecar={"requirements": "sidecar/prod.txt"}))
    sidecar = cfg.pathways.sidecar
    assert (sidecar.context_path, sidecar.requirements_in_context) == ("sidecar", "prod.txt")
    assert sidecar.constraints_path == "sidecar/constraints.example.txt"


def test_sidecar_build_context_may_hold_the_requirements_in_a_subfolder(raw):
    sidecar = {"requirements": "sidecar/teams/./vision.txt", "context": "sidecar/"}
    cfg = load_stack_config(pathways(raw, jaxVersion="0.10.0", sidecar=sidecar))
    assert (cfg.pathways.sidecar.context_path, cfg.pathways.sidecar.requirements_in_context) == (
        "sidecar", "teams/vision.txt")


def test_sidecar_defaults_build_the_repository_sidecar_folder(raw):
    cfg = load_stack_config(pathways(raw, jaxVersion="0.10.0", sidecar={}))
    assert (cfg.pathways.sidecar.context_path, cfg.pathways.sidecar.requirements_in_context) == (
        "sidecar", "requirements.txt")


@pytest.mark.parametrize("requirements", ["ml/requirements.txt", "/abs/requirements.txt", "sidecar"])
def test_pathways_rejects_sidecar_requirements_outside_the_build_context(raw, requirements):
    sidecar = {"requirements": requirements, "context": "sidecar"}
    assert refusals(pathways(raw, jaxVersion="0.10.0", sidecar=sidecar)) == [
        ("tpuplane:pathways.sidecar.requirements", requirements)]


def test_stack_runs_a_ready_sidecar_image_without_building(raw):
    cfg = load_stack_config(pathways(raw, sidecar={"image": "us-docker.pkg.dev/p/r/side:v1"}), project_dir=REPO)
    assert (cfg.pathways.sidecar_image, cfg.sidecar) == ("us-docker.pkg.dev/p/r/side:v1", None)


def test_scratch_bucket_name_stays_within_63_characters_and_unique():
    long_a = scratch_bucket_name("a" * 30, "c" * 40, "pathways-service-name")
    long_b = scratch_bucket_name("a" * 30, "c" * 40, "pathways-service-namf")
    assert len(long_a) <= 63 and len(long_b) <= 63 and long_a != long_b


# ---- rules ------------------------------------------------------------------------------------------------------


def test_pathways_rejects_an_unknown_tpu_pool_listing_the_pools(raw):
    with pytest.raises(ConfigError) as exc:
        load_stack_config(pathways(raw, tpuPool="bgi"))
    (problem,) = exc.value.problems
    assert problem.path == "tpuplane:pathways.tpuPool"
    assert "serve, big, ir, old, dws" in problem.allowed


def test_pathways_rejects_more_slices_than_the_pool_has(raw):
    assert refusals(pathways(raw, slices=3)) == [("tpuplane:pathways.slices", 3)]


@pytest.mark.parametrize("changes", [{"jaxVersion": None}, {"serverImage": "us-docker.pkg.dev/x/pathways/server:v1"}])
def test_pathways_requires_exactly_one_of_server_image_and_jax_version(raw, changes):
    assert [path for path, _ in refusals(pathways(raw, **changes))] == ["tpuplane:pathways"]


@pytest.mark.parametrize("image", [
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server",  # no tag: moves
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:latest",
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/rm:jax-0.9.0",  # no proxy sibling to derive
    "Not An Image",
])
def test_pathways_rejects_a_server_image_that_lets_proxy_and_server_skew(raw, image):
    assert refusals(pathways(raw, jaxVersion=None, serverImage=image)) == [("tpuplane:pathways.serverImage", image)]


def test_pathways_rejects_a_jax_version_that_is_not_a_version(raw):
    assert refusals(pathways(raw, jaxVersion="latest")) == [("tpuplane:pathways.jaxVersion", "latest")]


@pytest.mark.parametrize("bucket", ["UPPER", "gs://ab", "gs://google-scratch", "gs://bucket/../up"])
def test_pathways_rejects_a_bad_bucket_name(raw, bucket):
    assert refusals(pathways(raw, gcsBucket=bucket)) == [("tpuplane:pathways.gcsBucket", bucket)]


def test_pathways_rejects_a_generation_pathways_does_not_serve(raw):
    assert refusals(pathways(raw, tpuPool="old")) == [("tpuplane:pathways.tpuPool", "old")]


def test_pathways_rejects_a_queued_capacity_pool(raw):
    assert refusals(pathways(raw, tpuPool="dws")) == [("tpuplane:pathways.tpuPool", "dws")]


def test_pathways_rejects_a_name_whose_head_hostname_label_is_too_long(raw):
    name = "p" * 23  # `<name>-pathways-head-0-0.<name>` would be 65 characters
    with pytest.raises(ConfigError) as exc:
        load_stack_config(pathways(raw, name=name))
    (problem,) = exc.value.problems
    assert (problem.path, problem.allowed) == ("tpuplane:pathways.name", "at most 22 characters")
    load_stack_config(pathways(raw, name="p" * 22))


@pytest.mark.parametrize("name", ["Pathways", "-pw", "pw_1"])
def test_pathways_rejects_a_name_that_is_not_a_dns_label(raw, name):
    assert refusals(pathways(raw, name=name)) == [("tpuplane:pathways.name", name)]


@pytest.mark.parametrize("name", ["default", "kube-system", "kueue-system", "prod-ml"])
def test_pathways_rejects_a_namespace_already_taken(raw, name):
    assert refusals(pathways(raw, name=name)) == [("tpuplane:pathways.name", name)]


def test_pathways_rejects_a_sidecar_with_both_image_and_build_inputs(raw):
    sidecar = {"image": "us-docker.pkg.dev/p/r/side:v1", "requirements": "requirements.txt"}
    assert [p for p, _ in refusals(pathways(raw, sidecar=sidecar))] == ["tpuplane:pathways.sidecar"]


def test_pathways_rejects_a_sidecar_jax_that_differs_from_the_service(raw):
    raw = pathways(raw, jaxVersion="0.9.0", sidecar={"jaxVersion": "0.10.0"})
    assert refusals(raw) == [("tpuplane:pathways.sidecar.jaxVersion", "0.10.0")]


def test_pathways_requires_the_sidecar_jax_with_a_custom_server_image(raw):
    image = "us-docker.pkg.dev/acme-ml/pathways/server:nightly-20260801"
    raw = pathways(raw, jaxVersion=None, serverImage=image, sidecar={"requirements": "r.txt"})
    assert refusals(raw) == [("tpuplane:pathways.sidecar.jaxVersion", None)]


@pytest.mark.parametrize("image", [
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.9.0",
    "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.9.0@sha256:" + "c" * 64,
])
def test_pathways_rejects_a_sidecar_jax_other_than_the_server_image_tag(raw, image):
    raw = pathways(raw, jaxVersion=None, serverImage=image, sidecar={"jaxVersion": "0.10.0"})
    with pytest.raises(ConfigError) as exc:
        load_stack_config(raw)
    (problem,) = exc.value.problems
    assert (problem.path, problem.given) == ("tpuplane:pathways.sidecar.jaxVersion", "0.10.0")
    assert problem.allowed == "0.9.0 (the service's serverImage tag jax-0.9.0)"


def test_pathways_reports_a_bad_service_jax_once_even_with_a_sidecar_jax(raw):
    raw = pathways(raw, jaxVersion="latest", sidecar={"jaxVersion": "0.10.0"})
    assert refusals(raw) == [("tpuplane:pathways.jaxVersion", "latest")]


def test_pathways_requires_the_sidecar_jax_when_the_server_tag_is_not_a_release(raw):
    image = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.9.0-custom-build"
    raw = pathways(raw, jaxVersion=None, serverImage=image, sidecar={})
    assert refusals(raw) == [("tpuplane:pathways.sidecar.jaxVersion", None)]


def test_pathways_accepts_a_sidecar_jax_equal_to_the_server_image_tag(raw):
    image = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.10.0"
    cfg = load_stack_config(pathways(raw, jaxVersion=None, serverImage=image, sidecar={"jaxVersion": "0.10"}))
    assert (cfg.pathways.server_image_ref, cfg.pathways.service_jax_version, cfg.pathways.sidecar_jax_version) == (
        image, "0.10.0", "0.10")


def test_pathways_rejects_a_sidecar_jax_without_a_base_image(raw):
    assert refusals(pathways(raw, sidecar={})) == [("tpuplane:pathways.sidecar.jaxVersion", "0.9.0")]


def test_pathways_rejects_unknown_keys(raw):
    assert refusals(pathways(raw, severImage="x")) == [("tpuplane:pathways.severImage", "x")]


@pytest.mark.parametrize("machine", ["n2-standard-16", "n2-highmem-16", "e2-standard-16", "c3-standard-8"])
def test_pathways_rejects_a_cpu_pool_too_small_for_a_client_proxy(raw, machine):
    raw["tpuplane:cluster"]["cpuPool"]["machineType"] = machine
    assert refusals(raw) == [("tpuplane:cluster.cpuPool.machineType", machine)]


@pytest.mark.parametrize("machine", ["n2-standard-32", "n2-standard-64", "n4-standard-64", "c3-highmem-22",
                                     "n2-custom-24-131072"])
def test_pathways_accepts_a_cpu_pool_that_holds_a_client_proxy(raw, machine):
    raw["tpuplane:cluster"]["cpuPool"]["machineType"] = machine
    cfg = load_stack_config(raw)
    assert (cfg.pathways.cpu_machine_type, cfg.batch.cpu_machine_type) == (machine, machine)


def test_pathways_cpu_requirements_are_the_proxy_pods_requests():
    need = pathways_cpu_requirements()
    assert (need.millicores, need.memory_mib) == (16_000, -(-100 * 10**9 // 2**20))
    assert gke_allocatable(machine_shape("n2-standard-32")).holds(need)
    assert not gke_allocatable(machine_shape("n2-standard-16")).holds(need)


def test_pathways_reports_every_problem_at_once(raw):
    raw = pathways(raw, name="default", slices=5, gcsBucket="UPPER")
    assert sorted(path for path, _ in refusals(raw)) == [
        "tpuplane:pathways.gcsBucket", "tpuplane:pathways.name", "tpuplane:pathways.slices"]


def test_pathways_rejects_a_janitor_image_that_is_not_an_image(raw):
    assert refusals(pathways(raw, janitorImage="Not An Image")) == [("tpuplane:pathways.janitorImage",
                                                                         "Not An Image")]


def test_service_plan_runs_proxies_in_the_team_namespaces(raw):
    assert service_plan_of(load_stack_config(raw)).proxy_namespaces == ["prod-ml", "research"]


def test_service_plan_runs_proxies_in_default_without_teams(raw):
    del raw["tpuplane:kueue"]
    assert service_plan_of(load_stack_config(raw)).proxy_namespaces == ["default"]
