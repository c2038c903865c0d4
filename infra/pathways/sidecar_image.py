"""Which base image a colocated-Python sidecar builds on, and the tag its build gets.

The sidecar must run exactly the client's `jax`/`jaxlib` and the same Python major.minor (functions travel
cloudpickled, with no cross-version guarantee), so the base image is chosen by the client's JAX version from a
table of the public sidecar tags, never by "latest". The built image is tagged with a hash of exactly what the
build receives (the files Docker sends after `.dockerignore`, and the build arguments), so an unchanged sidecar is
never rebuilt, a changed one never reuses a tag, and editing a file the build ignores (a README) changes nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version

from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.pathways.images import jax_version_of_tag, reference_tag
from tpuplane.infra.yaml_input import read_text_bounded

BASE_IMAGE_REPOSITORY = "us-docker.pkg.dev/cloud-tpu-v2-images/pathways-colocated-python/sidecar"

# Public tags of BASE_IMAGE_REPOSITORY are data: the shipped file, plus a user's own file named by the
# environment variable (so the stack program and the CLI see the same tags), plus any file a caller passes.
BASE_TAGS_FILE = Path(__file__).with_name("sidecar_base_tags.txt")
BASE_TAGS_ENV = "TPUPLANE_SIDECAR_BASE_TAGS"

# The JAX version of the Shared Pathways Service default sidecar.
DEFAULT_JAX_VERSION = "0.10.0"

_TAG = re.compile(r"^(?P<date>\d{8}|\d{4}_\d{2}_\d{2})-python_(?P<python>\d+\.\d+)-jax_(?P<jax>[0-9][0-9A-Za-z.+!-]*)$")

DOCKERFILE = "Dockerfile"
DOCKERIGNORE = ".dockerignore"
DEFAULT_REQUIREMENTS_FILE = "requirements.txt"


@dataclass(frozen=True)
class BaseImage:
    """One public sidecar base image, parsed from its tag."""

    tag: str

    def __post_init__(self) -> None:
        if _TAG.match(self.tag) is None:
            raise ValueError(f"not a sidecar base tag (<date>-python_<X.Y>-jax_<version>): {self.tag!r}")

    def _part(self, name: str) -> str:
        match = _TAG.match(self.tag)
        assert match is not None  # checked in __post_init__
        return match[name]

    @property
    def date(self) -> str:
        """YYYYMMDD, whichever date format the tag used."""
        return self._part("date").replace("_", "")

    @property
    def python_version(self) -> str:
        """Python major.minor inside the image, e.g. "3.12"."""
        return self._part("python")

    @property
    def jax_version(self) -> str:
        return self._part("jax")

    @property
    def ref(self) -> str:
        """The full pullable reference, the value of the Dockerfile's BASE_IMAGE build argument."""
        return f"{BASE_IMAGE_REPOSITORY}:{self.tag}"


def read_base_tags(path: Path) -> tuple[BaseImage, ...]:
    """The tags of a base-tags file (one per line, `#` comments); a malformed line is a ConfigError naming it."""
    lines = read_text_bounded(path, str(path), 1 << 20, "text file of sidecar base tags").splitlines()
    images = []
    for number, line in enumerate(lines, 1):
        tag = line.split("#", 1)[0].strip()
        if not tag:
            continue
        if _TAG.match(tag) is None:
            raise ConfigError.at(f"{path}:{number}", "a line that is not a base tag (not shown: it may be a secret)",
                                 "<date>-python_<X.Y>-jax_<version>",
                                 "e.g. 20260423-python_3.12-jax_0.10.0, a tag of " + BASE_IMAGE_REPOSITORY)
        images.append(BaseImage(tag))
    return tuple(images)


def known_base_images(extra: Path | None = None) -> tuple[BaseImage, ...]:
    """The shipped tags, then those of $TPUPLANE_SIDECAR_BASE_TAGS, then those of `extra`."""
    files = [BASE_TAGS_FILE, *(Path(p) for p in [os.environ.get(BASE_TAGS_ENV)] if p), *([extra] if extra else [])]
    return tuple(dict.fromkeys(image for file in files for image in read_base_tags(file)))


def known_jax_versions(extra: Path | None = None) -> list[str]:
    """JAX versions that have a known sidecar base image, oldest first."""
    return sorted({image.jax_version for image in known_base_images(extra)}, key=Version)


def base_image_for(jax_version: str, *, path: str = "sidecar.jaxVersion", extra: Path | None = None) -> BaseImage:
    """The newest known base image whose JAX equals `jax_version` (PEP 440 equality: "0.10" == "0.10.0").

    Raises ConfigError naming `path` when the version is not PEP 440 or has no known base image.
    """
    allowed = "one of " + ", ".join(known_jax_versions(extra))
    try:
        wanted = Version(jax_version)
    except ValueError:  # InvalidVersion, or a release part too long to read as a number
        raise ConfigError.at(path, jax_version, allowed, "give a JAX release version such as 0.10.0") from None
    matches = [image for image in known_base_images(extra) if Version(image.jax_version) == wanted]
    if not matches:
        raise ConfigError.at(
            path,
            jax_version,
            allowed,
            f"the sidecar must run exactly the client's jax and jaxlib; use a client JAX that has a sidecar image "
            f"in {BASE_IMAGE_REPOSITORY}, or add its tag to a file named by ${BASE_TAGS_ENV}",
        )
    return max(matches, key=lambda image: image.date)


def dockerignore_patterns(context_dir: Path) -> list[str]:
    """The context's `.dockerignore` patterns, read as the Docker SDK reads them (blank and `#` lines dropped)."""
    path = context_dir / DOCKERIGNORE
    if not path.is_file():
        return []
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def context_files(context_dir: Path) -> list[Path]:
    """The files Docker sends as the build context (`.dockerignore` applied, the Dockerfile always), as sorted
    POSIX-relative paths."""
    # Imported here: the Docker SDK's package import costs ~150 ms, which config loading and the CLI check skip.
    from docker.utils.build import exclude_paths

    sent = exclude_paths(str(context_dir), dockerignore_patterns(context_dir), DOCKERFILE)
    files = [Path(relative) for relative in sent if (context_dir / relative).is_file()]
    return sorted(files, key=lambda relative: relative.as_posix())


def context_problems(context_dir: Path, used_files: list[Path], *, path: str) -> list[Problem]:
    """Files the build needs (the requirements and their -r/-c includes) that Docker would not send.

    Each one would fail the build minutes in with "No such file"; `path` names the setting that points at them.
    """
    sent = {(context_dir / relative).resolve() for relative in context_files(context_dir)}
    root = context_dir.resolve()
    problems = []
    for file in used_files:
        resolved = file.resolve()
        if resolved in sent:
            continue
        where = "outside the build context" if not resolved.is_relative_to(root) else f"excluded by {DOCKERIGNORE}"
        problems.append(Problem(path, str(file), f"a file the build receives: inside {context_dir} and not "
                                                 f"excluded by its {DOCKERIGNORE}",
                                f"it is {where}, so the image build cannot read it"))
    return problems


def context_hash(context_dir: Path, *, build_args: Mapping[str, str] | None = None) -> str:
    """SHA-256 (hex) of the files Docker sends for this context and of the build arguments.

    Each file contributes its POSIX relative path and its bytes, length-prefixed so that moving bytes between
    a name and a body cannot collide. Build arguments count too: the same context on another base image, or
    installing another requirements file, is another image.
    """
    digest = hashlib.sha256()
    for name, value in sorted((build_args or {}).items()):
        _feed(digest, b"arg", name.encode(), value.encode())
    for relative in context_files(context_dir):
        _feed(digest, b"file", relative.as_posix().encode(), (context_dir / relative).read_bytes())
    return digest.hexdigest()


def _feed(digest: hashlib._Hash, *fields: bytes) -> None:
    for field in fields:
        digest.update(len(field).to_bytes(8, "big"))
        digest.update(field)


def image_tag(context_dir: Path, *, build_args: Mapping[str, str] | None = None, jax_version: str | None = None) -> str:
    """The Docker tag for a build: a short, content-derived, valid tag (Docker allows [A-Za-z0-9_.-], <=128),
    `jax-<version>-ctx-<hash>` when the image's JAX is given, so that clients can check theirs against it."""
    tag = "ctx-" + context_hash(context_dir, build_args=build_args)[:20]
    return f"jax-{jax_version}-{tag}" if jax_version else tag


_BUILT_TAG = re.compile(r"^jax-(?P<version>[0-9][0-9A-Za-z.]*)-ctx-[0-9a-f]{20}$")


def sidecar_jax_version(image: str) -> str | None:
    """The JAX a sidecar image runs, read from its tag: one built by tpuplane (`jax-<v>-ctx-<hash>`), a public base
    image (`<date>-python_<X.Y>-jax_<v>`) or a `jax-<v>` tag; None when the tag does not say."""
    tag = reference_tag(image) or ""
    if built := _BUILT_TAG.match(tag):
        return built["version"]
    if base := _TAG.match(tag):
        return base["jax"]
    return jax_version_of_tag(image)


def sidecar_build_args(base_image: str, requirements_file: str) -> dict[str, str]:
    """The Dockerfile's build arguments: the base image, and the requirements file inside the context."""
    return {"BASE_IMAGE": base_image, "REQUIREMENTS": Path(requirements_file).as_posix()}


def repository_url(project: str, region: str, repository_id: str) -> str:
    """Where Artifact Registry serves a Docker repository's images."""
    return f"{region}-docker.pkg.dev/{project}/{repository_id}"


def sidecar_image_ref(project: str, region: str, repository_id: str, image_name: str, context_dir: Path,
                      base_image: str, requirements_file: str, jax_version: str) -> str:
    """The reference a sidecar build pushes: its repository, image name and content-derived tag (the context as
    the build receives it, the runtime wheel in it)."""
    tag = image_tag(context_dir, build_args=sidecar_build_args(base_image, requirements_file), jax_version=jax_version)
    return f"{repository_url(project, region, repository_id)}/{image_name}:{tag}"
