"""Config of the Shared Pathways Service (`tpuplane:pathways`), its rules, and the plan derived from it.

```yaml
tpuplane:pathways:
  name: pw                 # JobSet, namespace and DNS subdomain
  tpuPool: train           # a group of tpuplane:tpuPools; the service owns its node pools
  slices: 2                # default: every slice of the group
  jaxVersion: 0.9.0        # or serverImage: <registry>/.../server:<tag>; never both
  gcsBucket: gs://scratch  # optional: an existing bucket (the stack creates one otherwise)
  sidecar:                 # optional colocated-Python sidecar on every worker
    requirements: sidecar/requirements.txt
    context: sidecar       # the folder holding the Dockerfile; default: the folder of requirements
    constraints: sidecar/server_constraints.txt   # the base image's pins, exported (default: the example)
    jaxVersion: 0.10.0     # default: the service's JAX (jaxVersion, or serverImage's jax-<v> tag)
  # or sidecar: {image: <ref>}
```

Server and proxy images derive from one version, so the two can never skew.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Annotated

from packaging.version import Version
from pydantic import Field

from tpuplane.infra.args import Source, text, text_list
from tpuplane.infra.batch.kueue_config import SYSTEM_NAMESPACES
from tpuplane.infra.errors import Problem, problems_of
from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.fleet.cluster import CPU_POOL_NAME, DEFAULT_CPU_MACHINE_TYPE
from tpuplane.infra.fleet.pools import KueuePool
from tpuplane.infra.model import ConfigModel, FromStack, Hint
from tpuplane.infra.naming import (
    DNS_LABEL,
    K8S_LABEL_VALUE_MAX,
    K8S_NAME,
    PROJECT_ID,
    REGION,
    SERVICE_ACCOUNT_EMAIL,
    workload_policy_name,
)
from tpuplane.infra.pathways.images import is_pinned, jax_version_of_tag
from tpuplane.infra.pathways.proxy import (
    IMAGE_REFERENCE,
    PROXY_RESOURCES,
    matching_proxy_image,
    parse_gcs_location,
    parse_image,
)
from tpuplane.infra.pathways.service import (
    PATHWAYS_GENERATIONS,
    pathways_cpu_requirements,
    pathways_head_host,
    pathways_service_address,
    scratch_bucket_name,
    server_image_for_jax,
)
from tpuplane.infra.fleet.machines import gke_allocatable, machine_shape
from tpuplane.infra.pathways.sidecar_image import base_image_for
from tpuplane.infra.storage.identity import project_number_problems, workload_member

SERVICE_ARGS = "SharedPathwaysServiceArgs"
_MACHINE_TYPE = re.compile(r"[a-z][a-z0-9]*-[a-z0-9-]+")
DEFAULT_SIDECAR_REQUIREMENTS = "sidecar/requirements.txt"
DEFAULT_SIDECAR_CONSTRAINTS = "sidecar/constraints.example.txt"
POD_SERVICE_ACCOUNT = "default"  # what the service's pods and the clients' proxies run as: they name none


class SidecarConfig(ConfigModel):
    """Build a sidecar from `requirements` on the base image of `jax_version`, or run a ready `image`.

    `context` is the build context, the folder holding the Dockerfile (default: the folder of `requirements`,
    which must lie inside it: the build installs it from there). `constraints` is the base image's
    `/opt/venv/server_constraints.txt`, exported, that the offline check reads. Paths are relative to the project
    (the folder of Pulumi.yaml).
    """

    requirements: str | None = Field(None, description="The requirements file the build installs (default "
                                     f"`{DEFAULT_SIDECAR_REQUIREMENTS}`).")
    context: str | None = Field(None, description="The build context, the folder holding the Dockerfile (default: "
                                "the folder of `requirements`).")
    constraints: str | None = Field(None, description="The base image's `/opt/venv/server_constraints.txt`, exported "
                                    f"(default `{DEFAULT_SIDECAR_CONSTRAINTS}`, which only shows the format).")
    jax_version: str | None = Field(None, description="The sidecar's JAX (default: the service's): it picks the base "
                                    "image and must equal the service's.")
    image: str | None = Field(None, description="A ready sidecar image, used as it is (nothing is built).")

    @property
    def requirements_path(self) -> str:
        return posixpath.normpath(self.requirements or DEFAULT_SIDECAR_REQUIREMENTS)

    @property
    def context_path(self) -> str:
        return posixpath.normpath(self.context or posixpath.dirname(self.requirements_path) or ".")

    @property
    def constraints_path(self) -> str:
        return posixpath.normpath(self.constraints or DEFAULT_SIDECAR_CONSTRAINTS)

    @property
    def requirements_in_context(self) -> str:
        """The requirements file relative to the build context: the Dockerfile's REQUIREMENTS build argument."""
        return posixpath.relpath(self.requirements_path, self.context_path)


class ServiceSpec(ConfigModel):
    """`SharedPathwaysServiceArgs`, or the service's part of the `tpuplane:pathways` section (the stack supplies
    the pool it names, its project, cluster and the teams' namespaces)."""

    project: Annotated[text("a GCP project id", PROJECT_ID), FromStack("gcp:project")]
    region: Annotated[text("a region, e.g. us-east5", REGION), FromStack("gcp:region")]
    cluster_name: Annotated[text("a GKE cluster name", DNS_LABEL), FromStack("tpuplane:cluster.name")]
    pool: Annotated[KueuePool, FromStack("tpuplane:pathways.tpuPool")]
    node_service_account: Annotated[text("the nodes' service account email", SERVICE_ACCOUNT_EMAIL, output_ok=True),
                                    FromStack("tpuplane:cluster")]
    service_name: str = Field(alias="name", description="The service's name: its JobSet, namespace and DNS "
                              "subdomain (at most 22 characters).")
    slices: int | None = Field(None, ge=1)
    server_image: str | None = None
    jax_version: str | None = None
    gcs_bucket: str | None = None
    grant_bucket_access: Annotated[bool, FromStack("")] = True
    client_namespaces: Annotated[text_list("a namespace name", K8S_NAME), FromStack("tpuplane:kueue.teams")] = []
    project_number: Annotated[str | None, Hint('the project\'s number, quoted: "123456789012"'),
                              FromStack("tpuplane:storage.projectNumber")] = Field(
        None, description="The project's number: the scratch bucket's grants then name the pods' service accounts in "
                          "GKE's principal:// form, as the teams' grants do; default: the form that needs only the "
                          "project id.")
    sidecar_image: Annotated[text("an image reference", IMAGE_REFERENCE, output_ok=True),
                             FromStack("tpuplane:pathways.sidecar")] = None
    cpu_pool_name: Annotated[text("a GKE node pool name", DNS_LABEL),
                             FromStack("tpuplane:cluster.cpuPool")] = CPU_POOL_NAME
    cpu_machine_type: Annotated[text("a Compute Engine machine type, e.g. n2-standard-32", _MACHINE_TYPE),
                                FromStack("tpuplane:cluster.cpuPool.machineType")] = DEFAULT_CPU_MACHINE_TYPE

    @property
    def server_image_ref(self) -> str:
        """The server image; valid once the service was read."""
        return self.server_image or server_image_for_jax(self.jax_version or "")

    @property
    def proxy_image_ref(self) -> str:
        proxy = matching_proxy_image(self.server_image_ref)
        assert proxy is not None  # checked by service_problems
        return proxy

    @property
    def service_jax_version(self) -> str | None:
        """The service's JAX: jaxVersion, or the `jax-<v>` tag of serverImage; None when a custom tag hides it."""
        if self.jax_version is not None:
            return self.jax_version
        return jax_version_of_tag(self.server_image) if self.server_image is not None else None

    @property
    def held_slices(self) -> int:
        """Slices of its pool the service holds for itself (its first ones), outside Kueue: `slices`, else all."""
        return min(self.slices or self.pool.slices, self.pool.slices)

    @property
    def proxy_namespaces(self) -> list[str]:
        """Where clients create their proxies: the teams' namespaces, else `default` (as `connect()` does)."""
        return sorted(set(self.client_namespaces)) or ["default"]


class PathwaysConfig(ServiceSpec):
    """The `tpuplane:pathways` section: the service on a pool group it names, and the stack's extras around it (a
    sidecar to build or use, proxy janitors in the teams' namespaces)."""

    pool: Annotated[KueuePool | None, FromStack("tpuplane:pathways.tpuPool")] = None
    tpu_pool: str = Field(description="A `tpuplane:tpuPools` group: the service's workers run on its first slices.")
    sidecar: SidecarConfig | None = Field(None, description="A colocated-Python sidecar on every worker: built from "
                                          "requirements, or a ready image.")
    janitor_image: str | None = Field(None, description="An image with `tpuplane[runtime]`: a proxy janitor runs it "
                                      "in every client namespace, reaping leaked proxies.")

    @property
    def sidecar_jax_version(self) -> str | None:
        """The JAX the sidecar must run: its own setting, else the service's (the two must be equal)."""
        if self.sidecar is None:
            return None
        return self.sidecar.jax_version or self.service_jax_version


# ---- rules ------------------------------------------------------------------------------------------------------


def service_problems(pw: ServiceSpec, source: Source) -> list[Problem]:
    """The rules of one service on its pool group, whoever declared it."""
    problems = _name_problems(pw, source)
    if pw.pool is not None:
        problems += _pool_problems(pw, source)
    problems += _image_problems(pw, source) + _bucket_problems(pw, source)
    problems += cpu_pool_problems(pw.cpu_machine_type, source)
    return problems + project_number_problems(source.path("project_number"), pw.project_number)


def _bucket_problems(pw: ServiceSpec, source: Source) -> list[Problem]:
    if pw.gcs_bucket is None:
        if not pw.grant_bucket_access:
            return [Problem(source.path("gcs_bucket"), None, "an existing bucket, gs://<bucket>[/<folder>]",
                            f"with {source.key('grant_bucket_access')} false the service creates no bucket")]
        return []
    return problems_of(lambda: parse_gcs_location(pw.gcs_bucket, path=source.path("gcs_bucket")))


def _name_problems(pw: ServiceSpec, source: Source) -> list[Problem]:
    path, name = source.path("service_name"), pw.service_name
    host = pathways_head_host(name)
    if not DNS_LABEL.fullmatch(name):
        return [Problem(path, name, "a DNS label: lowercase letters, digits and '-', starting with a letter",
                        "it names the JobSet, its namespace and the DNS subdomain of its pods")]
    if len(host) > K8S_LABEL_VALUE_MAX:
        longest = (K8S_LABEL_VALUE_MAX - len(pathways_head_host(""))) // 2
        return [Problem(path, name, f"at most {longest} characters",
                        f"JobSet stores the head's hostname '{host}' in a label, at most {K8S_LABEL_VALUE_MAX} characters")]
    if name == "default" or name in SYSTEM_NAMESPACES or name.startswith("kube-"):
        return [Problem(path, name, "a name that is not a system namespace",
                        "the service gets a namespace of its own, named after it")]
    if name in pw.client_namespaces:
        return [Problem(path, name, "a name no Kueue team uses as its namespace",
                        "the service's namespace admits only its own pods and the teams' clients")]
    return []


def _pool_problems(pw: ServiceSpec, source: Source) -> list[Problem]:
    pool, problems = pw.pool, []
    if pw.slices is not None and pw.slices > pool.slices:
        problems.append(Problem(source.path("slices"), pw.slices, f"at most {pool.slices}",
                                f"pool group '{pool.name}' has {pool.slices} slices; add slices there first"))
    spec = pool.spec
    if spec.generation not in PATHWAYS_GENERATIONS or not spec.pathways_instance_type:
        problems.append(Problem(source.path("pool"), pool.name,
                                f"a pool of a generation Pathways serves: {', '.join(PATHWAYS_GENERATIONS)}",
                                f"'{pool.name}' holds {pool.tpu_type} ({spec.generation})"))
    if capacity_mode(pool.capacity.value).provisioning_request:
        problems.append(Problem(source.path("pool"), pool.name, "a pool whose capacity is not queued",
                                "queued (DWS) nodes come only through a ProvisioningRequest; a long-lived "
                                "service needs on-demand, spot, flex-start or reserved nodes"))
    if pool.dedicated_slices and pool.dedicated_slices != pw.held_slices:
        problems.append(Problem(source.path("pool", "dedicated_slices"), pool.dedicated_slices,
                                f"the service's slices ({pw.held_slices}), or unset",
                                "the slices the service holds are the ones Kueue must not get: give the pool group "
                                "and the service the same number"))
    return problems


def _image_problems(pw: ServiceSpec, source: Source) -> list[Problem]:
    return server_image_problems(pw.server_image, pw.jax_version, source, required=True)


def server_image_problems(server_image: str | None, jax_version: str | None, source: Source, *,
                          required: bool) -> list[Problem]:
    """A Pathways cluster's images: `server_image` or `jax_version` (at most one; exactly one when `required`),
    whose proxy image follows tag for tag. `source` is the model's that declares both fields."""
    server, jax = source.key("server_image"), source.key("jax_version")
    if server_image is not None and jax_version is not None or required and server_image is jax_version is None:
        return [Problem(source.root, {server: server_image, jax: jax_version},
                        f"{'exactly' if required else 'at most'} one of {server} and {jax}",
                        f"{jax} picks the public server and proxy images of that JAX release")]
    if jax_version is not None:
        return _version_problems(source.path("jax_version"), jax_version)
    if server_image is None:
        return []
    path = source.path("server_image")
    problems = problems_of(lambda: parse_image(server_image, path=path))
    if problems:
        return problems
    if matching_proxy_image(server_image) is None:
        return [Problem(path, server_image, "an image named .../server:<tag> or .../server@sha256:<digest>",
                        "the proxy image is the sibling .../proxy_server with the same tag")]
    if not is_pinned(server_image):
        return [Problem(path, server_image, "a pinned tag or digest, not latest",
                        "server and proxy images must be the same build; a moving tag lets them skew")]
    return []


def _version_problems(path: str, version: str) -> list[Problem]:
    try:
        Version(version)
    except ValueError:  # InvalidVersion, or a release part too long to read as a number
        return [Problem(path, version, "a JAX release version such as 0.9.0")]
    return []


def cpu_pool_problems(machine: str, source: Source) -> list[Problem]:
    """The CPU pool must hold the service's head and a client proxy, after GKE's reservations."""
    shape = machine_shape(machine)
    if shape is None:
        return []  # an unknown machine family is GKE's to judge
    need, room = pathways_cpu_requirements(), gke_allocatable(shape)
    if room.holds(need):
        return []
    return [Problem(source.path("cpu_machine_type"), machine,
                    f"a machine that leaves at least {need.millicores // 1000} vCPUs and {need.memory_mib} MiB to "
                    f"pods with {source.root}",
                    f"{machine} leaves {room.millicores / 1000:g} vCPUs and {room.memory_mib} MiB after GKE's "
                    f"reservations; a client proxy asks for {PROXY_RESOURCES['cpu']} vCPUs and "
                    f"{PROXY_RESOURCES['memory']}: use n2-standard-32 or larger (xpk uses n2-standard-64)")]


def pathways_section_problems(pw: PathwaysConfig, source: Source, pool_names: list[str]) -> list[Problem]:
    """What only a stack config says about its service: the pool group it names, the janitors' image and the
    sidecar it builds or uses."""
    problems = []
    if pw.pool is None and pw.tpu_pool not in pool_names:
        pools = ", ".join(pool_names) or "none declared"
        problems.append(Problem(source.path("tpu_pool"), pw.tpu_pool, f"the name of a tpuplane:tpuPools group: {pools}",
                                "the service's workers run on that group's node pools"))
    if pw.janitor_image is not None:
        problems += problems_of(lambda: parse_image(pw.janitor_image, path=source.path("janitor_image")))
    return problems + _sidecar_problems(pw, source.at("sidecar"))


def _sidecar_problems(pw: PathwaysConfig, source: Source) -> list[Problem]:
    sidecar = pw.sidecar
    if sidecar is None:
        return []
    build_inputs = (sidecar.requirements, sidecar.context, sidecar.jax_version, sidecar.constraints)
    if sidecar.image is not None:
        if any(value is not None for value in build_inputs):
            return [Problem(source.root, sidecar.model_dump(by_alias=True, exclude_none=True),
                            "either image, or requirements with an optional context, constraints and jaxVersion",
                            "a ready image is used as it is; nothing is built")]
        return problems_of(lambda: parse_image(sidecar.image, path=source.path("image")))
    problems = _sidecar_context_problems(sidecar, source)
    version, jax_path = pw.sidecar_jax_version, source.path("jax_version")
    if version is None:
        return [*problems, Problem(jax_path, None, "the JAX version of the server image",
                                   "serverImage's tag is not jax-<version>, so the service's JAX is unknown; "
                                   "the sidecar must run exactly the same JAX")]
    service = pw.service_jax_version
    if sidecar.jax_version is not None and service is not None:
        bad = _version_problems(jax_path, sidecar.jax_version)
        if bad:
            return [*problems, *bad]
        if _version_problems(jax_path, service):
            return problems  # the service's own version is reported at its own key
        if Version(sidecar.jax_version) != Version(service):
            source_of = "jaxVersion" if pw.jax_version is not None else f"serverImage tag jax-{service}"
            return [*problems, Problem(jax_path, sidecar.jax_version, f"{service} (the service's {source_of})",
                                       "client, server and sidecar must run exactly the same jax and jaxlib")]
    return [*problems, *problems_of(lambda: base_image_for(version, path=jax_path))]


def _project_path_problems(sidecar: SidecarConfig, source: Source) -> list[Problem]:
    """Paths stay inside the project: a stack config must not make a plan read (and quote) files elsewhere."""
    problems = []
    for key in ("requirements", "context", "constraints"):
        value = getattr(sidecar, key)
        if value is None:
            continue
        normal = posixpath.normpath(value)
        if posixpath.isabs(value) or "\\" in value or normal == ".." or normal.startswith("../") \
                or re.match(r"^[A-Za-z]:", value) or value.startswith("~"):
            problems.append(Problem(source.path(key), value, "a path inside the project, relative to the "
                                    "folder of Pulumi.yaml, with '/' separators",
                                    "keep the sidecar's files in the repository, e.g. sidecar/requirements.txt"))
    return problems


def _sidecar_context_problems(sidecar: SidecarConfig, source: Source) -> list[Problem]:
    """The build installs the requirements from inside its context: a file outside it never reaches the build."""
    outside_project = _project_path_problems(sidecar, source)
    if outside_project:
        return outside_project
    requirements, context = sidecar.requirements_path, sidecar.context_path
    outside = posixpath.isabs(requirements) != posixpath.isabs(context)
    if outside or posixpath.relpath(requirements, context).partition("/")[0] in ("..", "."):
        return [Problem(source.path("requirements"), sidecar.requirements_path,
                        f"a file inside the build context '{sidecar.context_path}'",
                        "the image build sees only the context folder (the one holding the Dockerfile)")]
    return []


# ---- plan -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathwaysPlan:
    """Everything the component creates, decided from a service that was read."""

    name: str
    namespace: str
    spec: TpuSpec
    slices: int
    capacity: str
    node_pools: list[str]
    placement_policy: str | None
    server_image: str
    proxy_image: str
    bucket: str
    create_bucket: bool
    gcs_scratch_location: str
    proxy_namespaces: list[str]
    service_address: str

    @property
    def instance_type(self) -> str:
        return self.spec.pathways_instance_type

    def workload_identity_members(self, project: str, project_number: str | None = None) -> list[str]:
        """Pods get Google credentials through Workload Identity as the Kubernetes service account they run as:
        the service's own pods and the clients' proxies, which all use the scratch bucket, set none (neither does
        Pathways' own service JobSet or proxy Job), so they run as their namespace's `default`."""
        return [workload_member(project=project, namespace=ns, service_account=POD_SERVICE_ACCOUNT,
                                project_number=project_number)
                for ns in sorted({self.namespace, *self.proxy_namespaces})]


def plan_service(pw: ServiceSpec) -> PathwaysPlan:
    """The service on the first slices of its pool group."""
    pool, slices = pw.pool, pw.held_slices
    if pw.gcs_bucket is None:
        bucket = scratch_bucket_name(pw.project, pw.cluster_name, pw.service_name)
        location = f"gs://{bucket}"
    else:
        location = parse_gcs_location(pw.gcs_bucket)
        bucket = location.removeprefix("gs://").partition("/")[0]
    return PathwaysPlan(
        name=pw.service_name,
        namespace=pw.service_name,
        spec=pool.spec,
        slices=slices,
        capacity=pool.capacity.value,
        node_pools=pool.node_pool_names[:slices],
        placement_policy=workload_policy_name(pw.cluster_name, pool.name) if pool.spec.needs_workload_policy
        else None,
        server_image=pw.server_image_ref,
        proxy_image=pw.proxy_image_ref,
        bucket=bucket,
        create_bucket=pw.gcs_bucket is None,
        gcs_scratch_location=location,
        proxy_namespaces=pw.proxy_namespaces,
        service_address=pathways_service_address(pw.service_name),
    )
