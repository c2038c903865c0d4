"""The sandbox's binaries, built from the Go modules pinned under `sandbox/toolchain/` and cached outside the clone.

Each folder under `toolchain/` is a small Go module whose `go.mod` and `go.sum` pin one piece (Kubernetes, etcd,
kwok, Kueue, JobSet, the Pulumi engine, its Python language host, the Kubernetes provider). Several of them
repeat `replace` lines of the module they wrap, which is why they are built with `go build` inside a module of
our own rather than `go install pkg@version` (the Go command refuses that for modules with replace directives).

A module's binaries land in `<cache>/<module>-<key>/bin`, where the key hashes the module's files, the build
recipe and the Go version: a pin change rebuilds that module alone, a finished module is never built twice, and an
interrupted build resumes with the modules it had not finished (each one is moved into place whole).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

MODULES_DIR = Path(__file__).parent / "toolchain"
RECIPE_VERSION = "1"  # bump when the way a module is built changes (flags, steps), so caches rebuild
GO_FLAGS = ("-p", "2", "-trimpath")  # two packages at a time keeps a 2-core machine's memory in check


def cache_root() -> Path:
    """`$TPUPLANE_CACHE/toolchain`, else `$XDG_CACHE_HOME/tpuplane/toolchain`, else `~/.cache/tpuplane/toolchain`."""
    if explicit := os.environ.get("TPUPLANE_CACHE"):
        return Path(explicit) / "toolchain"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tpuplane" / "toolchain"


@dataclass(frozen=True)
class Binary:
    """One executable a module builds: its Go package, the name it gets, and where its version is stamped."""

    package: str
    name: str
    version_module: str | None = None  # the module whose version the binary reports
    version_flags: tuple[str, ...] = ()  # `-X` targets that get "v<version>" (or the bare version, see below)
    bare_version: bool = False  # stamp "1.2.3" instead of "v1.2.3"


@dataclass(frozen=True)
class GoModule:
    """A folder under `toolchain/` and what it builds."""

    folder: str
    binaries: tuple[Binary, ...]
    prepare: Callable[["GoModule", Path, Path], list[str]] | None = None  # extra go flags after a source step
    # (module, file) pairs copied beside the binaries from the module cache, at the version this module pins
    extra_files: tuple[tuple[str, str], ...] = field(default=())

    @property
    def path(self) -> Path:
        return MODULES_DIR / self.folder


class ToolchainError(RuntimeError):
    """A build step failed: says which module, which command, and its last lines of output."""


# --------------------------------------------------------------------------------------------------------------
# The go command


def go(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run `go` and return its stdout; ToolchainError with its stderr when it fails (or when Go is missing)."""
    go_binary = shutil.which("go")
    if go_binary is None:
        raise ToolchainError("the `go` command is not on PATH: the sandbox's toolchain is built with Go 1.26 "
                             "(https://go.dev/doc/install), from the Go module proxy")
    result = subprocess.run([go_binary, *args], cwd=cwd, env={**os.environ, **(env or {})},
                            capture_output=True, text=True)
    if result.returncode:
        raise ToolchainError(f"`go {' '.join(args)}` failed in {cwd}:\n{_tail(result.stderr)}")
    return result.stdout


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def module_version(module: GoModule, module_path: str) -> str:
    """The version the module's go.mod pins for `module_path` (as the go command resolves it)."""
    out = go(["list", "-mod=readonly", "-m", "-json", module_path], module.path)
    return json.loads(out)["Version"]


def module_dir(module: GoModule, module_path: str) -> Path:
    """Where the module cache holds `module_path` at its pinned version (downloaded if needed)."""
    version = module_version(module, module_path)
    out = go(["mod", "download", "-json", f"{module_path}@{version}"], module.path)
    return Path(json.loads(out)["Dir"])


# --------------------------------------------------------------------------------------------------------------
# The pulumi-kubernetes provider: its command embeds files its own generate step writes.

KUBERNETES_PROVIDER = "github.com/pulumi/pulumi-kubernetes/provider/v4"


def _prepare_kubernetes_provider(module: GoModule, work: Path, _bin: Path) -> list[str]:
    """Copy the provider module out of the read-only module cache, run its own generate step there (the schema
    and Terraform mapping it embeds, versioned), and build against that copy through a go.mod of ours that adds
    one `replace` (`-modfile`): the committed go.mod and go.sum stay the pins."""
    version = module_version(module, KUBERNETES_PROVIDER)
    source = work / "provider"
    shutil.copytree(module_dir(module, KUBERNETES_PROVIDER), source)
    for path in source.rglob("*"):
        path.chmod(path.stat().st_mode | 0o200)
    command_dir = source / "cmd" / "pulumi-resource-kubernetes"
    modfile = work / "go.mod"
    shutil.copy(module.path / "go.mod", modfile)
    shutil.copy(module.path / "go.sum", work / "go.sum")
    go(["run", f"-modfile={modfile}", "generate.go"], command_dir, env={"VERSION": version.lstrip("v")})
    go(["mod", "edit", f"-replace={KUBERNETES_PROVIDER}={source}", str(modfile)], module.path)
    return [f"-modfile={modfile}"]


# --------------------------------------------------------------------------------------------------------------
# What is built

_PULUMI_VERSION = "github.com/pulumi/pulumi/sdk/v3/go/common/version.Version"
_KUBE_VERSION = "k8s.io/component-base/version.gitVersion"

MODULES: tuple[GoModule, ...] = (
    GoModule("etcd", (Binary("tpuplane.dev/sandbox/toolchain/etcd", "etcd", "go.etcd.io/etcd/server/v3"),)),
    GoModule("kubernetes", tuple(
        Binary(f"k8s.io/kubernetes/cmd/{name}", name, "k8s.io/kubernetes", (_KUBE_VERSION,))
        for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"))),
    GoModule("helm", (Binary("helm.sh/helm/v3/cmd/helm", "helm", "helm.sh/helm/v3",
                             ("helm.sh/helm/v3/internal/version.version",)),)),
    # kwok, and the Stage objects of its own that the sandbox runs it with (tpuplane.sandbox.kwok).
    GoModule("kwok", (Binary("sigs.k8s.io/kwok/cmd/kwok", "kwok", "sigs.k8s.io/kwok"),),
             extra_files=tuple(("sigs.k8s.io/kwok", f"kustomize/stage/{path}") for path in (
                 "node/fast/node-initialize.yaml", "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
                 "pod/fast/pod-ready.yaml", "pod/fast/pod-complete.yaml", "pod/fast/pod-delete.yaml"))),
    GoModule("kueue", (Binary("sigs.k8s.io/kueue/cmd/kueue", "kueue", "sigs.k8s.io/kueue",
                              ("sigs.k8s.io/kueue/pkg/version.GitVersion",)),)),
    GoModule("jobset", (Binary("sigs.k8s.io/jobset", "jobset", "sigs.k8s.io/jobset",
                               ("sigs.k8s.io/jobset/pkg/version.GitVersion",)),)),
    GoModule("pulumi", (Binary("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi", "pulumi",
                               "github.com/pulumi/pulumi/pkg/v3", (_PULUMI_VERSION,)),)),
    # The Python language host, and beside it (where it looks) the script it runs programs with, of its release.
    GoModule("pulumi-language-python", (
        Binary("github.com/pulumi/pulumi/sdk/v3/python/cmd/pulumi-language-python", "pulumi-language-python",
               "github.com/pulumi/pulumi/sdk/v3", (_PULUMI_VERSION,)),),
        extra_files=(("github.com/pulumi/pulumi/sdk/v3", "python/cmd/pulumi-language-python-exec"),)),
    GoModule("pulumi-language-yaml", (
        Binary("github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml", "pulumi-language-yaml",
               "github.com/pulumi/pulumi-yaml", ("github.com/pulumi/pulumi-yaml/pkg/version.Version",)),)),
    GoModule("pulumi-kubernetes", (
        Binary("github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes",
               "pulumi-resource-kubernetes", KUBERNETES_PROVIDER,
               ("github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version",), bare_version=True),),
        prepare=_prepare_kubernetes_provider),
)
MODULES_BY_FOLDER = {m.folder: m for m in MODULES}
BINARY_NAMES = tuple(b.name for m in MODULES for b in m.binaries)


def module_key(module: GoModule) -> str:
    """What a module's build depends on: its own files, how it is built (binaries, stamps, extra files, steps)
    and the Go version."""
    recipe = (RECIPE_VERSION, GO_FLAGS, module.binaries, module.extra_files,
              module.prepare.__name__ if module.prepare else None)
    digest = hashlib.sha256(f"{recipe!r}\n{sys.platform}\n{_go_version()}\n".encode())
    for path in sorted(p for p in module.path.iterdir() if p.is_file()):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


@functools.cache
def _go_version() -> str:
    go_binary = shutil.which("go")
    if go_binary is None:
        return "no-go"
    return subprocess.run([go_binary, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()


def module_bin(module: GoModule) -> Path:
    return cache_root() / f"{module.folder}-{module_key(module)}" / "bin"


def is_built(module: GoModule) -> bool:
    directory = module_bin(module)
    return all((directory / b.name).is_file() for b in module.binaries)


# --------------------------------------------------------------------------------------------------------------
# Building


@dataclass
class BuildReport:
    """What a build did, for the progress line and the note: seconds and bytes per module (0 s when cached)."""

    module: str
    seconds: float
    cached: bool
    size_bytes: int


Progress = Callable[[str, int, int], None]  # (module, packages built, packages in all)


def build_module(module: GoModule, progress: Progress | None = None) -> BuildReport:
    """Build one module's binaries into the cache (nothing if they are there)."""
    target = module_bin(module)
    if is_built(module):
        return BuildReport(module.folder, 0.0, True, _size(target))
    started = time.monotonic()
    target.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{module.folder}-", dir=target.parent.parent) as scratch:
        work = Path(scratch)
        out = work / "bin"
        out.mkdir()
        extra_flags = module.prepare(module, work, out) if module.prepare else []
        for binary in module.binaries:
            _go_build(module, binary, out, extra_flags, progress)
        for source_module, relative in module.extra_files:
            copied = out / Path(relative).name
            shutil.copy(module_dir(module, source_module) / relative, copied)
            copied.chmod(0o644 if copied.suffix in (".yaml", ".json") else 0o755)  # data, else a script
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(out, target)  # whole or not at all
    for stale in cache_root().glob(f"{module.folder}-*"):  # earlier pins of this module
        if stale != target.parent and stale.name.removeprefix(f"{module.folder}-").isalnum():
            shutil.rmtree(stale, ignore_errors=True)
    return BuildReport(module.folder, time.monotonic() - started, False, _size(target))


def _go_build(module: GoModule, binary: Binary, out: Path, extra_flags: list[str],
              progress: Progress | None) -> None:
    ldflags = ["-s", "-w"]
    if binary.version_module and binary.version_flags:
        version = module_version(module, binary.version_module)
        stamped = version.lstrip("v") if binary.bare_version else version
        ldflags += [f"-X={flag}={stamped}" for flag in binary.version_flags]
    total = len(go(["list", *extra_flags, "-deps", binary.package], module.path).split())
    command = [shutil.which("go") or "go", "build", *GO_FLAGS, *extra_flags, "-v", f"-ldflags={' '.join(ldflags)}",
               "-o", str(out / binary.name), binary.package]
    env = {**os.environ, "CGO_ENABLED": "0"}
    process = subprocess.Popen(command, cwd=module.path, env=env, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    built, errors = 0, []
    for line in process.stderr:
        if line.startswith(("#", " ", "\t")) or ":" in line:
            errors.append(line)
        else:
            built += 1
            if progress:
                progress(f"{module.folder}: {binary.name}", min(built, total), total)
    if process.wait():
        raise ToolchainError(f"building {binary.name} ({binary.package}) in sandbox/toolchain/{module.folder} "
                             f"failed:\n{_tail(''.join(errors))}")


def _size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir()) if directory.is_dir() else 0


def build_all(modules: Iterable[GoModule] = MODULES, progress: Progress | None = None) -> list[BuildReport]:
    return [build_module(module, progress) for module in modules]


# --------------------------------------------------------------------------------------------------------------
# Using


class ToolchainMissing(RuntimeError):
    """Some binary is not built yet: the message says which and how to build them."""


def require_all() -> None:
    """ToolchainMissing naming every module not built yet, and how to build them."""
    missing = [m.folder for m in MODULES if not is_built(m)]
    if missing:
        raise ToolchainMissing(f"the sandbox's toolchain is not built ({', '.join(missing)}); "
                               "run `tpuplane sandbox build` (about 30 minutes cold on 2 cores, then cached)")


def binary(name: str) -> Path:
    """The path of a built binary (or of a file copied beside it)."""
    module = next(m for m in MODULES if any(b.name == name for b in m.binaries))
    if not is_built(module):
        raise ToolchainMissing(f"{name} is not built (sandbox/toolchain/{module.folder}); "
                               "run `tpuplane sandbox build`")
    return module_bin(module) / name


def binary_dirs() -> list[str]:
    """Every module's binary folder: put first on PATH, the engine finds its plugins there and never downloads."""
    require_all()
    return [str(module_bin(m)) for m in MODULES]
