"""`SidecarImage`: an Artifact Registry repository and the colocated-Python sidecar image built and pushed into it.

The requirements are checked against the base image's pins while the component is constructed, so a conflict stops
`pulumi preview` with a ConfigError before any build starts, and so is a requirement file the build would not
receive (outside the context, or excluded by its `.dockerignore`). The wheel of tpuplane's sidecar runtime
(`tpuplane.runtime.sidecar_wheel`) is written into the context first. The image tag is the JAX version and a hash
of what the build receives (the files Docker sends and the build arguments), so an unchanged sidecar is not
rebuilt, a changed one gets a new tag (pods roll to it), editing a file the build ignores changes nothing, and a
client can read the sidecar's JAX from the tag.

Registry credentials are not inputs: the builder (BuildKit through pulumi-docker-build) uses the ambient Docker
credential helper, set up once with `gcloud auth configure-docker <region>-docker.pkg.dev`. The pushing identity
needs Artifact Registry Writer; the TPU node service account needs Artifact Registry Reader to pull.
"""

import os
from typing import NotRequired, Optional, TypedDict

import pulumi
import pulumi_docker_build as docker_build
import pulumi_gcp as gcp

from tpuplane.components.options import child_options
from tpuplane.infra.pathways.args import SidecarBuild, read_sidecar_build
from tpuplane.infra.pathways.sidecar_image import DOCKERFILE, image_tag, repository_url, sidecar_build_args
from tpuplane.runtime.sidecar_wheel import WHEEL_FOLDER, build_runtime_wheel


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
    """The client's JAX: it picks the base image, and the pinned jax/jaxlib must equal it (default 0.10.0)."""
    repository_id: NotRequired[str]
    """The Artifact Registry repository (default `tpuplane-sidecar`)."""
    image_name: NotRequired[str]
    """The image's name in the repository (default `sidecar`)."""


class SidecarImage(pulumi.ComponentResource):
    """A docker-format Artifact Registry repository and the sidecar image (linux/amd64) pushed into it."""

    image_ref: pulumi.Output[str]
    """`<region>-docker.pkg.dev/<project>/<repository>/<image>:<content hash>`, known once the push is done."""
    repository_url: pulumi.Output[str]
    """`<region>-docker.pkg.dev/<project>/<repository>`."""

    @staticmethod
    def check(args: SidecarImageArgs) -> SidecarBuild:
        """Everything that would stop the build, before any resource (see `read_sidecar_build`): a program calls
        it before its first resource and passes what it returns as the Args, which are then not read again."""
        return read_sidecar_build(args)

    def __init__(self, name: str, args: SidecarImageArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        build = self.check(args)
        base = build.base
        dockerfile = build.context_dir / DOCKERFILE

        super().__init__("tpuplane:index:SidecarImage", name, {}, opts)
        child = child_options(self, opts)

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
        self.repository_url = pulumi.Output.all(repository.project, repository.location, repository.repository_id
                                                ).apply(lambda parts: repository_url(*parts))

        build_args = sidecar_build_args(base.ref, build.requirements_file)
        # The runtime the helpers' pickles refer to goes into the context before it is hashed: the tag covers it.
        build_runtime_wheel(build.context_dir / WHEEL_FOLDER)
        tag = image_tag(build.context_dir, build_args=build_args, jax_version=base.jax_version)
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
