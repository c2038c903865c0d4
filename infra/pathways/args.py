"""The readers of `SharedPathwaysServiceArgs` (and of the service in `tpuplane:pathways`) and of `SidecarImageArgs`:
every rule before the component registers anything; errors name what the user wrote."""

from __future__ import annotations

import os
import re
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Mapping

from pydantic import BeforeValidator

from tpuplane.infra.args import Source, read, read_checked, text
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.fleet.pools import pool_problems
from tpuplane.infra.model import ConfigModel, FromStack
from tpuplane.infra.naming import PROJECT_ID, REGION
from tpuplane.infra.pathways.config import SERVICE_ARGS, ServiceSpec, service_problems
from tpuplane.infra.pathways.sidecar_check import check_sidecar
from tpuplane.infra.pathways.sidecar_image import (
    DEFAULT_JAX_VERSION,
    DEFAULT_REQUIREMENTS_FILE,
    DOCKERFILE,
    BaseImage,
    base_image_for,
    context_problems,
)

SIDECAR_ARGS = "SidecarImageArgs"
_REPOSITORY = re.compile(r"(?=.{1,63}$)[a-z]([-a-z0-9]*[a-z0-9])?")
_IMAGE_NAME = re.compile(r"(?=.{1,128}$)[a-z0-9]+([._/-][a-z0-9]+)*")


def read_service(raw: object, source: Source | None = None, *, supplied: Mapping[str, Any] | None = None
                 ) -> ServiceSpec:
    """`SharedPathwaysServiceArgs` (the component's name supplied as `service_name`), checked by the service's
    rules; its pool group by GKE's rules as Kueue sees it."""
    return read_checked(ServiceSpec, raw, source or Source.args(SERVICE_ARGS, ServiceSpec), _service_problems,
                        supplied=supplied)


def _service_problems(pw: ServiceSpec, source: Source) -> list[Problem]:
    """The pool group the service was given, by GKE's rules as Kueue sees it; then the service's own."""
    problems = pool_problems(pw.pool, source.at("pool"), cluster_name=pw.cluster_name, project="",
                             names_reservation=False)
    return problems or service_problems(pw, source)


def _path(value: object) -> object:
    if not isinstance(value, (str, os.PathLike)):
        raise ValueError("a path")
    return Path(value)


PathArg = Annotated[Any, BeforeValidator(_path)]


class SidecarBuild(ConfigModel):
    """`SidecarImageArgs` with their defaults and paths as paths; in a stack, derived from `tpuplane:pathways.sidecar`
    (paths from the project's folder)."""

    project: Annotated[text("a GCP project id", PROJECT_ID), FromStack("gcp:project")]
    region: Annotated[text("a region, e.g. us-east5", REGION), FromStack("gcp:region")]
    context_dir: Annotated[PathArg, FromStack("tpuplane:pathways.sidecar.context")]
    constraints_file: Annotated[PathArg, FromStack("tpuplane:pathways.sidecar.constraints")]
    requirements_file: Annotated[text("text"), FromStack("tpuplane:pathways.sidecar.requirements")] = \
        DEFAULT_REQUIREMENTS_FILE
    jax_version: Annotated[text("text"), FromStack("tpuplane:pathways.jaxVersion")] = DEFAULT_JAX_VERSION
    repository_id: text("an Artifact Registry repository id: a-z, 0-9, '-', at most 63", _REPOSITORY) = \
        "tpuplane-sidecar"
    image_name: text("an image name: a-z, 0-9, '.', '_', '-', '/'", _IMAGE_NAME) = "sidecar"

    @cached_property
    def base(self) -> BaseImage:
        """The base image the build starts from: the one published for its JAX version."""
        return base_image_for(self.jax_version)


def read_sidecar_build(raw: object, source: Source | None = None, *, supplied: Mapping[str, Any] | None = None
                       ) -> SidecarBuild:
    """Everything that would stop the sidecar build, before any resource: the base image for the JAX version, the
    build context, requirement conflicts with the base image's pins, and files the build would not receive."""
    if isinstance(raw, SidecarBuild):
        return raw
    source = source or Source.args(SIDECAR_ARGS, SidecarBuild)
    build = read(SidecarBuild, raw, source, supplied=supplied)
    base = base_image_for(build.jax_version, path=source.path("jax_version"))
    if not (build.context_dir / DOCKERFILE).is_file():
        raise ConfigError.at(source.path("context_dir"), str(build.context_dir), f"a folder holding a {DOCKERFILE}",
                             "the build context is the sidecar folder (sidecar/ in this repository)")
    result = check_sidecar(build.context_dir / build.requirements_file, build.constraints_file,
                           python_version=base.python_version, jax_version=build.jax_version,
                           jax_source=source.path("jax_version"))
    result.raise_for_conflicts()
    missing = context_problems(build.context_dir, list(result.files), path=source.path("requirements_file"))
    if missing:
        raise ConfigError(missing)
    return build
