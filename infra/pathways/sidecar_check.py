"""Offline check of a sidecar's requirements against the pins of its base image.

The colocated-Python base image installs the user's requirements under its own `/opt/venv/server_constraints.txt`
(exact pins, JAX included) and the build ends with `pip check`. A contradiction then only shows up minutes into
a remote image build. This module finds the same contradictions in milliseconds, before anything is built: every
direct requirement whose markers apply to the image (linux, x86_64, the image's CPython) must accept the version
the base image pins. It reads pip's requirement-file format with `packaging`, never by hand-rolled version logic.

Files are read as pip reads them (pip's `req_file.py`): a UTF-8 byte-order mark is dropped; lines ending in `\\` are
joined first, then comments are cut, then `${VAR}` is expanded from the environment (an unset or empty variable is
left as written). So `numpy  # pinned \\` joins the next line into its comment and pip never sees that line: the
check says so.

A package the base image does not pin is still checked against itself: when the user's own specifiers for it
(requirements, `-c` files, several lines) provably admit no version, that is a conflict too.

What it cannot see offline, it says so instead of guessing: URL, VCS, local-path and editable requirements, remote
includes, and constraints that are not exact pins come back as `Notice`s. Notices and errors never show the
credentials of a URL (`https://user:token@host` reads `https://***@host`). Transitive dependencies are left to the
build's `pip check`, which needs the packages' metadata.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from packaging._parser import Variable
from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import Specifier
from packaging.utils import canonicalize_name
from packaging.version import Version

from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.redaction import redact_text as redact

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
# pip's environment variables: `${NAME}` with uppercase letters, digits and `_` only.
_ENV_VAR = re.compile(r"\$\{(?P<name>[A-Z0-9_]+)\}")
# Deeper -r/-c chains than this are refused (pip has no limit, but a chain this long is a mistake).
MAX_INCLUDE_DEPTH = 32
MAX_REQUIREMENT_FILE_BYTES = 1 << 20
# A version part longer than this is no real release, and Python refuses to convert very long digit strings.
_HUGE_NUMBER = re.compile(r"[0-9]{19,}")
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
# What an error shows of a line that is not a requirement: the file may not be one (an .env, a key), so never its text.
_NOT_SHOWN = "a line that is not a requirement (not shown: the file may hold secrets)"


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
    """One requirement as written (options stripped, credentials redacted), and where."""

    text: str
    requirement: Requirement
    origin: Origin

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    def applies_to(self, environment: dict[str, str]) -> bool:
        """False only when the marker is false whatever the values the image's environment leaves unknown."""
        marker = self.requirement.marker
        if marker is None:
            return True
        try:
            return _evaluate(marker._markers, environment) is not False  # packaging's parsed marker tree
        except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker, ValueError) as error:
            raise ConfigError.at(str(self.origin), self.text, "a marker whose comparisons are defined",
                                 redact(str(error).splitlines()[0])[:200]) from None


# Marker variables whose value in the image is not known offline (the kernel the build runs on): a comparison
# with them may be true or false, so a requirement is skipped only when the rest of its marker rules it out.
_UNKNOWN_MARKER_VARIABLES = frozenset({"platform_release", "platform_version"})


def _evaluate(items: list, environment: dict[str, str]) -> bool | None:
    """Three-valued marker evaluation (None: unknown); `and` binds tighter than `or`, as in PEP 508."""
    groups: list[list[bool | None]] = [[]]
    for item in items:
        if item == "or":
            groups.append([])
        elif item != "and":
            groups[-1].append(_evaluate(item, environment) if isinstance(item, list) else _atom(item, environment))
    results = [False if False in group else None if None in group else True for group in groups]
    return True if True in results else None if None in results else False


def _atom(item: tuple, environment: dict[str, str]) -> bool | None:
    lhs, op, rhs = item
    if any(isinstance(side, Variable) and side.value in _UNKNOWN_MARKER_VARIABLES for side in (lhs, rhs)):
        return None
    return Marker(f"{lhs.serialize()} {op.serialize()} {rhs.serialize()}").evaluate(environment)


@dataclass(frozen=True)
class Notice:
    """A line that was read but could not be checked offline (or not as written), and why."""

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
    files: list[Path] = field(default_factory=list)  # every local file read, the top one first


def read_requirement_file(path: Path, *, environ: Mapping[str, str] | None = None) -> RequirementFile:
    """Parse a pip requirement file and everything it includes (paths relative to the including file).

    `${VAR}` is expanded from `environ` (default: this process's environment), as pip does.
    Raises ConfigError for an unreadable file, an include cycle, or a line pip would reject.
    """
    reader = _Reader(os.environ if environ is None else environ)
    reader.read(path, as_constraint=False, chain=())
    return reader.result


@dataclass(frozen=True)
class _Line:
    """One logical line after pip's joining and comment cutting, with the physical lines a comment swallowed."""

    number: int
    text: str
    swallowed: tuple[tuple[int, str], ...] = ()


class _Reader:
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.result = RequirementFile()
        self._environ = environ
        self._done: set[tuple[Path, bool]] = set()

    def read(self, path: Path, *, as_constraint: bool, chain: tuple[Path, ...]) -> None:
        if len(chain) >= MAX_INCLUDE_DEPTH:
            raise ConfigError.at(str(path), f"{len(chain)} nested -r/-c includes", f"at most {MAX_INCLUDE_DEPTH}",
                                 "include the files from one top-level file instead of a chain")
        key = path.resolve()
        if key in chain:
            cycle = " -> ".join(str(p) for p in (*chain[chain.index(key) :], key))
            raise ConfigError.at(
                str(path), cycle, "requirement files whose -r/-c includes form no cycle", "remove one include"
            )
        if (key, as_constraint) in self._done:  # a diamond include adds nothing new
            return
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_REQUIREMENT_FILE_BYTES + 1)  # bounded: `-r /dev/zero` is refused, not read
            text = data.decode("utf-8-sig")  # pip drops a byte-order mark
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or type(error).__name__
            hint = "check the path; -r/-c paths are relative to the file that includes them"
            raise ConfigError.at(str(path), reason, "a readable UTF-8 file", hint) from None
        if len(data) > MAX_REQUIREMENT_FILE_BYTES:
            raise ConfigError.at(str(path), f"more than {MAX_REQUIREMENT_FILE_BYTES} bytes",
                                 "a requirement file of at most 1 MiB", "is it the right file?")
        if path not in self.result.files:
            self.result.files.append(path)
        for line in _logical_lines(text):
            origin = Origin(path, line.number)
            for number, swallowed in line.swallowed:
                reason = (f"pip joins it into the comment of line {line.number} (a comment ending in '\\'), "
                          "so it is never installed")
                self.result.notices.append(Notice(Origin(path, number), redact(swallowed), reason))
            expanded = self._expand(line.text, origin)
            self._line(expanded, redact(line.text), origin, as_constraint=as_constraint, chain=(*chain, key))
        self._done.add((key, as_constraint))

    def _expand(self, line: str, origin: Origin) -> str:
        """pip's `${VAR}` expansion; a notice says which variables came from here, which stayed as written."""
        names = sorted(set(_ENV_VAR.findall(line)))
        if not names:
            return line
        set_here = [name for name in names if self._environ.get(name)]
        unset = [name for name in names if name not in set_here]
        if set_here:
            reason = (f"expanded {', '.join('${' + n + '}' for n in set_here)} from this environment; the image "
                      "build expands them from its own (only the Dockerfile's ARG/ENV), or leaves them as written")
            self.result.notices.append(Notice(origin, redact(line), reason))
        if unset:
            reason = (f"{', '.join('${' + n + '}' for n in unset)} is not set (or empty) here, so pip leaves it as "
                      "written")
            self.result.notices.append(Notice(origin, redact(line), reason))
        return _ENV_VAR.sub(lambda match: self._environ.get(match["name"]) or match[0], line)

    def _line(self, line: str, shown: str, origin: Origin, *, as_constraint: bool, chain: tuple[Path, ...]) -> None:
        if line.startswith("-"):
            self._option(line, shown, origin, as_constraint=as_constraint, chain=chain)
            return
        text = _PER_REQUIREMENT_OPTIONS.sub("", line).strip()
        shown = _PER_REQUIREMENT_OPTIONS.sub("", shown).strip()
        if _LOCATION.search(text):
            reason = "a URL, VCS or local-path requirement has no version to compare"
            self.result.notices.append(Notice(origin, shown, reason))
            return
        if _HUGE_NUMBER.search(text):
            raise ConfigError.at(str(origin), _NOT_SHOWN, "version numbers whose parts have at most 18 digits")
        try:
            requirement = Requirement(text)
        except InvalidRequirement as error:
            hint = redact(str(error).splitlines()[0])
            unset = sorted(set(_ENV_VAR.findall(text)))
            if unset:
                names = ", ".join("${" + name + "}" for name in unset)
                hint = f"{names} is not set (or empty) here, and pip leaves it as written: {hint}"
            raise ConfigError.at(str(origin), _NOT_SHOWN, _ALLOWED_LINE, hint) from None
        if requirement.url:
            self.result.notices.append(Notice(origin, shown, "a URL requirement has no version to compare"))
            return
        bucket = self.result.constraints if as_constraint else self.result.requirements
        bucket.append(Entry(shown, requirement, origin))

    def _option(self, line: str, shown: str, origin: Origin, *, as_constraint: bool, chain: tuple[Path, ...]) -> None:
        match = _OPTION.match(line)
        option = match and (match["long"] or match["short"])
        value = match and (match["long_value"] or match["short_value"] or "").strip()
        if option in _REQUIREMENT_OPTIONS or option in _CONSTRAINT_OPTIONS:
            if not value:
                raise ConfigError.at(str(origin), shown, f"{option} FILE", "name the file to include")
            if "://" in value:
                self.result.notices.append(Notice(origin, shown, "a remote include cannot be read offline"))
                return
            nested_as_constraint = as_constraint or option in _CONSTRAINT_OPTIONS
            self.read(origin.file.parent / value, as_constraint=nested_as_constraint, chain=chain)
        elif option in _EDITABLE_OPTIONS:
            self.result.notices.append(Notice(origin, shown, "an editable install has no version to compare"))
        elif option not in _INDEX_OPTIONS:
            raise ConfigError.at(str(origin), option or _NOT_SHOWN, _ALLOWED_LINE,
                                 "pip rejects unknown options in requirement files")


def _logical_lines(text: str) -> Iterator[_Line]:
    """Non-empty logical lines in pip's order: `\\` continuations joined (a line that starts as a comment ends a
    continuation and never continues itself), then comments cut. A continuation that follows an inline comment
    ends up inside that comment: those physical lines come back as `swallowed`."""
    for number, joined, pieces in _joined_lines(text):
        line = _COMMENT.sub("", joined).strip()
        if line:  # a line that starts as a comment never continues, so an empty one swallowed nothing
            yield _Line(number, line, _swallowed(pieces))


def _joined_lines(text: str) -> Iterator[tuple[int, str, list[tuple[int, str]]]]:
    """pip's `join_lines`: (first line number, joined text, the physical pieces with their numbers)."""
    pending: list[tuple[int, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.endswith("\\") or _COMMENT.match(raw):
            piece = " " + raw if _COMMENT.match(raw) else raw  # a whole-line comment stays a comment once joined
            pieces = [*pending, (number, piece)] if pending else [(number, piece)]
            pending = []
            yield pieces[0][0], "".join(p for _, p in pieces), pieces
        else:
            pending.append((number, raw.strip("\\")))
    if pending:
        yield pending[0][0], "".join(p for _, p in pending), pending


def _swallowed(pieces: list[tuple[int, str]]) -> tuple[tuple[int, str], ...]:
    """The non-blank, non-comment pieces after the first piece whose comment runs on into them."""
    for index, (_, piece) in enumerate(pieces[:-1]):
        if _COMMENT.search(piece):
            rest = pieces[index + 1 :]
            return tuple((number, p.strip()) for number, p in rest if p.strip() and not _COMMENT.match(p))
    return ()


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


def read_pins(path: Path, environment: dict[str, str], *, environ: Mapping[str, str] | None = None) -> Pins:
    """The exact `name==version` pins of a server-constraints file whose markers apply to `environment`.

    A constraint that is not an exact pin cannot be compared without a package index: it becomes a Notice.
    Two different pins for one package make the file itself contradictory: ConfigError.
    """
    parsed = read_requirement_file(path, environ=environ)
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
    """One requirement that no installable version satisfies, and what it runs into."""

    package: str
    requested: str  # the user's requirement as written, or "jax==V" for the lock-step rule
    requested_at: str  # "requirements.txt:4", or where the lock-step version came from
    against: str  # what it contradicts, e.g. "the base image pins numpy==2.1.1 (constraints.txt:7)"
    allowed: str  # what would fit, for the ConfigError
    hint: str

    def __str__(self) -> str:
        return f"{self.package}: {self.requested_at}: {self.requested!r} conflicts: {self.against}"

    def problem(self) -> Problem:
        return Problem(self.requested_at, self.requested, self.allowed, self.hint)


@dataclass(frozen=True)
class SidecarCheck:
    """The outcome of one check: conflicts (build would fail), notices (not checkable offline), counts."""

    conflicts: tuple[Conflict, ...]
    notices: tuple[Notice, ...]
    checked: int  # user requirements and constraints whose markers apply to the image
    not_for_image: int  # entries whose markers exclude the image's platform or Python
    pins: int
    files: tuple[Path, ...]  # the user's requirement files read (the top one, then its local includes)

    @property
    def ok(self) -> bool:
        return not self.conflicts

    def raise_for_conflicts(self) -> None:
        """ConfigError with one problem per conflict, so `pulumi preview` stops before any build."""
        if self.conflicts:
            raise ConfigError([conflict.problem() for conflict in self.conflicts])


_RELAX_HINT = "accept the pinned version, or pick the JAX version (base image) whose pins fit"
_LOCK_STEP_HINT = "client, proxy, server and sidecar must run identical jax and jaxlib"
_OWN_HINT = "no version satisfies both of your specifiers; relax one of them"


def check_sidecar(
    requirements: Path,
    constraints: Path,
    *,
    python_version: str,
    jax_version: str,
    jax_source: str = "the base image's JAX",
    environ: Mapping[str, str] | None = None,
) -> SidecarCheck:
    """Check `requirements` (with its -r/-c includes) against the exact pins of `constraints`.

    `python_version` is the image's major.minor and `jax_version` its JAX (both from its base tag, chosen by the
    client's JAX): the pinned jax and jaxlib must equal it. `jax_source` says where that version came from in
    conflict lines. Raises ConfigError for unreadable or malformed input.
    """
    environment = image_environment(python_version)
    jax = _jax_version(jax_version, jax_source)
    pins = read_pins(constraints, environment, environ=environ)
    user = read_requirement_file(requirements, environ=environ)

    applicable = [entry for entry in (*user.requirements, *user.constraints) if entry.applies_to(environment)]
    conflicts: list[Conflict] = []
    for entry in applicable:
        pin = pins.by_name.get(entry.name)
        if pin is not None and not entry.requirement.specifier.contains(pin.version, prereleases=True):
            against = f"the base image pins {pin.name}=={pin.version} ({pin.origin})"
            allowed = f"{pin.name}=={pin.version} (pinned at {pin.origin})"
            conflicts.append(Conflict(entry.name, entry.text, str(entry.origin), against, allowed, _RELAX_HINT))
    conflicts.extend(_own_contradictions([entry for entry in applicable if entry.name not in pins.by_name]))
    conflicts.extend(_lock_step_conflicts(pins, jax, jax_source))
    not_for_image = len(user.requirements) + len(user.constraints) - len(applicable)
    return SidecarCheck(tuple(conflicts), (*pins.notices, *user.notices), len(applicable), not_for_image,
                        len(pins.by_name), tuple(user.files))


def _lock_step_conflicts(pins: Pins, jax: Version, source: str) -> list[Conflict]:
    """Pinned jax and jaxlib must equal the image's (and so the client's) JAX; an unpinned one cannot be trusted."""
    conflicts = []
    for package in LOCK_STEP_PACKAGES:
        pin = pins.by_name.get(package)
        if pin is not None and pin.version == jax:
            continue
        if pin is None:
            against, allowed = "the base image's constraints pin no version of it", f"a pinned {package}"
        else:
            against = f"the base image pins {package}=={pin.version} ({pin.origin})"
            allowed = f"{package}=={pin.version} (pinned at {pin.origin})"
        conflicts.append(Conflict(package, f"{package}=={jax}", source, against, allowed, _LOCK_STEP_HINT))
    return conflicts


def _jax_version(jax_version: str, source: str) -> Version:
    try:
        return Version(jax_version)
    except ValueError:  # InvalidVersion, or a release part too long for Python to read as a number
        raise ConfigError.at(source, jax_version, "a PEP 440 version such as 0.10.0") from None


# ---- the user's own specifiers, for packages the base image does not pin -----------------------------------------


@dataclass(frozen=True)
class _Bound:
    """One end of the range a specifier allows, and the entry that sets it."""

    version: Version
    strict: bool  # `>`/`<` exclude the version itself
    entry: Entry


def _own_contradictions(entries: list[Entry]) -> list[Conflict]:
    """Per package, one conflict when the user's own specifiers provably admit no version.

    Provable offline without an index: an exact pin (`==`, `===`) that another specifier excludes, or a lower
    bound (`>=`, `>`, `~=`) above an upper one (`<`, `<=`, `~=`). Anything subtler is left to pip.
    """
    by_name: dict[str, list[Entry]] = {}
    for entry in entries:
        by_name.setdefault(entry.name, []).append(entry)
    conflicts = []
    for name, group in by_name.items():
        pair = _excluded_pin(group) or _empty_range(group)
        if pair is None:
            continue
        earlier, later = sorted(pair, key=entries.index)
        if earlier is later:
            against = "its own specifiers admit no version"
            allowed = f"a specifier that some version of {name} satisfies"
        else:
            against = f"{earlier.text!r} ({earlier.origin}) leaves no version both accept"
            allowed = f"a specifier that some version of {name} satisfies together with {earlier.text!r}"
        conflicts.append(Conflict(name, later.text, str(later.origin), against, allowed, _OWN_HINT))
    return conflicts


def _excluded_pin(group: list[Entry]) -> tuple[Entry, Entry] | None:
    for pinned in group:
        for specifier in pinned.requirement.specifier:
            version = _exact_version(specifier)
            if version is None:
                continue
            for other in group:
                if not other.requirement.specifier.contains(version, prereleases=True):
                    return pinned, other
    return None


def _exact_version(specifier: Specifier) -> Version | None:
    if specifier.operator not in ("==", "===") or specifier.version.endswith(".*"):
        return None
    try:
        return Version(specifier.version)
    except ValueError:  # `===` takes any string
        return None


def _empty_range(group: list[Entry]) -> tuple[Entry, Entry] | None:
    lowers, uppers = [], []
    for entry in group:
        for specifier in entry.requirement.specifier:
            if specifier.operator in ("==", "===", "!="):  # exact pins are _excluded_pin's; != bounds nothing
                continue
            version = Version(specifier.version)
            if specifier.operator in (">=", ">", "~="):
                lowers.append(_Bound(version, specifier.operator == ">", entry))
            if specifier.operator in ("<=", "<"):
                uppers.append(_Bound(version, specifier.operator == "<", entry))
            if specifier.operator == "~=":
                uppers.append(_Bound(_compatible_ceiling(version), True, entry))
    if not lowers or not uppers:
        return None
    lower = max(lowers, key=lambda bound: (bound.version, bound.strict))
    upper = min(uppers, key=lambda bound: (bound.version, not bound.strict))
    empty = lower.version > upper.version or (lower.version == upper.version and (lower.strict or upper.strict))
    return (lower.entry, upper.entry) if empty else None


def _compatible_ceiling(version: Version) -> Version:
    """The exclusive upper end of `~=version`: `~=2.1` < 3, `~=2.1.4` < 2.2."""
    prefix = list(version.release[:-1])
    prefix[-1] += 1
    return Version(".".join(map(str, prefix)))
