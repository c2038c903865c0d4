"""kwok plays the kubelets of the sandbox's nodes: it marks registered nodes Ready, keeps their leases, and moves
bound pods through their phases by its Stage objects, taken from the pinned kwok module itself.

The stages, and why:
- nodes: kwok's `node-initialize` and `node-heartbeat-with-lease` (Ready nodes the node lifecycle controller
  never evicts from);
- pods: kwok's `pod-ready` and `pod-delete`; kwok's `pod-complete` (Succeeded at once) only for pods of Jobs that
  belong to no JobSet and are no Pathways client proxy (a CronJob's run, a webhook gate), so training pods stay
  Running, as long jobs do, and preemption and quota can be watched, and a proxy runs until its client deletes
  it; a JobSet pod that carries kwok's own delay annotation (`pod-complete.stage.kwok.x-k8s.io/delay`, e.g. "2s")
  completes after that delay, so a test can finish a job.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tpuplane.infra.pathways.proxy import COMPONENT_LABEL, PROXY_COMPONENT
from tpuplane.sandbox.processes import Launcher, Started, listening, wait_until
from tpuplane.sandbox.toolchain import binary

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
COMPLETE_DELAY_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
# Node leases (kwok renews each every quarter of this) and, for kube-controller-manager, how long a node may go
# without a renewal before it is NotReady. A kubelet's 40 s would cost the API server a lease update per node every
# 10 s: a third of a core for the 300 nodes of the xpk-shapes corpus stack, for nodes that never fail.
NODE_LEASE_SECONDS = 600
STAGE_FILES = ("node-initialize.yaml", "node-heartbeat-with-lease.yaml", "pod-ready.yaml", "pod-complete.yaml",
               "pod-delete.yaml")
# Nodes kwok manages: those the sandbox registers, by this annotation (kwok's own convention).
MANAGED_ANNOTATION = "kwok.x-k8s.io/node"


def _stage(directory: Path, file: str) -> dict[str, Any]:
    return yaml.safe_load((directory / file).read_text())


def stages(directory: Path) -> list[dict[str, Any]]:
    """kwok's stages from `directory` (copied beside the kwok binary from its module), adapted as above."""
    loaded = {file: _stage(directory, file) for file in STAGE_FILES}
    complete = loaded.pop("pod-complete.yaml")
    not_in_jobset = copy.deepcopy(complete)
    not_in_jobset["spec"]["selector"]["matchExpressions"] += [
        {"key": f'.metadata.labels["{JOBSET_NAME_LABEL}"]', "operator": "DoesNotExist"},
        {"key": f'.metadata.labels["{COMPONENT_LABEL}"]', "operator": "NotIn", "values": [PROXY_COMPONENT]}]
    on_request = copy.deepcopy(complete)
    on_request["metadata"]["name"] = "pod-complete-on-request"
    on_request["spec"]["selector"]["matchExpressions"] += [
        {"key": f'.metadata.labels["{JOBSET_NAME_LABEL}"]', "operator": "Exists"},
        {"key": f'.metadata.annotations["{COMPLETE_DELAY_ANNOTATION}"]', "operator": "Exists"}]
    on_request["spec"]["delay"] = {"durationMilliseconds": 0,
                                   "durationFrom": {"expressionFrom": f'.metadata.annotations["{COMPLETE_DELAY_ANNOTATION}"]'}}
    return [*loaded.values(), not_in_jobset, on_request]


def start_kwok(kubeconfig: Path, port: int, work: Path, launcher: Launcher) -> Started:
    kwok_binary = binary("kwok")
    config = work / "kwok.yaml"
    config.write_text(yaml.safe_dump_all(stages(kwok_binary.parent), sort_keys=False))
    process = launcher.start("kwok", [
        str(kwok_binary), f"--kubeconfig={kubeconfig}", f"--config={config}",
        "--manage-all-nodes=false", f"--manage-nodes-with-annotation-selector={MANAGED_ANNOTATION}=fake",
        f"--node-lease-duration-seconds={NODE_LEASE_SECONDS}",
        f"--server-address=127.0.0.1:{port}", "--cidr=10.240.0.0/16", "--node-ip=10.240.0.1",
    ])
    wait_until(process, lambda: listening(port), 30.0, "serving")
    return process
