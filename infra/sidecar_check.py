"""Offline check of a sidecar's requirements against the pins of its base image.

The colocated-Python base image installs the user's requirements under its own `/opt/venv/server_constraints.txt`
(exact pins, JAX included) and the build ends with `pip check`. A contradiction then only shows up minutes into
a remote image build. This module finds the same contradictions in milliseconds, before anything is built: every
direct requirement whose markers apply to the image (linux, x86_64, the image's CPython) must accept the version
the base image pins. It reads pip's requirement-file format with `packaging`, never by hand-rolled version logic.

What it cannot see offline, it says so instead of guessing: URL, VCS, local-path and editable requirements, remote
includes, and constraints that are not exact pins come back as `Notice`s. Transitive dependencies are left to the
build's `pip check`, which needs the packages' metadata.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from tpuplane.infra.errors import ConfigError, Problem

# The sidecar images are linux/amd64 CPython builds; markers are evaluated for that machine, not this one.
_IMAGE_PLATFORM = {
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "platform_release": "",
    "platform_version": "",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}

# The packages whose versions must equal the client's exactly (client, proxy, server and sidecar in lock-step).
LOCK_STEP_PACKAGES = ("jax", "jaxlib")

# pip's comment rule: `#` at the start of a line or after whitespace; `#egg=` inside a URL is not a comment.
_COMMENT = re.compile(r"(^|\s+)#.*$")
# Per-requirement options that say nothing about versions.
_PER_REQUIREMENT_OPTIONS = re.compile(r"\s+--(?:hash|config-settings|global-option)\b.*$")
_OPTION = re.compile(
    r"^(?P<long>--[a-z][a-z-]*)(?:\s*=\s*|\s+|$)(?P<long_value>.*)$|^(?P<short>-[a-zA-Z])\s*(?P<short_value>.*)$"
)
# Requirements named by where they live instead of by name and version.
_LOCATION = re.compile(
    r"^(?:[a-zA-Z][a-zA-Z0-9+.-]*://|(?:git|hg|svn|bzr)\+|\.{0,2}/|~|[a-zA-Z]:\\)|\.(?:whl|zip|tar\.gz|tar\.bz2|tgz)$"
)
# Options that steer where pip looks, not which versions fit.
_INDEX_OPTIONS = frozenset(
    "-i --index-url --extra-index-url --no-index -f --find-links --pre --prefer-binary --only-binary --no-binary "
    "--trusted-host --require-hashes --use-feature".split()
)
_REQUIREMENT_OPTIONS = frozenset({"-r", "--requirement"})
_CONSTRAINT_OPTIONS = frozenset({"-c", "--constraint"})
_EDITABLE_OPTIONS = frozenset({"-e", "--editable"})
_ALLOWED_LINE = "a PEP 508 requirement, -r/-c FILE, -e TARGET, or a pip index option"


def image_environment(python_version: str) -> dict[str, str]:
    """Marker environment of a sidecar image with CPython `python_version` ("3.12").

    The base tag names only major.minor, so the patch level is taken as 0.
    """
    full_version = f"{python_version}.0"
    return {
        **_IMAGE_PLATFORM,
        "python_version": python_version,
        "python_full_version": full_version,
        "implementation_version": full_version,
        "extra": "",
    }


@dataclass(frozen=True)
class Origin:
    """A line of a requirement file, as the user would open it."""

    file: Path
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True)
class Entry:
    """One requirement as written (options stripped), and where."""

    text: str
    requirement: Requirement
    origin: Origin

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    def applies_to(self, environment: dict[str, str]) -> bool:
        marker = self.requirement.marker
        return marker is None or marker.evaluate(environment)


@dataclass(frozen=True)
class Notice:
    """A line that was read but could not be checked offline, and why."""

    origin: Origin
    text: str
    reason: str

    def __str__(self) -> str:
        return f"{self.origin}: not checked: {self.text!r}: {self.reason}"


@dataclass
class RequirementFile:
    """A requirement file with its `-r` includes read in, split as pip applies them."""

    requirements: list[Entry] = field(default_factory=list)
    constraints: list[Entry] = field(default_factory=list)  # from `-c FILE`
    notices: list[Notice] = field(default_factory=list)


def read_requirement_file(path: Path) -> RequirementFile:
    """Parse a pip requirement file and everything it includes (paths relative to the including file).

    Raises ConfigError for an unreadable file, an include cycle, or a line pip would reject.
    """
    reader = _Reader()
    reader.read(path, as_constraint=False, chain=())
    return reader.result


class _Reader:
    def __init__(self) -> None:
        self.result = RequirementFile()
        self._done: set[tuple[Path, bool]] = set()

    def read(self, path: Path, *, as_constraint: bool, chain: tuple[Path, ...]) -> None:
        key = path.resolve()
        if key in chain:
            cycle = " -> ".join(str(p) for p in (*chain[chain.index(key) :], key))
            raise ConfigError.at(
                str(path), cycle, "requirement files whose -r/-c includes form no cycle", "remove one include"
            )
        if (key, as_constraint) in self._done:  # a diamond include adds nothing new
            return
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or str(error)
            hint = "check the path; -r/-c paths are relative to the file that includes them"
            raise ConfigError.at(str(path), reason, "a readable UTF-8 file", hint) from None
        for number, line in _logical_lines(text):
            self._line(line, Origin(path, number), as_constraint=as_constraint, chain=(*chain, key))
        self._done.add((key, as_constraint))

    def _line(self, line: str, origin: Origin, *, as_constraint: bool, chain: tuple[Path, ...]) -> None:
        if line.startswith("-"):
            self._option(line, origin, as_constraint=as_constraint, chain=chain)
            return
        text = _PER_REQUIREMENT_OPTIONS.sub("", line).strip()
        if _LOCATION.search(text):
            reason = "a URL, VCS or local-path requirement has no version to compare"
            self.result.notices.append(Notice(origin, text, reason))
            return
        try:
            requirement = Requirement(text)
        except InvalidRequirement as error:
            raise ConfigError.at(str(origin), line, _ALLOWED_LINE, str(error)) from None
        if requirement.url:
            self.result.notices.append(Notice(origin, text, "a URL requirement has no version to compare"))
            return
        bucket = self.result.constraints if as_constraint else self.result.requirements
        bucket.append(Entry(text, requirement, origin))

    def _option(self, line: str, origin: Origin, *, as_constraint: bool, chain: tuple[Path, ...]) -> None:
        match = _OPTION.match(line)
        option = match and (match["long"] or match["short"])
        value = match and (match["long_value"] or match["short_value"] or "").strip()
        if option in _REQUIREMENT_OPTIONS or option in _CONSTRAINT_OPTIONS:
            if not value:
                raise ConfigError.at(str(origin), line, f"{option} FILE", "name the file to include")
            if "://" in value:
                self.result.notices.append(Notice(origin, line, "a remote include cannot be read offline"))
                return
            nested_as_constraint = as_constraint or option in _CONSTRAINT_OPTIONS
            self.read(origin.file.parent / value, as_constraint=nested_as_constraint, chain=chain)
        elif option in _EDITABLE_OPTIONS:
            self.result.notices.append(Notice(origin, line, "an editable install has no version to compare"))
        elif option not in _INDEX_OPTIONS:
            raise ConfigError.at(str(origin), line, _ALLOWED_LINE, "pip rejects unknown options in requirement files")


def _logical_lines(text: str):
    """(first line number, content) of each non-empty logical line: `\\` continuations joined, comments cut."""
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not pending:
            start = number
        if raw.endswith("\\") and not _COMMENT.search(raw):
            pending.append(raw[:-1])
            continue
        pending.append(raw)
        line = _COMMENT.sub("", "".join(pending)).strip()
        pending = []
        if line:
            yield start, line
    if pending and (line := _COMMENT.sub("", "".join(pending)).strip()):
        yield start, line


@dataclass(frozen=True)
class Pin:
    """An exact version the base image installs, and the constraint line that says so."""

    name: str
    version: Version
    origin: Origin


@dataclass(frozen=True)
class Pins:
    """The base image's exact pins that apply to it, by canonical name."""

    by_name: dict[str, Pin]
    notices: tuple[Notice, ...]


def read_pins(path: Path, environment: dict[str, str]) -> Pins:
    """The exact `name==version` pins of a server-constraints file whose markers apply to `environment`.

    A constraint that is not an exact pin cannot be compared without a package index: it becomes a Notice.
    Two different pins for one package make the file itself contradictory: ConfigError.
    """
    parsed = read_requirement_file(path)
    by_name: dict[str, Pin] = {}
    notices = list(parsed.notices)
    for entry in (*parsed.requirements, *parsed.constraints):
        if not entry.applies_to(environment):
            continue
        specifiers = list(entry.requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==" or specifiers[0].version.endswith(".*"):
            notices.append(Notice(entry.origin, entry.text, "not an exact pin (name==version), so not compared"))
            continue
        pin = Pin(entry.name, Version(specifiers[0].version), entry.origin)
        earlier = by_name.setdefault(pin.name, pin)
        if earlier.version != pin.version:
            allowed = f"{pin.name}=={earlier.version} as pinned at {earlier.origin}"
            raise ConfigError.at(str(entry.origin), entry.text, allowed, "a constraints file pins each package once")
    return Pins(by_name, tuple(notices))


@dataclass(frozen=True)
class Conflict:
    """One version the user (or the client) needs that the base image does not install."""

    package: str
    requested: str  # the user's requirement as written, or "jax==V (client)"
    requested_at: str  # "requirements.txt:4" or "client --jax-version"
    pinned: Version | None  # None: the base image pins no version of a lock-step package
    pinned_at: Origin | None
    hint: str

    def __str__(self) -> str:
        pinned = (
            f"the base image pins {self.package}=={self.pinned} ({self.pinned_at})"
            if self.pinned is not None
            else "the base image's constraints pin no version of it"
        )
        return f"{self.package}: {self.requested_at}: {self.requested!r} conflicts: {pinned}"

    def problem(self) -> Problem:
        if self.pinned is None:
            return Problem(self.requested_at, self.requested, f"a pinned {self.package}", self.hint)
        allowed = f"{self.package}=={self.pinned} (pinned at {self.pinned_at})"
        return Problem(self.requested_at, self.requested, allowed, self.hint)


@dataclass(frozen=True)
class SidecarCheck:
    """The outcome of one check: conflicts (build would fail), notices (not checkable offline), counts."""

    conflicts: tuple[Conflict, ...]
    notices: tuple[Notice, ...]
    checked: int  # user requirements and constraints whose markers apply to the image
    not_for_image: int  # entries whose markers exclude the image's platform or Python
    pins: int

    @property
    def ok(self) -> bool:
        return not self.conflicts

    def raise_for_conflicts(self) -> None:
        """ConfigError with one problem per conflict, so `pulumi preview` stops before any build."""
        if self.conflicts:
            raise ConfigError([conflict.problem() for conflict in self.conflicts])


_RELAX_HINT = "accept the pinned version, or pick the JAX version (base image) whose pins fit"
_LOCK_STEP_HINT = "client, proxy, server and sidecar must run identical jax and jaxlib"


def check_sidecar(
    requirements: Path,
    constraints: Path,
    *,
    python_version: str,
    client_jax_version: str | None = None,
) -> SidecarCheck:
    """Check `requirements` (with its -r/-c includes) against the exact pins of `constraints`.

    `python_version` is the image's major.minor (from its base tag). With `client_jax_version`, the pinned jax and
    jaxlib must also equal the client's. Raises ConfigError for unreadable or malformed input.
    """
    environment = image_environment(python_version)
    client = _client_version(client_jax_version)
    pins = read_pins(constraints, environment)
    user = read_requirement_file(requirements)

    conflicts: list[Conflict] = []
    checked = not_for_image = 0
    for entry in (*user.requirements, *user.constraints):
        if not entry.applies_to(environment):
            not_for_image += 1
            continue
        checked += 1
        pin = pins.by_name.get(entry.name)
        if pin is not None and not entry.requirement.specifier.contains(pin.version, prereleases=True):
            conflicts.append(Conflict(entry.name, entry.text, str(entry.origin), pin.version, pin.origin, _RELAX_HINT))
    if client is not None:
        conflicts.extend(_lock_step_conflicts(pins, client))
    return SidecarCheck(tuple(conflicts), (*pins.notices, *user.notices), checked, not_for_image, len(pins.by_name))


def _lock_step_conflicts(pins: Pins, client: Version) -> list[Conflict]:
    """Pinned jax and jaxlib must equal the client's JAX exactly; an unpinned one cannot be trusted."""
    conflicts = []
    for package in LOCK_STEP_PACKAGES:
        pin = pins.by_name.get(package)
        if pin is None or pin.version != client:
            requested = f"{package}=={client}"
            version, origin = (pin.version, pin.origin) if pin else (None, None)
            conflicts.append(Conflict(package, requested, "client --jax-version", version, origin, _LOCK_STEP_HINT))
    return conflicts


def _client_version(client_jax_version: str | None) -> Version | None:
    if client_jax_version is None:
        return None
    try:
        return Version(client_jax_version)
    except InvalidVersion:
        raise ConfigError.at("client --jax-version", client_jax_version, "a PEP 440 version such as 0.10.0") from None
