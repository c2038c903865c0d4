"""The per-client Pathways proxy: input rules, the proxy Job, and the janitor that reaps leaked proxies.

A client of the Shared Pathways Service talks to its own IFRT proxy (port 29000), which asks the service's
resource manager (port 29001) for virtual slices. `tpuplane.runtime.connect()` creates that proxy as a Job rendered
here; `tpuplane janitor` (and the `ProxyJanitor` component that runs it on a schedule) finds proxies by the labels
defined here and deletes those whose client stopped renewing the heartbeat annotation (a SIGKILLed laptop, an OOM,
a closed lid). Everything in this module is pure: the same input renders byte-identical manifests.

Unlike the public client's proxy, this Job has no hostNetwork (so any number of proxies share a node), carries
`activeDeadlineSeconds` + `ttlSecondsAfterFinished` + a heartbeat, and only reports Ready once port 29000 accepts
connections.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from tpuplane.infra.args import Source, read_checked
from tpuplane.infra.errors import ConfigError, Problem, problems_of
from tpuplane.infra.fleet.catalog import TpuSpec, UnknownTpuType, resolve_pathways_instance_type, resolve_tpu_type
from tpuplane.infra.model import ConfigModel
from tpuplane.infra.naming import GKE_MAX_NODES
from tpuplane.infra.pathways.images import pull_policy

PROXY_PORT = 29000  # the IFRT proxy's gRPC port; clients use JAX_BACKEND_TARGET=grpc://...:29000
PROXY_CONTAINER = "pathways-proxy"
# The proxy image must carry the same tag as the service's server image (`.../pathways/server:<tag>`), so there is
# no default: connect() derives it from the service's JobSet (`proxy_image_from_service`) or is told.
EXAMPLE_PROXY_IMAGE = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways/proxy_server:jax-0.9.0"
PROXY_RESOURCES = {"cpu": "16", "memory": "100G"}  # requests == limits: the proxy is never squeezed or evicted first

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "tpuplane"
COMPONENT_LABEL = "tpuplane.dev/component"
PROXY_COMPONENT = "pathways-proxy"
HEARTBEAT_ANNOTATION = "tpuplane.dev/heartbeat"  # unix seconds, renewed by the client while it lives
PROXY_LABELS = {MANAGED_BY_LABEL: MANAGED_BY, COMPONENT_LABEL: PROXY_COMPONENT}
PROXY_LABEL_SELECTOR = ",".join(f"{key}={value}" for key, value in sorted(PROXY_LABELS.items()))

PROXY_NAME_PREFIX = "tpuplane-proxy"
PROXY_NAME_SUFFIX_LENGTH = 5
_JOB_NAME_MAX = 63  # the Job name becomes the value of the pods' `job-name` label

DEFAULT_ACTIVE_DEADLINE_SECONDS = 24 * 3600  # a proxy never outlives a day unless the client asks for longer
DEFAULT_TTL_SECONDS_AFTER_FINISHED = 300
DEFAULT_STALE_AFTER_SECONDS = 600  # 20 missed heartbeats at the client's default 30 s interval
MAX_STALE_AFTER_SECONDS = 7 * 24 * 3600  # a proxy silent for a week is gone; larger values are typos

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_LABEL_MAX = 63
_DNS_NAME_MAX = 253
IMAGE_REFERENCE = re.compile(r"^[a-z0-9][a-z0-9._\-/:]*(@sha256:[0-9a-f]{64})?$")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9._\-]*[a-z0-9]$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")
_CRON_FIELD = re.compile(r"^[0-9*/,\-]+$")

# How a Shared Pathways Service is named and shaped (rendered by `tpuplane.infra.pathways.service`, which imports this
# module, hence the copies; tests check both agree). The worker names also cover the pathways-job / xpk spelling.
SERVICE_HEAD_POD_SUFFIX = "-pathways-head-0-0"
SERVICE_WORKER_JOBS = ("pathways-worker", "worker")
SERVICE_WORKER_CONTAINERS = ("pathways-worker", "worker")
SERVICE_SIDECAR_CONTAINER = "colocated-python-sidecar"
SERVICE_ADDRESS_EXAMPLE = "pw-pathways-head-0-0.pw.pw.svc:29001"


# ---- client input -----------------------------------------------------------------------------------------------


def parse_service_address(address: str, *, path: str = "pathways_service") -> tuple[str, int]:
    """`host:port` of the service's resource manager, e.g. `pw-pathways-head-0-0.pw.pw.svc:29001`."""
    allowed = "<host>:<port> with a DNS name host (lowercase labels of a-z, 0-9, '-') and a port in 1-65535"
    if not isinstance(address, str) or address.count(":") != 1:
        raise ConfigError.at(path, address, allowed, f"e.g. {SERVICE_ADDRESS_EXAMPLE}")
    host, port_text = address.split(":")
    labels = host.split(".")
    if not host or len(host) > _DNS_NAME_MAX or not all(
        _DNS_LABEL.match(label) and len(label) <= _DNS_LABEL_MAX for label in labels
    ):
        hint = "Kubernetes DNS names are lowercase" if host != host.lower() else "the host is the head pod's DNS name"
        raise ConfigError.at(path, address, allowed, hint)
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ConfigError.at(path, address, allowed, "the resource manager listens on 29001")
    return host, int(port_text)


def service_jobset(address: str) -> tuple[str, str] | None:
    """(namespace, name) of the service's JobSet, from its address; None when the address does not say.

    `<name>-pathways-head-0-0.<name>.<namespace>.svc[.cluster.local]:<port>` (what the stack exports) names both;
    the short `<name>-pathways-head-0-0.<name>:<port>` means the stack's own namespace, which is `<name>`.
    """
    host = address.rpartition(":")[0]
    head, _, rest = host.partition(".")
    name = head.removesuffix(SERVICE_HEAD_POD_SUFFIX)
    if name == head or not name:
        return None
    labels = rest.split(".")
    if labels == [name]:
        return name, name
    if len(labels) >= 3 and labels[0] == name and labels[2:] in (["svc"], ["svc", "cluster", "local"]):
        return labels[1], name
    return None


@dataclass(frozen=True)
class ServiceFacts:
    """What a client must match, read from the service's JobSet."""

    server_image: str | None  # the worker container's image; None if the JobSet has no worker container
    instance_types: tuple[str, ...]  # the Pathways instance types (`tpuv6e:2x2`) the service's flags name
    sidecar_image: str | None = None  # the workers' colocated-Python sidecar, if they have one


def read_service_jobset(jobset: Mapping) -> ServiceFacts:
    """The worker and sidecar images and the `--instance_type=` flags of a Shared Pathways Service JobSet (API JSON
    form)."""
    server_image = sidecar_image = None
    instance_types: list[str] = []
    for job in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        pod = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            if job.get("name") in SERVICE_WORKER_JOBS and container.get("name") in SERVICE_WORKER_CONTAINERS \
                    and server_image is None:
                server_image = container.get("image")
            for arg in container.get("args") or []:
                value = str(arg).removeprefix("--instance_type=")
                if value != arg and value not in instance_types:
                    instance_types.append(value)
        for container in pod.get("initContainers") or []:
            if job.get("name") in SERVICE_WORKER_JOBS and container.get("name") == SERVICE_SIDECAR_CONTAINER:
                sidecar_image = sidecar_image or container.get("image")
    return ServiceFacts(server_image, tuple(instance_types), sidecar_image)


def proxy_image_from_service(facts: ServiceFacts, jobset: str, *, path: str = "proxy_image") -> str:
    """The proxy image built with the service's server image, so client and server speak the same protocol."""
    derived = matching_proxy_image(facts.server_image) if facts.server_image else None
    if derived is None:
        found = f"worker image {facts.server_image}" if facts.server_image else "no pathways-worker container"
        raise ConfigError.at(path, None, "an image reference such as " + EXAMPLE_PROXY_IMAGE,
                             f"JobSet {jobset} has {found}, from which no proxy_server image follows; pass "
                             f"proxy_image= with the proxy built with the service's server image")
    return derived


def offered_instance_type_problems(requested: Sequence[tuple[str, TpuSpec]], offered: Sequence[str],
                                   *, path: str = "tpus") -> list[Problem]:
    """A slice the service does not serve would wait forever for placement: name it now, with what it serves."""
    if not offered:
        return []  # a service whose flags do not say: the resource manager decides
    choices = ", ".join(offered)
    return [Problem(f"{path}[{name!r}]", name, f"a slice the service offers: {choices}",
                    f"{name} is {spec.pathways_instance_type}; ask for "
                    + " or ".join(f"{{{choice!r}: n}}" for choice in offered))
            for name, spec in requested if spec.pathways_instance_type not in offered]


def resolve_tpu_request(name: str, *, path: str) -> TpuSpec:
    """A slice by any catalog name (`v6e-4`, `v5p-2x2x1`) or by its Pathways spelling (`tpuv6e:2x2`)."""
    try:
        return resolve_pathways_instance_type(name) if ":" in name else resolve_tpu_type(name)
    except UnknownTpuType as error:
        raise ConfigError([Problem(path, p.given, p.allowed, p.hint) for p in error.problems]) from None


def parse_tpus(tpus: Mapping[str, int], *, path: str = "tpus") -> list[tuple[TpuSpec, int]]:
    """The virtual slices a client asks for, as (slice, count) in the caller's order."""
    if not isinstance(tpus, Mapping) or not tpus:
        raise ConfigError.at(path, tpus, "a non-empty mapping of TPU type to slice count", 'e.g. {"v6e-4": 2}')
    problems: list[Problem] = []
    requested: list[tuple[TpuSpec, int]] = []
    first_name: dict[str, str] = {}
    for name, count in tpus.items():
        entry = f"{path}[{name!r}]"
        try:
            spec = resolve_tpu_request(name, path=entry) if isinstance(name, str) else None
        except ConfigError as error:
            problems.extend(error.problems)
            continue
        if spec is None:
            problems.append(Problem(entry, name, "a TPU type name such as v6e-4 or tpuv6e:2x2"))
            continue
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            problems.append(Problem(entry, count, "an integer slice count >= 1"))
            continue
        if count * spec.vms_per_slice > GKE_MAX_NODES:  # no cluster holds them: a typo, not a request
            problems.append(Problem(entry, count, f"at most {GKE_MAX_NODES // spec.vms_per_slice} slices of "
                                    f"{spec.vms_per_slice} VMs: a GKE cluster holds {GKE_MAX_NODES:,} nodes"))
            continue
        if spec.pathways_instance_type in first_name:
            problems.append(Problem(entry, name, "each slice shape once",
                                    f"{name!r} and {first_name[spec.pathways_instance_type]!r} name the same slice "
                                    f"({spec.pathways_instance_type}); add the counts"))
            continue
        first_name[spec.pathways_instance_type] = name
        requested.append((spec, count))
    if problems:
        raise ConfigError(problems)
    return requested


def parse_gcs_location(location: str, *, path: str = "gcs_bucket") -> str:
    """`gs://bucket[/folder]` (or `bucket[/folder]`), checked against GCS bucket naming rules."""
    allowed = ("gs://<bucket>[/<folder>] or <bucket>: 3-63 characters (up to 222 with dots, 63 per dot-separated "
               "part) of a-z, 0-9, '-', '_', '.', starting and ending with a letter or digit")
    if not isinstance(location, str) or not location.strip():
        raise ConfigError.at(path, location, allowed, "the scratch bucket the Pathways service also uses")
    bare = location.removeprefix("gs://")
    bucket, _, folder = bare.partition("/")
    parts = bucket.split(".")
    hint = ""
    if not _BUCKET_NAME.match(bucket) or not 3 <= len(bucket) <= 222:
        hint = "bucket names are lowercase" if bucket != bucket.lower() else ""
    elif any(not part or len(part) > 63 for part in parts) or ("." not in bucket and len(bucket) > 63):
        hint = "each dot-separated part is at most 63 characters"
    elif _IPV4.match(bucket):
        hint = "a bucket name cannot look like an IP address"
    elif bucket.startswith("goog") or "google" in bucket:
        hint = "GCS reserves names starting with 'goog' or containing 'google'"
    elif any(segment in (".", "..") for segment in folder.split("/")) or any(c in folder for c in "\r\n#[]*?"):
        hint = "the folder must be a plain object prefix"
    else:
        return f"gs://{bucket}/{folder.strip('/')}" if folder.strip("/") else f"gs://{bucket}"
    raise ConfigError.at(path, location, allowed, hint)


def parse_image(image: str, *, path: str = "proxy_image") -> str:
    """A container image reference; the proxy's tag must equal the service's server image tag."""
    if not isinstance(image, str) or not IMAGE_REFERENCE.match(image) or len(image) > 512:
        raise ConfigError.at(path, image, "an image reference such as " + EXAMPLE_PROXY_IMAGE,
                             "use the proxy_server image with the same tag as the service's server image")
    return image


def matching_proxy_image(server_image: str) -> str | None:
    """The proxy built with a server image: `.../server[:tag][@digest]` -> `.../proxy_server[:tag][@digest]`.

    None when the image is not named `server` (nothing to derive from).
    """
    name, at, digest = server_image.partition("@")
    slash, colon = name.rfind("/"), name.rfind(":")
    repository, tag = (name[:colon], name[colon:]) if colon > slash else (name, "")
    base, sep, last = repository.rpartition("/")
    if last != "server":
        return None
    return f"{base}{sep}proxy_server{tag}{at}{digest}"


@dataclass(frozen=True)
class ProxyOptions:
    """What `proxy_options=["key:value", ...]` may change; every other key is an error, never silently ignored."""

    use_insecure_credentials: bool = False  # env IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS=true
    sidecar: bool = False  # --sidecar_name=external: the service runs a colocated-Python sidecar
    xla_flags: tuple[str, ...] = ()  # extra --xla_* flags for the proxy
    elastic_slices: int = 0  # --num_elastic_slices=N
    metrics: bool = False  # --enable_metrics_collection=true


PROXY_OPTION_FORMS = {
    "use_insecure_credentials": "true|false",
    "sidecar": "true|false",
    "xla_flags": '"--xla_a=1 --xla_b=2" (space-separated flags, each starting with --xla_)',
    "elastic_slices": "an integer >= 0",
    "metrics": "true|false",
}
_BOOLEANS = {"true": True, "false": False}


def parse_proxy_options(options: Sequence[str], *, path: str = "proxy_options") -> ProxyOptions:
    """`["sidecar:true", 'xla_flags:"--xla_foo=1"']` -> ProxyOptions. Keys are case-insensitive."""
    allowed_keys = "key:value with key one of " + ", ".join(
        f"{key} ({form})" for key, form in PROXY_OPTION_FORMS.items())
    if isinstance(options, str) or not isinstance(options, Sequence):
        raise ConfigError.at(path, options, "a list of " + allowed_keys, 'e.g. ["sidecar:true"]')
    values: dict[str, object] = {}
    problems: list[Problem] = []
    for index, option in enumerate(options):
        entry = f"{path}[{index}]"
        key, sep, raw = option.partition(":") if isinstance(option, str) else ("", "", "")
        key, raw = key.strip().lower(), raw.strip()
        if not sep or key not in PROXY_OPTION_FORMS or not raw:
            problems.append(Problem(entry, option, allowed_keys))
            continue
        if key in values:
            problems.append(Problem(entry, option, "each key once", f"{key} is already set"))
            continue
        value = _option_value(key, raw)
        if value is None:
            problems.append(Problem(entry, option, f"{key}:{PROXY_OPTION_FORMS[key]}"))
            continue
        values[key] = value
    if problems:
        raise ConfigError(problems)
    return ProxyOptions(**values)  # type: ignore[arg-type]


def _option_value(key: str, raw: str) -> object | None:
    """The typed value of one option, or None if `raw` is not of the key's form."""
    if PROXY_OPTION_FORMS[key] == "true|false":
        return _BOOLEANS.get(raw.lower())
    if key == "elastic_slices":
        return int(raw) if raw.isdigit() else None
    flags = tuple(raw.strip('"\'').split())
    return flags if flags and all(flag.startswith("--xla_") for flag in flags) else None


def parse_name(name: str, *, path: str, max_length: int = _DNS_LABEL_MAX) -> str:
    """A Kubernetes object name that is also a DNS label (namespaces, Job names)."""
    if not isinstance(name, str) or not _DNS_LABEL.match(name) or len(name) > max_length:
        raise ConfigError.at(path, name, f"a DNS label: lowercase a-z, 0-9 and '-', at most {max_length} characters")
    return name


def proxy_job_name(user: str, suffix: str) -> str:
    """`tpuplane-proxy-<user>-<suffix>`: findable by owner at a glance, unique by the random suffix."""
    cleaned = re.sub(r"[^a-z0-9]+", "-", user.lower()).strip("-") or "user"
    room = _JOB_NAME_MAX - len(PROXY_NAME_PREFIX) - len(suffix) - 2
    return f"{PROXY_NAME_PREFIX}-{cleaned[:room].rstrip('-')}-{suffix}"


# ---- the proxy Job ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProxyJobSpec:
    """Everything the proxy Job depends on; build it from validated input (the parse_* functions above)."""

    name: str
    namespace: str
    service: str  # host:port of the resource manager
    slices: tuple[tuple[TpuSpec, int], ...]
    gcs_location: str
    heartbeat: int  # unix seconds at creation
    image: str  # the proxy_server image with the service's server tag
    options: ProxyOptions = ProxyOptions()
    active_deadline_seconds: int = DEFAULT_ACTIVE_DEADLINE_SECONDS
    ttl_seconds_after_finished: int = DEFAULT_TTL_SECONDS_AFTER_FINISHED


def virtual_slices(slices: Sequence[tuple[TpuSpec, int]]) -> str:
    """The proxy's `--virtual_slices`: one Pathways instance type per slice, e.g. `tpuv6e:2x2,tpuv6e:2x2`."""
    return ",".join(spec.pathways_instance_type for spec, count in slices for _ in range(count))


def proxy_args(spec: ProxyJobSpec) -> list[str]:
    options = spec.options
    args = [
        f"--server_port={PROXY_PORT}",
        f"--resource_manager_address={spec.service}",
        f"--gcs_scratch_location={spec.gcs_location}",
        f"--virtual_slices={virtual_slices(spec.slices)}",
        *options.xla_flags,
    ]
    if options.sidecar:
        args.append("--sidecar_name=external")
    if options.elastic_slices:
        args.append(f"--num_elastic_slices={options.elastic_slices}")
    if options.metrics:
        args.append("--enable_metrics_collection=true")
    return args


def heartbeat_annotations(now: float) -> dict[str, str]:
    return {HEARTBEAT_ANNOTATION: str(int(now))}


def render_proxy_job(spec: ProxyJobSpec) -> dict:
    """The batch/v1 Job running one client's proxy. Ready means port 29000 accepts connections."""
    env = [{"name": "IFRT_PROXY_USE_INSECURE_GRPC_CREDENTIALS", "value": "true"}] \
        if spec.options.use_insecure_credentials else []
    container = {
        "name": PROXY_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": pull_policy(spec.image),
        "args": proxy_args(spec),
        "env": env,
        "ports": [{"containerPort": PROXY_PORT, "name": "grpc", "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": PROXY_PORT}, "periodSeconds": 2, "failureThreshold": 1},
        "resources": {"requests": dict(PROXY_RESOURCES), "limits": dict(PROXY_RESOURCES)},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsGroup": 1000,
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
    }
    if not env:
        del container["env"]
    labels = dict(sorted(PROXY_LABELS.items()))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": spec.name,
            "namespace": spec.namespace,
            "labels": dict(labels),
            "annotations": heartbeat_annotations(spec.heartbeat),
        },
        "spec": {
            "activeDeadlineSeconds": spec.active_deadline_seconds,
            "backoffLimit": 0,
            "completions": 1,
            "parallelism": 1,
            "ttlSecondsAfterFinished": spec.ttl_seconds_after_finished,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 10,
                },
            },
        },
    }


# ---- the janitor ------------------------------------------------------------------------------------------------

JANITOR_NAME = "tpuplane-proxy-janitor"
JANITOR_COMPONENT = "proxy-janitor"
DEFAULT_JANITOR_SCHEDULE = "*/5 * * * *"


class JanitorSpec(ConfigModel):
    """`ProxyJanitorArgs`: a CronJob that runs `tpuplane janitor` in one namespace, with just the rights to list
    and delete Jobs."""

    namespace: str
    image: str  # any image with `tpuplane[runtime]` installed
    schedule: str = DEFAULT_JANITOR_SCHEDULE
    stale_after_seconds: int = DEFAULT_STALE_AFTER_SECONDS
    object_name: str = JANITOR_NAME


_JANITOR_HINTS = {"namespace": "the proxy janitor's CronJob runs in this namespace",
                  "object_name": "its CronJob's Jobs add a suffix to this name"}


def janitor_problems(spec: JanitorSpec, source: Source) -> list[Problem]:
    problems: list[Problem] = []
    for field in ("namespace", "object_name"):
        # CronJob names: 52, room for the Job suffix
        problems += [dataclasses.replace(p, hint=_JANITOR_HINTS[field]) for p in problems_of(
            lambda: parse_name(getattr(spec, field), path=source.path(field), max_length=52))]
    problems += problems_of(lambda: parse_image(spec.image, path=source.path("image")))
    fields = spec.schedule.split()
    if len(fields) != 5 or not all(_CRON_FIELD.match(f) for f in fields):
        problems.append(Problem(source.path("schedule"), spec.schedule, "a 5-field cron schedule", "e.g. */5 * * * *"))
    if not 60 <= spec.stale_after_seconds <= MAX_STALE_AFTER_SECONDS:
        problems.append(Problem(source.path("stale_after_seconds"), spec.stale_after_seconds,
                                f"an integer from 60 to {MAX_STALE_AFTER_SECONDS} (a week)",
                                "several times the client's heartbeat interval (30 s)"))
    return problems


def read_janitor(raw: object, source: Source, *, supplied: Mapping[str, object] | None = None) -> JanitorSpec:
    """`ProxyJanitorArgs`, or a janitor of a stack's Pathways service (its namespace and image supplied)."""
    return read_checked(JanitorSpec, raw, source, janitor_problems, supplied=supplied)


def janitor_command_args(spec: JanitorSpec) -> list[str]:
    return ["tpuplane", "janitor", "--namespace", spec.namespace, "--stale-after", str(spec.stale_after_seconds)]


def render_janitor(spec: JanitorSpec) -> list[dict]:
    """ServiceAccount, Role (list/get/delete Jobs), RoleBinding and CronJob, in creation order."""
    labels = dict(sorted({MANAGED_BY_LABEL: MANAGED_BY, COMPONENT_LABEL: JANITOR_COMPONENT}.items()))
    def meta() -> dict:
        return {"name": spec.object_name, "namespace": spec.namespace, "labels": dict(labels)}


    service_account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta()}
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": meta(),
        "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["delete", "get", "list"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": meta(),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": spec.object_name},
        "subjects": [{"kind": "ServiceAccount", "name": spec.object_name, "namespace": spec.namespace}],
    }
    cron_job = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": meta(),
        "spec": {
            "concurrencyPolicy": "Forbid",
            "failedJobsHistoryLimit": 3,
            "schedule": spec.schedule,
            "startingDeadlineSeconds": 300,
            "successfulJobsHistoryLimit": 1,
            "jobTemplate": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "activeDeadlineSeconds": 600,
                    "backoffLimit": 1,
                    "ttlSecondsAfterFinished": 3600,
                    "template": {
                        "metadata": {"labels": dict(labels)},
                        "spec": {
                            "containers": [{
                                "name": "janitor",
                                "image": spec.image,
                                "imagePullPolicy": pull_policy(spec.image),
                                "command": janitor_command_args(spec),
                                "resources": {"requests": {"cpu": "50m", "memory": "128Mi"},
                                              "limits": {"memory": "256Mi"}},
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                    "runAsNonRoot": True,
                                    "runAsUser": 1000,
                                    "seccompProfile": {"type": "RuntimeDefault"},
                                },
                            }],
                            "restartPolicy": "Never",
                            "serviceAccountName": spec.object_name,
                        },
                    },
                },
            },
        },
    }
    return [service_account, role, binding, cron_job]
