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

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

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


@dataclass
class SidecarImageArgs:
    """Where to build from and push to.

    `context_dir` is the build context, the folder holding the Dockerfile (sidecar/ in this repository).
    `requirements_file` is the file the build installs, relative to `context_dir` (the Dockerfile's REQUIREMENTS
    build argument). `constraints_file` is the base image's /opt/venv/server_constraints.txt exported next to the
    stack (the repository's sidecar/constraints.example.txt only shows its format). `jax_version` is the client's
    JAX: it picks the base image, and the pinned jax/jaxlib must equal it.
    """

    project: str
    region: str
    context_dir: Path
    constraints_file: Path
    requirements_file: str = DEFAULT_REQUIREMENTS_FILE
    jax_version: str = DEFAULT_JAX_VERSION
    repository_id: str = "tpuplane-sidecar"
    image_name: str = "sidecar"


class SidecarImage(pulumi.ComponentResource):
    """A docker-format Artifact Registry repository and the sidecar image (linux/amd64) pushed into it."""

    image_ref: pulumi.Output[str]
    """`<region>-docker.pkg.dev/<project>/<repository>/<image>:<content hash>`, known once the push is done."""
    repository_url: pulumi.Output[str]
    """`<region>-docker.pkg.dev/<project>/<repository>`."""

    @staticmethod
    def check(name: str, args: SidecarImageArgs) -> Any:
        """Everything that would stop the build, before any resource: the base image for the JAX version, the
        build context, requirement conflicts with the base image's pins, and files the build would not receive.
        A stack program calls it before its first resource; the constructor calls it again for library users.
        Returns the base image."""
        base = base_image_for(args.jax_version, path=f"{name}.jaxVersion")
        if not (args.context_dir / DOCKERFILE).is_file():
            raise ConfigError.at(f"{name}.contextDir", str(args.context_dir), f"a folder holding a {DOCKERFILE}",
                                 "the build context is the sidecar folder (sidecar/ in this repository)")
        result = check_sidecar(
            args.context_dir / args.requirements_file,
            args.constraints_file,
            python_version=base.python_version,
            jax_version=args.jax_version,
            jax_source=f"{name}.jaxVersion",
        )
        result.raise_for_conflicts()
        missing = context_problems(args.context_dir, list(result.files), path=f"{name}.requirementsFile")
        if missing:
            raise ConfigError(missing)
        return base

    def __init__(self, name: str, args: SidecarImageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        base = self.check(name, args)
        dockerfile = args.context_dir / DOCKERFILE

        super().__init__("tpuplane:index:SidecarImage", name, {}, opts)
        child = pulumi.ResourceOptions(parent=self)

        repository = gcp.artifactregistry.Repository(
            f"{name}-repository",
            gcp.artifactregistry.RepositoryArgs(
                project=args.project,
                location=args.region,
                repository_id=args.repository_id,
                format="DOCKER",
                description="Colocated-Python sidecar images built by tpuplane.",
            ),
            opts=child,
        )
        # Built from the repository's outputs, so the image waits for the repository to exist.
        self.repository_url = pulumi.Output.concat(
            repository.location, "-docker.pkg.dev/", repository.project, "/", repository.repository_id
        )

        build_args = {"BASE_IMAGE": base.ref, "REQUIREMENTS": Path(args.requirements_file).as_posix()}
        tag = image_tag(args.context_dir, build_args=build_args)
        image = docker_build.Image(
            f"{name}-image",
            docker_build.ImageArgs(
                # Relative to the program's working directory (Pulumi runs the program, and starts the provider, in
                # the folder `main` names), so the same commit plans the same inputs wherever it is checked out.
                context=docker_build.BuildContextArgs(location=os.path.relpath(args.context_dir)),
                dockerfile=docker_build.DockerfileArgs(location=os.path.relpath(dockerfile)),
                build_args=build_args,
                platforms=[docker_build.Platform.LINUX_AMD64],
                push=True,
                tags=[pulumi.Output.concat(self.repository_url, f"/{args.image_name}:{tag}")],
            ),
            opts=child,
        )
        self.image_ref = image.tags.apply(lambda tags: tags[0])

        self.register_outputs({"image_ref": self.image_ref, "repository_url": self.repository_url})
