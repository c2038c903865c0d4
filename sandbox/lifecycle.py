"""`sandbox up`, `status` and `down`: a stack's Kubernetes side on a real control plane, on this machine.

`up` starts, in order: etcd, kube-apiserver, kube-controller-manager, kube-scheduler; installs JobSet and Kueue
from their pinned charts and starts both as host processes (`tpuplane.sandbox.controllers`); starts kwok and
registers one node per VM of every node pool the stack plans (`tpuplane.infra.fleet.nodes`); then applies the
stack's Kubernetes half with the real Pulumi engine (`tpuplane.sandbox.engine`). Each step is recorded in the
state file as it happens, so `down` stops whatever a failed `up` left running.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tpuplane.infra.batch.kueue import jobset_helm_values, kueue_helm_values
from tpuplane.infra.stack import StackConfig
from tpuplane.infra.fleet.nodes import node_objects, stack_nodes
from tpuplane.sandbox import certs, controllers, control_plane, kwok
from tpuplane.sandbox.cluster_api import ClusterApi
from tpuplane.sandbox.layout import Paths, Ports, ProcessRecord, SandboxState, UnreadableState
from tpuplane.sandbox.processes import (
    Launcher,
    Started,
    alive,
    free_port,
    https_ok,
    kill_marked,
    port_in_use,
    stop,
)
from tpuplane.sandbox.toolchain import require_all

Progress = Callable[[str], None]
NODES_READY_TIMEOUT = 180.0  # kwok marks a few hundred nodes Ready in seconds; this is for a loaded machine
# Seconds each process gets to exit on SIGTERM before SIGKILL. A sandbox's state is thrown away, so nothing is
# lost by not waiting: Kueue sometimes took the whole 10 s default before exiting.
STOP_GRACE = 3.0
# `down` stops the API server's clients first, all at once (each takes a second or so to shut down, waiting for no
# other), then the servers one by one, last started first: stopped beside whatever it talks to, Kueue or the API
# server took the whole grace.
SERVERS = frozenset({"kube-apiserver", "etcd"})


class SandboxError(RuntimeError):
    """What the user gets as one line (exit 2): a sandbox already up, a port taken, no TPU pools, ..."""


@dataclass(frozen=True)
class StackSource:
    """The stack a sandbox plays: its validated config, its Pulumi project and stack names (the engine registers
    the URNs `pulumi up` of that stack would), and the file it came from."""

    config: StackConfig
    project: str
    stack: str
    config_file: Path
    project_dir: Path  # where its Pulumi.yaml is: relative paths in the config start there


def up(source: StackSource, directory: Path, *, apiserver_port: int | None = None,
       progress: Progress = lambda _: None, apply: Callable[[SandboxState, Progress], None] | None = None,
       ) -> SandboxState:
    """Start a sandbox for `source` in `directory` (which must hold none). Returns its recorded state."""
    _refuse_second(directory)
    if not source.config.tpu_pools:
        raise SandboxError(f"stack {source.stack} plans no TPU pools (tpuplane:tpuPools is empty); the sandbox "
                           "plays a stack's TPU fleet, so give it a stack with at least one pool")
    if apiserver_port is not None and port_in_use(apiserver_port):
        raise SandboxError(f"port {apiserver_port} on 127.0.0.1 is in use; pass another --port or none (a free "
                           "one is picked)")
    require_all()  # ToolchainMissing names what to build
    ports = _ports(apiserver_port)
    paths = Paths(directory)
    directory.mkdir(parents=True, exist_ok=True)
    for folder in (paths.pki, paths.logs, paths.controllers):
        folder.mkdir(parents=True, exist_ok=True)
    state = SandboxState(directory=str(directory), project=source.project, stack=source.stack,
                         config_file=str(source.config_file), project_dir=str(source.project_dir),
                         kubeconfig=str(paths.kubeconfig), ports=ports)
    state.save()
    try:
        _start(source, state, paths, progress)
        if apply is not None:
            apply(state, progress)
            state.applied = True
            state.save()
    except BaseException:
        down(directory, keep_logs=True)  # the logs say why; the next `up` clears them
        raise
    return state


def _refuse_second(directory: Path) -> None:
    try:
        existing = SandboxState.load(directory)
    except UnreadableState as exc:
        raise SandboxError(str(exc)) from None
    if existing is not None:
        raise SandboxError(f"a sandbox is already up in {directory} (stack {existing.stack}, API server "
                           f"https://127.0.0.1:{existing.ports.apiserver}); run `tpuplane sandbox down` first, "
                           "or give another --dir")
    logs = Paths(directory).logs
    if directory.exists() and {p.name for p in directory.iterdir()} == {logs.name}:
        shutil.rmtree(logs)  # what a failed `up` left to read
    if directory.exists() and any(directory.iterdir()):
        raise SandboxError(f"{directory} exists and is not empty, but holds no sandbox; remove it or give "
                           "another --dir")


def _ports(apiserver: int | None) -> Ports:
    names = [n for n in Ports.model_fields if n != "apiserver"]
    chosen: dict[str, int] = {"apiserver": apiserver or free_port()}
    for name in names:
        port = free_port()
        while port in chosen.values():
            port = free_port()
        chosen[name] = port
    return Ports(**chosen)


def _launcher(state: SandboxState, paths: Paths) -> Launcher:
    def record(started: Started) -> None:
        state.processes.append(ProcessRecord(name=started.name, pid=started.pid, start_time=started.start_time,
                                             log=started.log))
        state.save()

    return Launcher(marker=state.directory, logs=paths.logs, record=record)


def _start(source: StackSource, state: SandboxState, paths: Paths, progress: Progress) -> None:
    ports, launcher = state.ports, _launcher(state, paths)
    files = control_plane.ControlPlaneFiles(paths, ports)
    progress("etcd")
    control_plane.start_etcd(paths, ports, launcher)
    progress("kube-apiserver")
    control_plane.start_apiserver(paths, ports, files, launcher)
    progress("kube-scheduler")
    control_plane.start_scheduler(paths, ports, launcher)
    api = ClusterApi(paths.kubeconfig)
    _start_controllers(source, state, paths, files, api, launcher, progress)
    # After the controllers' CRDs: the garbage collector learns the kinds the API serves when it starts, and new
    # ones only at its discovery sync every 30 s; until then a foreground deletion of a Kueue object (the
    # Kubernetes provider's default) waits for it.
    progress("kube-controller-manager")
    control_plane.start_controller_manager(paths, ports, files, launcher)
    progress("kwok and the stack's nodes")
    kwok.start_kwok(paths.kubeconfig, ports.kwok, paths.controllers, launcher)
    _register_nodes(source, state, api)


def _start_controllers(source: StackSource, state: SandboxState, paths: Paths,
                       files: control_plane.ControlPlaneFiles, api: ClusterApi, launcher: Launcher,
                       progress: Progress) -> None:
    """JobSet first (Kueue's JobSet integration needs its CRD), then Kueue."""
    platform = source.config.batch
    ports, work = state.ports, paths.controllers
    progress("JobSet")
    jobset_render = controllers.render_chart(controllers.JOBSET, jobset_helm_values(platform), work)
    kueue_render = controllers.render_chart(controllers.KUEUE, kueue_helm_values(platform), work)
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": c.namespace}}
                  for c in (controllers.JOBSET, controllers.KUEUE)]
    jobset_objects = controllers.install_objects(controllers.JOBSET, jobset_render, ports.jobset_webhook,
                                                 files.ca.cert_pem)
    kueue_ca = certs.new_ca(controllers.KUEUE_CA_NAME)
    kueue_objects = controllers.install_objects(controllers.KUEUE, kueue_render, ports.kueue_webhook,
                                                kueue_ca.cert_pem)
    crds = [o for o in [*jobset_objects, *kueue_objects] if o["kind"] == "CustomResourceDefinition"]
    crds.append(controllers.provisioning_request_crd())
    api.apply([*namespaces, *crds])
    api.wait_for_crds([c["metadata"]["name"] for c in crds])
    api.apply(o for o in [*jobset_objects, *kueue_objects] if o["kind"] != "CustomResourceDefinition")

    jobset_certs = paths.controllers / "jobset-certs"
    certs.serving_cert(files.ca, "jobset-webhook").write(jobset_certs)
    jobset_config = controllers.host_configuration(
        controllers.JOBSET, controllers.chart_configuration(jobset_render), webhook_port=ports.jobset_webhook,
        metrics_port=ports.jobset_metrics, health_port=ports.jobset_health, cert_dir=jobset_certs)
    controllers.start_controller(controllers.JOBSET, jobset_config, work, paths.kubeconfig, ports.jobset_health,
                                 launcher, lambda: api.accepts(_probe_jobset()))

    progress("Kueue")
    kueue_secret = controllers.kueue_cert_secret(kueue_ca, controllers.KUEUE.namespace)
    api.apply([kueue_secret])
    kueue_certs = paths.controllers / "kueue-certs"
    controllers.mount_secret(kueue_secret, kueue_certs)
    kueue_config = controllers.host_configuration(
        controllers.KUEUE, controllers.chart_configuration(kueue_render), webhook_port=ports.kueue_webhook,
        metrics_port=ports.kueue_metrics, health_port=ports.kueue_health, cert_dir=kueue_certs,
        visibility_port=ports.kueue_visibility)
    controllers.start_controller(controllers.KUEUE, kueue_config, work, paths.kubeconfig, ports.kueue_health,
                                 launcher, lambda: api.accepts(_probe_flavor()))


def _probe_flavor() -> dict:
    """A ResourceFlavor dry run passes Kueue's webhook only when the API server reaches it."""
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
            "metadata": {"name": "tpuplane-sandbox-probe"}}


def _probe_jobset() -> dict:
    """A JobSet dry run in JobSet's own namespace, which Kueue does not manage (Kueue's JobSet webhook is not
    up yet), passes JobSet's webhooks only when the API server reaches them."""
    container = {"name": "c", "image": "busybox"}
    job = {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": {"name": "tpuplane-sandbox-probe", "namespace": controllers.JOBSET.namespace},
            "spec": {"replicatedJobs": [{"name": "r", "replicas": 1, "template": {"spec": job}}]}}


def _register_nodes(source: StackSource, state: SandboxState, api: ClusterApi) -> None:
    cfg = source.config
    names: set[str] = set()
    for group in stack_nodes(cfg):
        for node in node_objects(group, cfg.cluster.name, cfg.region):
            node["metadata"]["annotations"] = {kwok.MANAGED_ANNOTATION: "fake"}
            api.create_node(node)
            names.add(node["metadata"]["name"])
    deadline = time.monotonic() + NODES_READY_TIMEOUT
    while api.nodes_ready(names) < len(names):
        if time.monotonic() > deadline:
            raise SandboxError(f"{len(names) - api.nodes_ready(names)} of {len(names)} nodes not Ready after "
                               f"{NODES_READY_TIMEOUT:.0f} s; see {Paths(Path(state.directory)).log('kwok')}")
        time.sleep(0.2)
    state.nodes = len(names)
    state.save()


# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessStatus:
    name: str
    pid: int
    running: bool
    log: str


@dataclass(frozen=True)
class SandboxStatus:
    state: SandboxState
    processes: list[ProcessStatus]
    apiserver_ready: bool

    @property
    def healthy(self) -> bool:
        return self.apiserver_ready and all(p.running for p in self.processes)


def status(directory: Path) -> SandboxStatus | None:
    state = SandboxState.load(directory)
    if state is None:
        return None
    processes = [ProcessStatus(r.name, r.pid, alive(r.started()), r.log) for r in state.processes]
    paths = Paths(directory)
    token = _admin_token(paths)
    ready = token is not None and https_ok(f"https://127.0.0.1:{state.ports.apiserver}/readyz",
                                           paths.pki / "ca.crt", token)
    return SandboxStatus(state, processes, ready)


def _admin_token(paths: Paths) -> str | None:
    try:
        return paths.token_file.read_text().split(",", 1)[0]
    except OSError:
        return None


def down(directory: Path, keep_logs: bool = False) -> list[str]:
    """Stop every process the sandbox started (the API server's clients at once, then the servers: see `SERVERS`)
    and remove its folder (but its logs, when `keep_logs`: a failed `up` leaves them to read). Returns the names of
    the processes, last started first."""
    try:
        state = SandboxState.load(directory)
    except UnreadableState:
        state = None  # its processes are still found by the folder's marker, below
    else:
        if state is None:
            if directory.exists() and not any(directory.iterdir()):
                directory.rmdir()
            return []
    records = list(reversed(state.processes)) if state is not None else []
    clients = [r for r in records if r.name not in SERVERS]
    servers = [r for r in records if r.name in SERVERS]
    for wave in (clients, *([server] for server in servers)):
        stop(*(record.started() for record in wave), grace=STOP_GRACE)
    stopped = [record.name for record in records]
    stopped += [f"pid {pid}" for pid in kill_marked(str(directory))]  # what no record names
    for entry in directory.iterdir():
        if keep_logs and entry.name == Paths(directory).logs.name:
            continue
        shutil.rmtree(entry, ignore_errors=True) if entry.is_dir() else entry.unlink(missing_ok=True)
    if not keep_logs:
        shutil.rmtree(directory, ignore_errors=True)
    return stopped
