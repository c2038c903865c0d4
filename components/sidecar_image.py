"""`SidecarImage`: an Artifact Registry repository and the colocated-Python sidecar image built and pushed into it.

The requirements are checked against the base image's pins while the component is constructed, so a conflict stops
`pulumi preview` with a ConfigError before any build starts, and so is a requirement file the build would not
receive (outside the context, or excluded by its `.dockerignore`). The image tag is a hash of what the build
receives (the files Docker sends and the build arguments), so an unchanged sidecar is not rebuilt, a changed one
gets a new tag (pods roll to it), and editing a file the build ignores changes nothing.

Registry credentials are not inputs: the builder (BuildKit through pulumi-docker-build) uses the ambient Docker
credential helper, set up once with `gcloud auth configure-docker <region>-docker.pkg.dev`. The pushing identity
needs Artifact Registry Writer; the TPU node service account needs Artifact Registry Reader to pull.
"""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, Optional, TypedDict

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

from tpuplane.infra.args import check_args
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.pathways.sidecar_check import check_sidecar
from tpuplane.infra.pathways.sidecar_image import (
    DEFAULT_JAX_VERSION,
    DEFAULT_REQUIREMENTS_FILE,
    DOCKERFILE,
    base_image_for,
    context_problems,
    image_tag,
)


class SidecarImageArgs(TypedDict):
    """Where to build the colocated-Python sidecar image from, and where to push it."""

    project: str
    """The project of the Artifact Registry repository."""
    region: str
    """The repository's region (`<region>-docker.pkg.dev`)."""
    context_dir: str
    """The build context: the folder holding the Dockerfile (sidecar/ in this repository)."""
    constraints_file: str
    """The base image's /opt/venv/server_constraints.txt, exported next to the stack (sidecar/constraints.example.txt
    only shows its format)."""
    requirements_file: NotRequired[str]
    """The file the build installs, relative to `context_dir` (default requirements.txt)."""
    jax_version: NotRequired[str]
    """The client's JAX: it picks the base image, and the pinned jax/jaxlib must equal it."""
    repository_id: NotRequired[str]
    """The Artifact Registry repository (default `tpuplane-sidecar`)."""
    image_name: NotRequired[str]
    """The image's name in the repository (default `sidecar`)."""


@dataclass(frozen=True)
class _Build:
    """The Args with their defaults, paths as paths."""

    project: str
    region: str
    context_dir: Path
    constraints_file: Path
    requirements_file: str
    jax_version: str
    repository_id: str
    image_name: str


_ARGS = "SidecarImageArgs"


def _build(args: SidecarImageArgs) -> _Build:
    check_args(args, _ARGS)
    unknown = sorted(set(args) - set(_Build.__dataclass_fields__))
    if unknown:
        raise ConfigError.at(f"{_ARGS}.{unknown[0]}", args[unknown[0]], f"one of the fields of {_ARGS}")
    for field in ("project", "region", "context_dir", "constraints_file"):
        if not isinstance(args.get(field), (str, os.PathLike)):
            raise ConfigError.at(f"{_ARGS}.{field}", args.get(field), "text", "this field is required")
    return _Build(project=str(args["project"]), region=str(args["region"]), context_dir=Path(args["context_dir"]),
                  constraints_file=Path(args["constraints_file"]),
                  requirements_file=str(args.get("requirements_file", DEFAULT_REQUIREMENTS_FILE)),
                  jax_version=str(args.get("jax_version", DEFAULT_JAX_VERSION)),
                  repository_id=str(args.get("repository_id", "tpuplane-sidecar")),
                  image_name=str(args.get("image_name", "sidecar")))


class SidecarImage(pulumi.ComponentResource):
    """A docker-format Artifact Registry repository and the sidecar image (linux/amd64) pushed into it."""

    image_ref: pulumi.Output[str]
    """`<region>-docker.pkg.dev/<project>/<repository>/<image>:<content hash>`, known once the push is done."""
    repository_url: pulumi.Output[str]
    """`<region>-docker.pkg.dev/<project>/<repository>`."""

    @staticmethod
    def check(args: SidecarImageArgs) -> Any:
        """Everything that would stop the build, before any resource: the base image for the JAX version, the
        build context, requirement conflicts with the base image's pins, and files the build would not receive.
        A stack program calls it before its first resource; the constructor calls it again for library users.
        Returns the base image."""
        build = _build(args)
        base = base_image_for(build.jax_version, path=f"{_ARGS}.jax_version")
        if not (build.context_dir / DOCKERFILE).is_file():
            raise ConfigError.at(f"{_ARGS}.context_dir", str(build.context_dir), f"a folder holding a {DOCKERFILE}",
                                 "the build context is the sidecar folder (sidecar/ in this repository)")
        result = check_sidecar(
            build.context_dir / build.requirements_file,
            build.constraints_file,
            python_version=base.python_version,
            jax_version=build.jax_version,
            jax_source=f"{_ARGS}.jax_version",
        )
        result.raise_for_conflicts()
        missing = context_problems(build.context_dir, list(result.files), path=f"{_ARGS}.requirements_file")
        if missing:
            raise ConfigError(missing)
        return base

    def __init__(self, name: str, args: SidecarImageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        base = self.check(args)
        build = _build(args)
        dockerfile = build.context_dir / DOCKERFILE

        super().__init__("tpuplane:index:SidecarImage", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)

        repository = gcp.artifactregistry.Repository(
            f"{name}-repository",
            gcp.artifactregistry.RepositoryArgs(
                project=build.project,
                location=build.region,
                repository_id=build.repository_id,
                format="DOCKER",
                description="Colocated-Python sidecar images built by tpuplane.",
            ),
            opts=child,
        )
        # Built from the repository's outputs, so the image waits for the repository to exist.
        self.repository_url = pulumi.Output.concat(
            repository.location, "-docker.pkg.dev/", repository.project, "/", repository.repository_id
        )

        build_args = {"BASE_IMAGE": base.ref, "REQUIREMENTS": Path(build.requirements_file).as_posix()}
        tag = image_tag(build.context_dir, build_args=build_args)
        image = docker_build.Image(
            f"{name}-image",
            docker_build.ImageArgs(
                # Relative to the program's working directory (Pulumi runs the program, and starts the provider, in
                # the folder `main` names), so the same commit plans the same inputs wherever it is checked out.
                context=docker_build.BuildContextArgs(location=os.path.relpath(build.context_dir)),
                dockerfile=docker_build.DockerfileArgs(location=os.path.relpath(dockerfile)),
                build_args=build_args,
                platforms=[docker_build.Platform.LINUX_AMD64],
                push=True,
                tags=[pulumi.Output.concat(self.repository_url, f"/{build.image_name}:{tag}")],
            ),
            opts=child,
        )
        self.image_ref = image.tags.apply(lambda tags: tags[0])

        self.register_outputs({"image_ref": self.image_ref, "repository_url": self.repository_url})
