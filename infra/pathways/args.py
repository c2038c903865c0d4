"""The Args of `SharedPathwaysService`, `ProxyJanitor` and `SidecarImage`, checked by the stack config's own Pathways rules before
the component registers anything; errors name the Args field."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tpuplane.infra.args import (
    given,
    model_from_args,
    reject_unknown,
    renamed,
    text_list_problems,
    text_problems,
)
from tpuplane.infra.batch.args import kueue_pool
from tpuplane.infra.config import CpuPoolConfig
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.naming import DNS_LABEL, K8S_NAME, PROJECT_ID, REGION, SERVICE_ACCOUNT_EMAIL
from tpuplane.infra.pathways.config import (
    PathwaysConfig,
    PathwaysPlan,
    cpu_pool_problems,
    plan_service,
    service_problems,
    service_slices,
)
from tpuplane.infra.pathways.proxy import IMAGE_REFERENCE, JanitorSpec, janitor_problems
from tpuplane.infra.pathways.sidecar_check import check_sidecar
from tpuplane.infra.pathways.sidecar_image import (
    DEFAULT_JAX_VERSION,
    DEFAULT_REQUIREMENTS_FILE,
    DOCKERFILE,
    BaseImage,
    base_image_for,
    context_problems,
)

SERVICE_ARGS, JANITOR_ARGS = "SharedPathwaysServiceArgs", "ProxyJanitorArgs"
_SERVICE_FIELDS = ("jax_version", "server_image", "slices", "gcs_bucket")
_SERVICE_ARGS_FIELDS = (*_SERVICE_FIELDS, "project", "region", "cluster_name", "pool", "node_service_account",
                        "service_name", "client_namespaces", "sidecar_image", "cpu_pool_name", "cpu_machine_type")
_SERVICE_PATHS = {"tpuplane:pathways.name": f"{SERVICE_ARGS}.service_name",
                  "tpuplane:pathways.tpuPool": f"{SERVICE_ARGS}.pool",
                  "tpuplane:cluster.cpuPool.machineType": f"{SERVICE_ARGS}.cpu_machine_type",
                  "tpuplane:pathways": SERVICE_ARGS}
_JANITOR_FIELDS = {"namespace": "namespace", "image": "image", "schedule": "schedule",
                   "stale_after_seconds": "stale_after_seconds", "object_name": "name"}
_MACHINE_TYPE = re.compile(r"[a-z][a-z0-9]*-[a-z0-9-]+")
_REPOSITORY = re.compile(r"(?=.{1,63}$)[a-z]([-a-z0-9]*[a-z0-9])?")
_IMAGE_NAME = re.compile(r"(?=.{1,128}$)[a-z0-9]+([._/-][a-z0-9]+)*")


def _service_field_problems(args: Mapping[str, Any]) -> list[Problem]:
    """The fields no stack config rule reads: where the service lives, who its nodes are, which images it runs."""
    problems = text_problems(args, SERVICE_ARGS, "project", pattern=PROJECT_ID, allowed="a GCP project id")
    problems += text_problems(args, SERVICE_ARGS, "region", pattern=REGION, allowed="a region, e.g. us-east5")
    problems += text_problems(args, SERVICE_ARGS, "cluster_name", pattern=DNS_LABEL, allowed="a GKE cluster name")
    problems += text_problems(args, SERVICE_ARGS, "node_service_account", pattern=SERVICE_ACCOUNT_EMAIL,
                              allowed="the nodes' service account email", output_ok=True)
    problems += text_problems(args, SERVICE_ARGS, "sidecar_image", required=False, output_ok=True,
                              pattern=IMAGE_REFERENCE, allowed="an image reference")
    problems += text_problems(args, SERVICE_ARGS, "cpu_pool_name", pattern=DNS_LABEL, required=False,
                              allowed="a GKE node pool name")
    problems += text_problems(args, SERVICE_ARGS, "cpu_machine_type", required=False, pattern=_MACHINE_TYPE,
                              allowed="a Compute Engine machine type, e.g. n2-standard-32")
    problems += text_problems(args, SERVICE_ARGS, "service_name", required=False, allowed="a DNS label")
    problems += text_list_problems(args, SERVICE_ARGS, "client_namespaces", pattern=K8S_NAME,
                                   allowed="a namespace name")
    return problems


def service_plan(name: str, args: Mapping[str, Any]) -> PathwaysPlan:
    """`SharedPathwaysServiceArgs` checked by the stack config's Pathways rules, and the service planned from them
    (named `service_name`, default `name`)."""
    args = given(args, SERVICE_ARGS)
    reject_unknown(args, SERVICE_ARGS, _SERVICE_ARGS_FIELDS)
    problems = _service_field_problems(args)
    if problems:
        raise ConfigError(problems)
    pool_path = f"{SERVICE_ARGS}.pool"
    raw_pool = given(args.get("pool"), pool_path)
    pool, dedicated = kueue_pool(raw_pool, pool_path, args["cluster_name"])
    namespaces = args.get("client_namespaces", [])
    service = {"name": args.get("service_name") or name, "tpu_pool": pool.name,
               **{field: args[field] for field in _SERVICE_FIELDS if field in args}}
    pw = model_from_args(PathwaysConfig, service, SERVICE_ARGS)
    problems = service_problems(pw, pool, namespaces)
    problems += cpu_pool_problems(args.get("cpu_machine_type") or CpuPoolConfig.model_fields["machine_type"].default)
    if problems:
        raise ConfigError(renamed(problems, _SERVICE_PATHS))
    if "dedicated_slices" in raw_pool and dedicated != service_slices(pw, pool):
        raise ConfigError.at(f"{pool_path}.dedicated_slices", dedicated,
                             f"the service's slices ({service_slices(pw, pool)}), or unset",
                             "the slices the service holds are the ones Kueue must not get: give the pool group "
                             "and the service the same number")
    return plan_service(pw, pool, project=args["project"], cluster_name=args["cluster_name"],
                        client_namespaces=namespaces)


def janitor_spec(args: Mapping[str, Any]) -> JanitorSpec:
    """`ProxyJanitorArgs` as the janitor's spec, checked by the same rules as the stack's janitors."""
    args = given(args, JANITOR_ARGS)
    reject_unknown(args, JANITOR_ARGS, _JANITOR_FIELDS)
    problems = [p for field in ("namespace", "image", "schedule", "object_name")
                for p in text_problems(args, JANITOR_ARGS, field, required=field in ("namespace", "image"))]
    if problems:
        raise ConfigError(problems)
    spec = JanitorSpec(**{_JANITOR_FIELDS[key]: value for key, value in args.items()})
    problems = janitor_problems(spec, path=JANITOR_ARGS)
    if problems:
        raise ConfigError(renamed(problems, {f"{JANITOR_ARGS}.name": f"{JANITOR_ARGS}.object_name",
                                             JANITOR_ARGS: JANITOR_ARGS}))
    return spec


SIDECAR_ARGS = "SidecarImageArgs"


@dataclass(frozen=True)
class SidecarBuild:
    """`SidecarImageArgs` with their defaults, paths as paths, and the base image the build starts from."""

    project: str
    region: str
    context_dir: Path
    constraints_file: Path
    requirements_file: str
    jax_version: str
    repository_id: str
    image_name: str
    base: BaseImage


def sidecar_build(args: Mapping[str, Any]) -> SidecarBuild:
    """Everything that would stop the sidecar build, before any resource: the base image for the JAX version, the
    build context, requirement conflicts with the base image's pins, and files the build would not receive."""
    args = given(args, SIDECAR_ARGS)
    reject_unknown(args, SIDECAR_ARGS, [f for f in SidecarBuild.__dataclass_fields__ if f != "base"])
    problems = text_problems(args, SIDECAR_ARGS, "project", pattern=PROJECT_ID, allowed="a GCP project id")
    problems += text_problems(args, SIDECAR_ARGS, "region", pattern=REGION, allowed="a region, e.g. us-east5")
    problems += text_problems(args, SIDECAR_ARGS, "repository_id", pattern=_REPOSITORY, required=False,
                              allowed="an Artifact Registry repository id: a-z, 0-9, '-', at most 63")
    problems += text_problems(args, SIDECAR_ARGS, "image_name", pattern=_IMAGE_NAME, required=False,
                              allowed="an image name: a-z, 0-9, '.', '_', '-', '/'")
    problems += [p for field in ("requirements_file", "jax_version")
                 for p in text_problems(args, SIDECAR_ARGS, field, required=False)]
    if problems:
        raise ConfigError(problems)
    for field in ("context_dir", "constraints_file"):
        if not isinstance(args.get(field), (str, os.PathLike)):
            raise ConfigError.at(f"{SIDECAR_ARGS}.{field}", args.get(field), "a path", "this field is required")
    jax_version = args.get("jax_version", DEFAULT_JAX_VERSION)
    build = SidecarBuild(
        project=args["project"], region=args["region"], context_dir=Path(args["context_dir"]),
        constraints_file=Path(args["constraints_file"]),
        requirements_file=args.get("requirements_file", DEFAULT_REQUIREMENTS_FILE), jax_version=jax_version,
        repository_id=args.get("repository_id", "tpuplane-sidecar"), image_name=args.get("image_name", "sidecar"),
        base=base_image_for(jax_version, path=f"{SIDECAR_ARGS}.jax_version"))
    if not (build.context_dir / DOCKERFILE).is_file():
        raise ConfigError.at(f"{SIDECAR_ARGS}.context_dir", str(build.context_dir), f"a folder holding a {DOCKERFILE}",
                             "the build context is the sidecar folder (sidecar/ in this repository)")
    result = check_sidecar(build.context_dir / build.requirements_file, build.constraints_file,
                           python_version=build.base.python_version, jax_version=jax_version,
                           jax_source=f"{SIDECAR_ARGS}.jax_version")
    result.raise_for_conflicts()
    missing = context_problems(build.context_dir, list(result.files), path=f"{SIDECAR_ARGS}.requirements_file")
    if missing:
        raise ConfigError(missing)
    return build
