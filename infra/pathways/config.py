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
from typing import TYPE_CHECKING

from packaging.version import Version
from pydantic import Field

from tpuplane.infra.fleet.capacity import capacity_mode
from tpuplane.infra.fleet.catalog import TpuSpec
from tpuplane.infra.errors import Problem, problems_of
from tpuplane.infra.pathways.images import is_pinned, jax_version_of_tag
from tpuplane.infra.batch.kueue_config import SYSTEM_NAMESPACES
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.naming import DNS_LABEL, K8S_LABEL_VALUE_MAX, workload_policy_name
from tpuplane.infra.pathways.service import (
    PATHWAYS_GENERATIONS,
    machine_shape,
    pathways_cpu_requirements,
    pathways_head_host,
    pathways_service_address,
    scratch_bucket_name,
    server_image_for_jax,
)
from tpuplane.infra.pathways.proxy import (
    PROXY_RESOURCES,
    JanitorSpec,
    janitor_problems,
    matching_proxy_image,
    parse_gcs_location,
    parse_image,
)
from tpuplane.infra.pathways.sidecar_image import base_image_for

if TYPE_CHECKING:
    from tpuplane.infra.config import StackConfig, TpuPoolConfig

PATH = "tpuplane:pathways"
DEFAULT_SIDECAR_REQUIREMENTS = "sidecar/requirements.txt"
DEFAULT_SIDECAR_CONSTRAINTS = "sidecar/constraints.example.txt"


class SidecarConfig(ConfigModel):
    """Build a sidecar from `requirements` on the base image of `jax_version`, or run a ready `image`.

    `context` is the build context, the folder holding the Dockerfile (default: the folder of `requirements`,
    which must lie inside it: the build installs it from there). `constraints` is the base image's
    `/opt/venv/server_constraints.txt`, exported, that the offline check reads. Paths are relative to the project
    (the folder of Pulumi.yaml).
    """

    requirements: str | None = None
    context: str | None = None
    constraints: str | None = None
    jax_version: str | None = None
    image: str | None = None

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


class PathwaysConfig(ConfigModel):
    name: str
    tpu_pool: str
    slices: int | None = Field(None, ge=1)
    server_image: str | None = None
    jax_version: str | None = None
    gcs_bucket: str | None = None
    sidecar: SidecarConfig | None = None
    janitor_image: str | None = None  # an image with `tpuplane[runtime]`: reaps leaked proxies in client namespaces

    @property
    def server_image_ref(self) -> str:
        """The server image; valid once `pathways_problems` found nothing."""
        return self.server_image or server_image_for_jax(self.jax_version or "")

    @property
    def proxy_image_ref(self) -> str:
        proxy = matching_proxy_image(self.server_image_ref)
        assert proxy is not None  # checked by pathways_problems
        return proxy

    @property
    def service_jax_version(self) -> str | None:
        """The service's JAX: jaxVersion, or the `jax-<v>` tag of serverImage; None when a custom tag hides it."""
        if self.jax_version is not None:
            return self.jax_version
        return jax_version_of_tag(self.server_image) if self.server_image is not None else None

    @property
    def sidecar_jax_version(self) -> str | None:
        """The JAX the sidecar must run: its own setting, else the service's (the two must be equal)."""
        if self.sidecar is None:
            return None
        return self.sidecar.jax_version or self.service_jax_version


def team_namespaces(cfg: "StackConfig") -> list[str]:
    """Namespaces of the declared Kueue teams: where clients (and their proxies) run."""
    teams = getattr(cfg.kueue, "teams", None) or []
    return sorted({getattr(team, "team_namespace", None) or getattr(team, "namespace", None) or team.name
                   for team in teams})


# ---- rules ------------------------------------------------------------------------------------------------------


def pathways_problems(cfg: "StackConfig") -> list[Problem]:
    """Rules of `tpuplane:pathways`, checked once the pools are valid."""
    pw = cfg.pathways
    if pw is None:
        return []
    pool = cfg.pool_by_name(pw.tpu_pool)
    if pool is None:
        pools = ", ".join(p.name for p in cfg.tpu_pools) or "none declared"
        problems = _name_problems(pw, team_namespaces(cfg)) + [
            Problem(f"{PATH}.tpuPool", pw.tpu_pool, f"the name of a tpuplane:tpuPools group: {pools}",
                    "the service's workers run on that group's node pools")]
        problems += _image_problems(pw) + _bucket_problems(pw)
    else:
        problems = service_problems(pw, pool, team_namespaces(cfg))
    if pw.janitor_image is not None:
        problems += problems_of(lambda: parse_image(pw.janitor_image, path=f"{PATH}.janitorImage"))
        problems += _janitor_namespace_problems(cfg, pw.janitor_image)
    problems += _sidecar_problems(pw)
    problems += cpu_pool_problems(cfg.cluster.cpu_pool.machine_type)
    return problems


def service_problems(pw: PathwaysConfig, pool: "TpuPoolConfig", client_namespaces: list[str]) -> list[Problem]:
    """The rules of one service on one pool group, whoever declared them (under `tpuplane:pathways` paths)."""
    return (_name_problems(pw, client_namespaces) + _pool_problems(pool, pw) + _image_problems(pw)
            + _bucket_problems(pw))


def _bucket_problems(pw: PathwaysConfig) -> list[Problem]:
    if pw.gcs_bucket is None:
        return []
    return problems_of(lambda: parse_gcs_location(pw.gcs_bucket, path=f"{PATH}.gcsBucket"))


def _name_problems(pw: PathwaysConfig, client_namespaces: list[str]) -> list[Problem]:
    path = f"{PATH}.name"
    host = pathways_head_host(pw.name)
    if not DNS_LABEL.fullmatch(pw.name):
        return [Problem(path, pw.name, "a DNS label: lowercase letters, digits and '-', starting with a letter",
                        "it names the JobSet, its namespace and the DNS subdomain of its pods")]
    if len(host) > K8S_LABEL_VALUE_MAX:
        longest = (K8S_LABEL_VALUE_MAX - len(pathways_head_host(""))) // 2
        return [Problem(path, pw.name, f"at most {longest} characters",
                        f"JobSet stores the head's hostname '{host}' in a label, at most {K8S_LABEL_VALUE_MAX} characters")]
    if pw.name == "default" or pw.name in SYSTEM_NAMESPACES or pw.name.startswith("kube-"):
        return [Problem(path, pw.name, "a name that is not a system namespace",
                        "the service gets a namespace of its own, named after it")]
    if pw.name in client_namespaces:
        return [Problem(path, pw.name, "a name no Kueue team uses as its namespace",
                        "the service's namespace admits only its own pods and the teams' clients")]
    return []


def _pool_problems(pool: "TpuPoolConfig", pw: PathwaysConfig) -> list[Problem]:
    problems = []
    if pw.slices is not None and pw.slices > pool.slices:
        problems.append(Problem(f"{PATH}.slices", pw.slices, f"at most {pool.slices}",
                                f"pool group '{pool.name}' has {pool.slices} slices; add slices there first"))
    spec = pool.spec
    if spec.generation not in PATHWAYS_GENERATIONS or not spec.pathways_instance_type:
        problems.append(Problem(f"{PATH}.tpuPool", pw.tpu_pool,
                                f"a pool of a generation Pathways serves: {', '.join(PATHWAYS_GENERATIONS)}",
                                f"'{pool.name}' holds {pool.tpu_type} ({spec.generation})"))
    if capacity_mode(pool.capacity.value).provisioning_request:
        problems.append(Problem(f"{PATH}.tpuPool", pw.tpu_pool, "a pool whose capacity is not queued",
                                "queued (DWS) nodes come only through a ProvisioningRequest; a long-lived "
                                "service needs on-demand, spot, flex-start or reserved nodes"))
    return problems


def _image_problems(pw: PathwaysConfig) -> list[Problem]:
    if (pw.server_image is None) == (pw.jax_version is None):
        return [Problem(PATH, {"serverImage": pw.server_image, "jaxVersion": pw.jax_version},
                        "exactly one of serverImage and jaxVersion",
                        "jaxVersion picks the public server and proxy images of that JAX release")]
    if pw.jax_version is not None:
        return _version_problems(f"{PATH}.jaxVersion", pw.jax_version)
    path = f"{PATH}.serverImage"
    problems = problems_of(lambda: parse_image(pw.server_image, path=path))
    if problems:
        return problems
    if matching_proxy_image(pw.server_image) is None:
        return [Problem(path, pw.server_image, "an image named .../server:<tag> or .../server@sha256:<digest>",
                        "the proxy image is the sibling .../proxy_server with the same tag")]
    if not is_pinned(pw.server_image):
        return [Problem(path, pw.server_image, "a pinned tag or digest, not latest",
                        "server and proxy images must be the same build; a moving tag lets them skew")]
    return []


def _version_problems(path: str, version: str) -> list[Problem]:
    try:
        Version(version)
    except ValueError:  # InvalidVersion, or a release part too long to read as a number
        return [Problem(path, version, "a JAX release version such as 0.9.0")]
    return []


def _janitor_namespace_problems(cfg: "StackConfig", image: str) -> list[Problem]:
    """The proxy janitor's CronJob runs in every team namespace: each must take its name rules, checked here under
    the team's own config path, before any resource is registered."""
    problems = []
    for i, team in enumerate(getattr(cfg.kueue, "teams", None) or []):
        path = f"tpuplane:kueue.teams[{i}].{'namespace' if team.namespace else 'name'}"
        for problem in janitor_problems(JanitorSpec(namespace=team.team_namespace, image=image)):
            if problem.path.endswith(".namespace"):
                problems.append(Problem(path, problem.given, f"{problem.allowed} (the proxy janitor's CronJob runs "
                                        "in this namespace)", "shorten it, or drop tpuplane:pathways.janitorImage"))
    return problems


def _sidecar_problems(pw: PathwaysConfig) -> list[Problem]:
    sidecar = pw.sidecar
    if sidecar is None:
        return []
    path = f"{PATH}.sidecar"
    build_inputs = (sidecar.requirements, sidecar.context, sidecar.jax_version, sidecar.constraints)
    if sidecar.image is not None:
        if any(value is not None for value in build_inputs):
            return [Problem(path, sidecar.model_dump(by_alias=True, exclude_none=True),
                            "either image, or requirements with an optional context, constraints and jaxVersion",
                            "a ready image is used as it is; nothing is built")]
        return problems_of(lambda: parse_image(sidecar.image, path=f"{path}.image"))
    problems = _sidecar_context_problems(sidecar)
    version = pw.sidecar_jax_version
    if version is None:
        return [*problems, Problem(f"{path}.jaxVersion", None, "the JAX version of the server image",
                                   "serverImage's tag is not jax-<version>, so the service's JAX is unknown; "
                                   "the sidecar must run exactly the same JAX")]
    service = pw.service_jax_version
    if sidecar.jax_version is not None and service is not None:
        bad = _version_problems(f"{path}.jaxVersion", sidecar.jax_version)
        if bad:
            return [*problems, *bad]
        if _version_problems(PATH, service):
            return problems  # the service's own version is reported at tpuplane:pathways.jaxVersion
        if Version(sidecar.jax_version) != Version(service):
            source = "jaxVersion" if pw.jax_version is not None else f"serverImage tag jax-{service}"
            return [*problems, Problem(f"{path}.jaxVersion", sidecar.jax_version,
                                       f"{service} (the service's {source})",
                                       "client, server and sidecar must run exactly the same jax and jaxlib")]
    return [*problems, *problems_of(lambda: base_image_for(version, path=f"{path}.jaxVersion"))]


def _project_path_problems(sidecar: SidecarConfig) -> list[Problem]:
    """Paths stay inside the project: a stack config must not make a plan read (and quote) files elsewhere."""
    problems = []
    for key, value in (("requirements", sidecar.requirements), ("context", sidecar.context),
                       ("constraints", sidecar.constraints)):
        if value is None:
            continue
        normal = posixpath.normpath(value)
        if posixpath.isabs(value) or "\\" in value or normal == ".." or normal.startswith("../") \
                or re.match(r"^[A-Za-z]:", value) or value.startswith("~"):
            problems.append(Problem(f"{PATH}.sidecar.{key}", value, "a path inside the project, relative to the "
                                    "folder of Pulumi.yaml, with '/' separators",
                                    "keep the sidecar's files in the repository, e.g. sidecar/requirements.txt"))
    return problems


def _sidecar_context_problems(sidecar: SidecarConfig) -> list[Problem]:
    """The build installs the requirements from inside its context: a file outside it never reaches the build."""
    outside_project = _project_path_problems(sidecar)
    if outside_project:
        return outside_project
    requirements, context = sidecar.requirements_path, sidecar.context_path
    outside = posixpath.isabs(requirements) != posixpath.isabs(context)
    if outside or posixpath.relpath(requirements, context).partition("/")[0] in ("..", "."):
        return [Problem(f"{PATH}.sidecar.requirements", sidecar.requirements_path,
                        f"a file inside the build context '{sidecar.context_path}'",
                        "the image build sees only the context folder (the one holding the Dockerfile)")]
    return []


def cpu_pool_problems(machine: str) -> list[Problem]:
    """The CPU pool must hold the service's head and a client proxy."""
    shape = machine_shape(machine)
    need = pathways_cpu_requirements()
    if shape is None or shape.holds(need):
        return []  # an unknown machine family is GKE's to judge
    return [Problem("tpuplane:cluster.cpuPool.machineType", machine,
                    f"at least {need.vcpus} vCPUs and {need.memory_gib} GiB with tpuplane:pathways",
                    f"{machine} has {shape.vcpus} vCPUs and {shape.memory_gib} GiB; a client proxy asks for "
                    f"{PROXY_RESOURCES['cpu']} vCPUs and {PROXY_RESOURCES['memory']} besides GKE's reservations: "
                    "use n2-standard-32 or larger (xpk uses n2-standard-64)")]


# ---- plan -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PathwaysPlan:
    """Everything the component creates, decided from a valid config."""

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
    client_namespaces: list[str]
    service_address: str

    @property
    def instance_type(self) -> str:
        return self.spec.pathways_instance_type

    @property
    def proxy_namespaces(self) -> list[str]:
        """Where clients create their proxies: the teams' namespaces, else `default` (as `connect()` does)."""
        return self.client_namespaces or ["default"]

    def workload_identity_members(self, project: str) -> list[str]:
        """Pods get Google credentials through Workload Identity as their namespace's `default` service account:
        the service's own pods and the clients' proxies all use the scratch bucket."""
        return [f"serviceAccount:{project}.svc.id.goog[{ns}/default]"
                for ns in sorted({self.namespace, *self.proxy_namespaces})]


def plan_service(pw: PathwaysConfig, pool: "TpuPoolConfig", *, project: str, cluster_name: str,
                 client_namespaces: list[str]) -> PathwaysPlan:
    """The service `pw` on the first slices of `pool` (valid: `service_problems` found nothing)."""
    slices = service_slices(pw, pool)
    if pw.gcs_bucket is None:
        bucket = scratch_bucket_name(project, cluster_name, pw.name)
        location = f"gs://{bucket}"
    else:
        location = parse_gcs_location(pw.gcs_bucket, path=f"{PATH}.gcsBucket")
        bucket = location.removeprefix("gs://").partition("/")[0]
    return PathwaysPlan(
        name=pw.name,
        namespace=pw.name,
        spec=pool.spec,
        slices=slices,
        capacity=pool.capacity.value,
        node_pools=pool.node_pool_names[:slices],
        placement_policy=workload_policy_name(cluster_name, pool.name) if pool.spec.needs_workload_policy
        else None,
        server_image=pw.server_image_ref,
        proxy_image=pw.proxy_image_ref,
        bucket=bucket,
        create_bucket=pw.gcs_bucket is None,
        gcs_scratch_location=location,
        client_namespaces=sorted(set(client_namespaces)),
        service_address=pathways_service_address(pw.name),
    )


def service_slices(pw: PathwaysConfig, pool: "TpuPoolConfig") -> int:
    """Slices of `pool` the service holds for itself (its first ones), outside Kueue: `slices`, else all."""
    return min(pw.slices or pool.slices, pool.slices)
