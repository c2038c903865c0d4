"""The proxy Job and janitor renderers (`tpuplane.infra.pathways.proxy`) and the `ProxyJanitor` component.

Rendered manifests are checked against the Kubernetes 1.30 OpenAPI schemas with kubernetes-validate. The
component runs under Pulumi's mocks, which stand in for a Kubernetes API server that cannot exist here.
"""

from __future__ import annotations

import json

import kubernetes_validate
import pytest

from conftest import printed_by_two_processes

from tpuplane.components.janitor import ProxyJanitor, ProxyJanitorArgs
from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.pathways import service as pathways
from tpuplane.infra.pathways import proxy
from tpuplane.infra.fleet.catalog import resolve_tpu_type
from tpuplane.infra.args import Source
from tpuplane.infra.errors import ConfigError

K8S_VERSION = "1.30"


def example_job_spec() -> proxy.ProxyJobSpec:
    return proxy.ProxyJobSpec(
        name=proxy.proxy_job_name("alice", "ab1cd"), namespace="team-a",
        service="pw-pathways-head-0-0.pw.pw.svc:29001", slices=tuple(proxy.parse_tpus({"v6e-4": 2})),
        gcs_location="gs://scratch-bucket/tmp", heartbeat=1_700_000_000, image=proxy.EXAMPLE_PROXY_IMAGE)


@pytest.fixture
def job_spec() -> proxy.ProxyJobSpec:
    return example_job_spec()


def container(job: dict) -> dict:
    (only,) = job["spec"]["template"]["spec"]["containers"]
    return only


def with_options(spec: proxy.ProxyJobSpec, *options: str) -> proxy.ProxyJobSpec:
    return proxy.ProxyJobSpec(**{**spec.__dict__, "options": proxy.parse_proxy_options(list(options))})


def test_render_proxy_job_is_a_valid_batch_job(job_spec):
    kubernetes_validate.validate(proxy.render_proxy_job(job_spec), K8S_VERSION, strict=True)


def test_render_proxy_job_is_the_same_in_every_process():
    first, second = printed_by_two_processes(
        "import json, test_proxy_render as t\n"
        "print(json.dumps(t.proxy.render_proxy_job(t.example_job_spec())))")
    assert first == second and "tpuplane-proxy-alice-ab1cd" in first


def test_render_proxy_job_args_ask_the_resource_manager_for_virtual_slices(job_spec):
    assert container(proxy.render_proxy_job(job_spec))["args"] == [
        "--server_port=29000",
        "--resource_manager_address=pw-pathways-head-0-0.pw.pw.svc:29001",
        "--gcs_scratch_location=gs://scratch-bucket/tmp",
        "--virtual_slices=tpuv6e:2x2,tpuv6e:2x2",
    ]


@pytest.mark.parametrize("option, flag", [
    ("sidecar:true", "--sidecar_name=external"),
    ("elastic_slices:2", "--num_elastic_slices=2"),
    ("metrics:TRUE", "--enable_metrics_collection=true"),
])
def test_render_proxy_job_option_adds_its_flag(job_spec, option, flag):
    assert flag in container(proxy.render_proxy_job(with_options(job_spec, option)))["args"]


def test_render_proxy_job_appends_xla_flags(job_spec):
    args = container(proxy.render_proxy_job(with_options(job_spec, 'xla_flags:"--xla_a=1 --xla_b=true"')))["args"]
    assert args[-2:] == ["--xla_a=1", "--xla_b=true"]


def test_render_proxy_job_insecure_credentials_is_an_env_var(job_spec):
    rendered = container(proxy.render_proxy_job(with_options(job_spec, "use_insecure_credentials:true")))
    assert rendered["env"] == [{"name": "IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS", "value": "true"}]
    assert "env" not in container(proxy.render_proxy_job(job_spec))


def test_render_proxy_job_is_bounded_findable_and_beating(job_spec):
    job = proxy.render_proxy_job(job_spec)
    assert job["metadata"]["labels"] == job["spec"]["template"]["metadata"]["labels"] == proxy.PROXY_LABELS
    assert job["metadata"]["annotations"] == {proxy.HEARTBEAT_ANNOTATION: "1700000000"}
    assert job["spec"]["activeDeadlineSeconds"] == proxy.DEFAULT_ACTIVE_DEADLINE_SECONDS
    assert job["spec"]["ttlSecondsAfterFinished"] == proxy.DEFAULT_TTL_SECONDS_AFTER_FINISHED
    assert job["spec"]["backoffLimit"] == 0


def test_render_proxy_job_shares_nodes_and_is_ready_only_when_listening(job_spec):
    job = proxy.render_proxy_job(job_spec)
    assert "hostNetwork" not in job["spec"]["template"]["spec"]
    assert container(job)["readinessProbe"]["tcpSocket"] == {"port": proxy.PROXY_PORT}


@pytest.mark.parametrize("image, policy", [
    ("us-docker.pkg.dev/p/pathways/proxy_server:jax-0.9.0", "IfNotPresent"),
    ("us-docker.pkg.dev/p/pathways/proxy_server@sha256:" + "a" * 64, "IfNotPresent"),
    ("us-docker.pkg.dev/p/pathways/proxy_server:latest", "Always"),
    ("localhost:5000/pathways/proxy_server", "Always"),
])
def test_render_proxy_job_pulls_moving_tags_every_time(job_spec, image, policy):
    spec = proxy.ProxyJobSpec(**{**job_spec.__dict__, "image": image})
    assert container(proxy.render_proxy_job(spec))["imagePullPolicy"] == policy


@pytest.mark.parametrize("user", ["alice", "Jane_Doe", "x" * 200, "___", "dé.jà vu"])
def test_proxy_job_name_is_a_dns_label_with_the_suffix(user):
    name = proxy.proxy_job_name(user, "ab1cd")
    assert proxy.parse_name(name, path="name") == name
    assert name.startswith("tpuplane-proxy-") and name.endswith("-ab1cd")


@pytest.mark.parametrize("server, expected", [
    ("us-docker.pkg.dev/cloud-tpu-v2-images/pathways/server:jax-0.9.0",
     "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.9.0"),
    ("us-docker.pkg.dev/x/pathways/server@sha256:" + "b" * 64, "us-docker.pkg.dev/x/pathways/proxy_server@sha256:" + "b" * 64),
    ("localhost:5000/pathways/server", "localhost:5000/pathways/proxy_server"),
    ("r/server:jax-0.8.0@sha256:" + "b" * 64, "r/proxy_server:jax-0.8.0@sha256:" + "b" * 64),
])
def test_matching_proxy_image_keeps_the_server_tag(server, expected):
    assert proxy.matching_proxy_image(server) == expected


def test_matching_proxy_image_has_none_for_other_images():
    assert proxy.matching_proxy_image("us-docker.pkg.dev/x/pathways/worker:jax-0.9.0") is None


# ---- reading the service ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("address, jobset", [
    ("pw-pathways-head-0-0.pw.pw.svc:29001", ("pw", "pw")),
    ("pw-pathways-head-0-0.pw.team-x.svc.cluster.local:29001", ("team-x", "pw")),
    ("pw-pathways-head-0-0.pw:29001", ("pw", "pw")),  # short form: the stack's namespace is the service's name
    ("pw-pathways-head-0-0.other.pw.svc:29001", None),  # the subdomain is not the JobSet's
    ("pw-pathways-head-0-0.pw.pw.svc.example.com:29001", None),
    ("pathways-head-0-0.pw:29001", None),
    ("rm.pw.svc:29001", None),
])
def test_service_jobset_reads_name_and_namespace_from_the_address(address, jobset):
    assert proxy.service_jobset(address) == jobset


def test_service_jobset_reads_back_every_address_the_stack_renders():
    for name in ("pw", "pathways-service", "a" * 20):
        assert proxy.service_jobset(pathways.pathways_service_address(name)) == (name, name)
    assert pathways.pathways_head_host("pw").split(".")[0].endswith(proxy.SERVICE_HEAD_POD_SUFFIX)
    assert pathways.WORKER_JOB in proxy.SERVICE_WORKER_JOBS
    assert pathways.WORKER_CONTAINER in proxy.SERVICE_WORKER_CONTAINERS
    assert pathways.SIDECAR_CONTAINER == proxy.SERVICE_SIDECAR_CONTAINER


def rendered_service(tpu: str = "v6e-16", server_image: str = "us-docker.pkg.dev/p/pathways/server:jax-0.10.0",
                     sidecar_image: str | None = None) -> dict:
    return pathways.render_pathways_service_jobset(
        "pw", spec=resolve_tpu_type(tpu), slices=2, capacity="on-demand", server_image=server_image,
        gcs_scratch_location="gs://b", cpu_pool="cpu", node_pools=["a", "b"], sidecar_image=sidecar_image)


def test_read_service_jobset_finds_the_worker_image_and_instance_type():
    facts = proxy.read_service_jobset(rendered_service(sidecar_image="us-docker.pkg.dev/p/sidecar:1"))
    assert facts == proxy.ServiceFacts("us-docker.pkg.dev/p/pathways/server:jax-0.10.0", ("tpuv6e:4x4",),
                                       "us-docker.pkg.dev/p/sidecar:1")
    assert proxy.proxy_image_from_service(facts, "pw/pw") == "us-docker.pkg.dev/p/pathways/proxy_server:jax-0.10.0"


def test_read_service_jobset_accepts_the_worker_spelling_of_other_tools():
    jobset = {"spec": {"replicatedJobs": [{"name": "worker", "template": {"spec": {"template": {"spec": {
        "containers": [{"name": "pathways-worker", "image": "r/pathways/server:jax-0.8.0",
                        "args": ["--instance_type=tpuv5e:4x4", "--server_port=29005"]}]}}}}}]}}
    assert proxy.read_service_jobset(jobset) == proxy.ServiceFacts("r/pathways/server:jax-0.8.0", ("tpuv5e:4x4",))


def test_proxy_image_from_service_without_a_worker_asks_for_the_image():
    with pytest.raises(ConfigError) as raised:
        proxy.proxy_image_from_service(proxy.read_service_jobset({"spec": {}}), "pw/pw")
    (problem,) = raised.value.problems
    assert problem.path == "proxy_image" and "no pathways-worker container" in problem.hint


def test_offered_instance_type_problems_name_what_the_service_serves():
    requested = [("v6e-16", resolve_tpu_type("v6e-16")), ("v6e-4", resolve_tpu_type("v6e-4"))]
    (problem,) = proxy.offered_instance_type_problems(requested, ("tpuv6e:4x4",))
    assert (problem.path, problem.given) == ("tpus['v6e-4']", "v6e-4")
    assert "tpuv6e:4x4" in problem.allowed and "tpuv6e:2x2" in problem.hint
    assert proxy.offered_instance_type_problems(requested, ()) == []


@pytest.mark.parametrize("location, normalized", [
    ("scratch-bucket", "gs://scratch-bucket"),
    ("gs://scratch-bucket/", "gs://scratch-bucket"),
    ("gs://scratch_bucket/a/b/", "gs://scratch_bucket/a/b"),
    ("gs://a.b.c", "gs://a.b.c"),
])
def test_parse_gcs_location_normalizes(location, normalized):
    assert proxy.parse_gcs_location(location) == normalized


def test_parse_tpus_accepts_every_generation_and_the_pathways_spelling():
    names = {"v4-8": 1, "v5litepod-8": 1, "v5p-16": 1, "v6e-16": 1, "tpu7x-8": 1, "tpuv6e:2x2": 3}
    assert [(s.pathways_instance_type, n) for s, n in proxy.parse_tpus(names)][-1] == ("tpuv6e:2x2", 3)
    assert len(proxy.parse_tpus(names)) == len(names)


# ---- janitor --------------------------------------------------------------------------------------------------------


@pytest.fixture
def janitor_spec() -> proxy.JanitorSpec:
    return proxy.JanitorSpec(namespace="team-a", image="us-docker.pkg.dev/p/tools/tpuplane:0.1.0")


def test_render_janitor_is_valid_kubernetes(janitor_spec):
    for manifest in proxy.render_janitor(janitor_spec):
        kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


def test_render_janitor_runs_the_cli_with_least_privilege(janitor_spec):
    account, role, binding, cron_job = proxy.render_janitor(janitor_spec)
    assert role["rules"] == [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["delete", "get", "list"]}]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                    "namespace": "team-a"}]
    pod = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == account["metadata"]["name"]
    assert pod["containers"][0]["command"] == ["tpuplane", "janitor", "--namespace", "team-a", "--stale-after", "600"]
    assert cron_job["spec"]["concurrencyPolicy"] == "Forbid"


def test_render_janitor_is_the_same_in_every_process():
    first, second = printed_by_two_processes(
        "import json\nfrom tpuplane.infra.pathways import proxy\n"
        "print(json.dumps(proxy.render_janitor(proxy.JanitorSpec(namespace='team-a', image='p/tools:1'))))")
    assert first == second and "tpuplane-proxy-janitor" in first


@pytest.mark.parametrize("change, path", [
    ({"namespace": "Team"}, "ProxyJanitorArgs.namespace"),
    ({"image": ""}, "ProxyJanitorArgs.image"),
    ({"schedule": "every 5 minutes"}, "ProxyJanitorArgs.schedule"),
    ({"stale_after_seconds": 10}, "ProxyJanitorArgs.stale_after_seconds"),
])
def test_janitor_problems_name_the_field(janitor_spec, change, path):
    with pytest.raises(ConfigError) as raised:
        proxy.read_janitor({**janitor_spec.model_dump(), **change}, Source.args("ProxyJanitorArgs", proxy.JanitorSpec))
    assert [p.path for p in raised.value.problems] == [path]


def test_proxy_janitor_component_registers_its_objects_in_order(janitor_spec):
    """Pulumi mocks stand in for the Kubernetes API server, which cannot exist here."""
    plan = run_under_mocks(lambda: ProxyJanitor("janitor", ProxyJanitorArgs(namespace="team-a", image=janitor_spec.image)), {})
    (component,) = plan.of_type("tpuplane:index:ProxyJanitor")
    children = [r for r in plan.resources if r.parent == component.urn]
    kinds = {r.type.rsplit(":", 1)[-1]: r for r in children}
    assert set(kinds) == {"ServiceAccount", "Role", "RoleBinding", "CronJob"}
    assert not [r.type for r in plan.resources if r.type.startswith("gcp:")]  # a Kubernetes provider is enough
    assert len(kinds["CronJob"].depends_on) == 3
    command = kinds["CronJob"].inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["tpuplane", "janitor"]
