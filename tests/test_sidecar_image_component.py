"""Specification of the `SidecarImage` component, run against Pulumi mocks.

The mocks stand in for Artifact Registry and the Docker/BuildKit builder, which cannot exist on this machine (no
cloud, no Docker engine, no Pulumi engine): they record each registration and echo its inputs back as its state.
Everything else is real: the pulumi SDK, the pulumi-gcp and pulumi-docker-build resource classes, the offline
requirements check and the content hash.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pulumi
import pytest

from tpuplane.components.sidecar_image import SidecarImage, SidecarImageArgs
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.pathways.sidecar_image import base_image_for, image_tag, sidecar_jax_version
from tpuplane.runtime import sidecar_wheel
from tpuplane.runtime.sidecar_wheel import WHEEL_FOLDER, runtime_wheel_name

SIDECAR_DIR = Path(__file__).resolve().parent.parent / "sidecar"
REPOSITORY_TYPE = "gcp:artifactregistry/repository:Repository"
IMAGE_TYPE = "docker-build:index:Image"


class RecordingMocks(pulumi.runtime.Mocks):
    """Stand-in for the GCP and docker-build providers: records registrations, echoes inputs as state."""

    def __init__(self) -> None:
        self.registrations: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        self.registrations.append(args)
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}

    def of_type(self, typ: str) -> list[pulumi.runtime.MockResourceArgs]:
        return [registration for registration in self.registrations if registration.typ == typ]


@pytest.fixture
def mocks() -> RecordingMocks:
    recording = RecordingMocks()
    pulumi.runtime.set_mocks(recording, project="tpuplane", stack="test", preview=False)
    return recording


@pytest.fixture
def context(tmp_path: Path) -> Path:
    """A copy of the repository's sidecar folder, so a test may edit its requirements."""
    return Path(shutil.copytree(SIDECAR_DIR, tmp_path / "sidecar"))


def sidecar_args(context: Path, **overrides) -> SidecarImageArgs:
    values = dict(
        project="acme-ml",
        region="us-east5",
        context_dir=context,
        constraints_file=context / "constraints.example.txt",
        jax_version="0.10.0",
    )
    return SidecarImageArgs(**{**values, **overrides})


def expected_ref(context: Path, requirements: str = "requirements.txt") -> str:
    tag = image_tag(context, build_args={"BASE_IMAGE": base_image_for("0.10.0").ref, "REQUIREMENTS": requirements},
                    jax_version="0.10.0")
    return f"us-east5-docker.pkg.dev/acme-ml/tpuplane-sidecar/sidecar:{tag}"


def build(args: SidecarImageArgs, opts: pulumi.ResourceOptions | None = None) -> dict[str, list[str]]:
    """Construct the component under the mocks; return its resolved outputs once every registration is done."""
    outputs: dict[str, list[str]] = {"image_ref": [], "repository_url": []}

    @pulumi.runtime.test
    def program():
        component = SidecarImage("sidecar", args, opts)
        component.image_ref.apply(outputs["image_ref"].append)
        component.repository_url.apply(outputs["repository_url"].append)

    program()
    return outputs


def test_sidecar_image_registers_component_repository_and_image(mocks, context):
    build(sidecar_args(context))
    assert [registration.typ for registration in mocks.registrations] == [
        "tpuplane:index:SidecarImage",
        REPOSITORY_TYPE,
        IMAGE_TYPE,
    ]


def test_sidecar_image_repository_is_a_docker_repository_in_the_region(mocks, context):
    build(sidecar_args(context))
    (repository,) = mocks.of_type(REPOSITORY_TYPE)
    assert repository.inputs["format"] == "DOCKER"
    assert repository.inputs["location"] == "us-east5"
    assert repository.inputs["project"] == "acme-ml"
    assert repository.inputs["repositoryId"] == "tpuplane-sidecar"


def test_sidecar_image_builds_linux_amd64_on_the_chosen_base_and_pushes(mocks, context):
    build(sidecar_args(context))
    (image,) = mocks.of_type(IMAGE_TYPE)
    assert image.inputs["push"] is True
    assert image.inputs["platforms"] == ["linux/amd64"]
    assert image.inputs["buildArgs"] == {"BASE_IMAGE": base_image_for("0.10.0").ref, "REQUIREMENTS": "requirements.txt"}
    # relative to the program's working directory, where Pulumi starts the provider: plans do not embed checkouts
    assert image.inputs["context"] == {"location": os.path.relpath(context)}
    assert image.inputs["dockerfile"] == {"location": os.path.relpath(context / "Dockerfile")}
    assert image.inputs["tags"] == [expected_ref(context)]


def test_sidecar_image_takes_no_registry_credentials(mocks, context):
    build(sidecar_args(context))
    (image,) = mocks.of_type(IMAGE_TYPE)
    assert "registries" not in image.inputs
    assert "secrets" not in image.inputs


def test_sidecar_image_outputs_the_tagged_ref_and_repository_url(mocks, context):
    outputs = build(sidecar_args(context))
    assert outputs == {
        "image_ref": [expected_ref(context)],
        "repository_url": ["us-east5-docker.pkg.dev/acme-ml/tpuplane-sidecar"],
    }


def test_sidecar_image_tag_follows_the_requirements(mocks, context):
    before = expected_ref(context)
    (context / "requirements.txt").write_text("numpy>=2\n")
    outputs = build(sidecar_args(context))
    assert outputs["image_ref"] == [expected_ref(context)]
    assert expected_ref(context) != before


def test_sidecar_image_context_holds_the_runtime_wheel_and_its_tag_names_the_jax(mocks, context):
    outputs = build(sidecar_args(context))
    (wheel,) = (context / WHEEL_FOLDER).glob("*.whl")
    assert wheel.name == runtime_wheel_name()
    assert outputs["image_ref"][0].rpartition(":")[2].startswith("jax-0.10.0-ctx-")
    assert sidecar_jax_version(outputs["image_ref"][0]) == "0.10.0"


def test_sidecar_image_tag_follows_the_runtime_the_wheel_holds(mocks, context, monkeypatch):
    """A change to a module the sidecar runs is a new wheel in the context, so a new tag: pods roll to it."""
    before = build(sidecar_args(context))["image_ref"]
    sources = sidecar_wheel.runtime_sources()
    changed = {**sources, "tpuplane/runtime/colocated.py": sources["tpuplane/runtime/colocated.py"] + b"# new\n"}
    monkeypatch.setattr(sidecar_wheel, "runtime_sources", lambda: changed)
    after = build(sidecar_args(context))["image_ref"]
    assert after != before and len(list((context / WHEEL_FOLDER).glob("*.whl"))) == 1


def test_sidecar_image_tag_ignores_a_readme_edit(mocks, context):
    """Editing the README must not retag the image: the JobSet would be replaced and the service restarted."""
    before = build(sidecar_args(context))["image_ref"]
    (context / "README.md").write_text("# rewritten\n")
    assert build(sidecar_args(context))["image_ref"] == before


def test_sidecar_image_installs_and_checks_the_configured_requirements_file(mocks, context):
    (context / "teams").mkdir()
    (context / "teams" / "vision.txt").write_text("-r ../requirements.txt\nscipy\n")
    outputs = build(sidecar_args(context, requirements_file="teams/vision.txt"))
    (image,) = mocks.of_type(IMAGE_TYPE)
    assert image.inputs["buildArgs"]["REQUIREMENTS"] == "teams/vision.txt"
    assert outputs["image_ref"] == [expected_ref(context, "teams/vision.txt")]


def test_sidecar_image_checks_the_configured_requirements_file_not_requirements_txt(mocks, context):
    (context / "prod.txt").write_text("numpy<2\n")
    with pytest.raises(ConfigError) as raised:
        build(sidecar_args(context, requirements_file="prod.txt"))
    (problem,) = raised.value.problems
    assert problem.path.endswith("prod.txt:1")
    assert mocks.registrations == []


def test_sidecar_image_include_outside_the_context_fails_before_any_build(mocks, context, tmp_path):
    (tmp_path / "common.txt").write_text("scipy\n")
    (context / "requirements.txt").write_text("-r ../common.txt\nnumpy\n")
    with pytest.raises(ConfigError, match="outside the build context"):
        build(sidecar_args(context))
    assert mocks.registrations == []


def test_sidecar_image_requirements_excluded_by_dockerignore_fail_before_any_build(mocks, context):
    (context / "README.txt").write_text("numpy\n")  # hypothetical: a requirement file the .dockerignore drops
    (context / ".dockerignore").write_text("README.*\n")
    with pytest.raises(ConfigError, match="excluded by .dockerignore"):
        build(sidecar_args(context, requirements_file="README.txt"))


def test_sidecar_image_context_without_a_dockerfile_is_an_error(mocks, context):
    (context / "Dockerfile").unlink()
    with pytest.raises(ConfigError, match="a folder holding a Dockerfile"):
        build(sidecar_args(context))
    assert mocks.registrations == []


def test_sidecar_image_children_are_parented_to_the_component(mocks, context):
    """Transformations given to the component reach its children, carrying each child's parent."""
    seen: dict[str, pulumi.ResourceTransformationArgs] = {}

    def record(args: pulumi.ResourceTransformationArgs):
        seen[args.type_] = args
        return None

    build(sidecar_args(context), pulumi.ResourceOptions(transformations=[record]))
    component = seen.pop("tpuplane:index:SidecarImage").resource
    assert {typ: args.opts.parent for typ, args in seen.items()} == {REPOSITORY_TYPE: component, IMAGE_TYPE: component}


def test_sidecar_image_conflicting_requirements_fail_before_any_registration(mocks, context):
    (context / "requirements.txt").write_text("grain\nnumpy<2\n")
    with pytest.raises(ConfigError) as raised:
        build(sidecar_args(context))
    (problem,) = raised.value.problems
    assert problem.path.endswith("requirements.txt:2")
    assert problem.given == "numpy<2"
    assert mocks.of_type(IMAGE_TYPE) == []
    assert mocks.registrations == []


def test_sidecar_image_jax_other_than_the_constraints_pin_fails(mocks, context):
    constraints = context / "constraints.example.txt"
    constraints.write_text(constraints.read_text().replace("jaxlib==0.10.0", "jaxlib==0.9.2"))
    with pytest.raises(ConfigError, match="jaxlib"):
        build(sidecar_args(context))
    assert mocks.of_type(IMAGE_TYPE) == []


def test_sidecar_image_unknown_jax_version_names_the_args_field(mocks, context):
    with pytest.raises(ConfigError, match=r"SidecarImageArgs\.jax_version: got '0\.10\.2'"):
        build(sidecar_args(context, jax_version="0.10.2"))
    assert mocks.registrations == []


@pytest.mark.parametrize("changes, path", [
    ({"project": "Bad Name!"}, "SidecarImageArgs.project"),
    ({"region": 5}, "SidecarImageArgs.region"),
    ({"repository_id": "Repo!"}, "SidecarImageArgs.repository_id"),
    ({"image_name": "é"}, "SidecarImageArgs.image_name"),
    ({"context_dir": ["sidecar"]}, "SidecarImageArgs.context_dir"),
    ({"colour": "blue"}, "SidecarImageArgs.colour"),
])
def test_sidecar_image_bad_args_name_the_field_and_register_nothing(mocks, context, changes, path):
    with pytest.raises(ConfigError) as raised:
        build(sidecar_args(context, **changes))
    assert path in [p.path for p in raised.value.problems]
    assert mocks.registrations == []
