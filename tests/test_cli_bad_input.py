"""Every command against a corpus of bad input: exit status 2, one message on stderr, no traceback, nothing on
stdout. Bad input is the user's mistake (or an attacker's file), never a crash."""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import REPO, STACKS
from plan_factory import cluster_queue, node_pool, plan
from tpuplane.cli.main import app

GOOD_STACK = (STACKS / "Pulumi.dev.yaml").read_text()
GOOD_PATHWAYS = (STACKS / "Pulumi.pathways.yaml").read_text()
JOB = "jobs:\n- tpuType: v6e-16\n  image: img:1\n  command: python train.py\n"


def alias_bomb() -> str:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        lines.append(f"{level}: &{level} [" + ",".join([f"*{chr(ord(level) - 1)}"] * 9) + "]")
    return GOOD_STACK + "  kubernetes:bomb:\n" + "".join(f"    {line}\n" for line in lines)


def stack_with(old: str, new: str, base: str = GOOD_STACK) -> str:
    assert old in base, old
    return base.replace(old, new, 1)


def nested_json(depth: int) -> str:
    return '{"project": "p", "stack": "s", "resources": [], "x": ' + "[" * depth + "]" * depth + "}"


def include_chain(folder: Path, length: int) -> Path:
    for i in range(length):
        (folder / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (folder / f"r{length}.txt").write_text("numpy\n")
    return folder / "r0.txt"


# Each case: the file(s) to write (name -> text, or a callable of the folder), and the command line; `{f}` is the
# folder the files are in. Stack configs are run with --project-dir REPO so the real program plans them.
Files = dict[str, "str | bytes | Callable[[Path], object]"]
CASES: dict[str, tuple[Files, list[str]]] = {
    # --- workload check
    "workload check /dev/zero": ({}, ["workload", "check", "/dev/zero"]),
    "workload check a folder": ({}, ["workload", "check", "{f}"]),
    "workload check duplicate keys": ({"w.yaml": "kind: Job\nkind: JobSet\n"}, ["workload", "check", "{f}/w.yaml"]),
    "workload check not a workload": ({"w.yaml": "kind: Deployment\nmetadata: {name: x}\n"},
                                      ["workload", "check", "{f}/w.yaml"]),
    "workload check malformed job": ({"w.yaml": "apiVersion: batch/v1\nkind: Job\nmetadata: {name: x}\nspec: 5\n"},
                                     ["workload", "check", "{f}/w.yaml"]),
    # --- catalog
    "catalog unknown type": ({}, ["catalog", "v99-16"]),
    "catalog unicode digits": ({}, ["catalog", "v6e-١٦"]),
    # --- plan: the file itself
    "plan missing config": ({}, ["plan", "--config", "{f}/Pulumi.none.yaml"]),
    "plan config is a folder": ({}, ["plan", "--config", "{f}"]),
    "plan config /dev/zero": ({}, ["plan", "--config", "/dev/zero"]),
    "plan config binary": ({"Pulumi.bin.yaml": b"\xff\xfe\x00garbage"}, ["plan", "--config", "{f}/Pulumi.bin.yaml"]),
    "plan config empty": ({"Pulumi.e.yaml": ""}, ["plan", "--config", "{f}/Pulumi.e.yaml"]),
    "plan config a list": ({"Pulumi.l.yaml": "- a\n- b\n"}, ["plan", "--config", "{f}/Pulumi.l.yaml"]),
    "plan invalid yaml": ({"Pulumi.x.yaml": "config: [\n"}, ["plan", "--config", "{f}/Pulumi.x.yaml"]),
    "plan duplicate cluster": ({"Pulumi.d.yaml": stack_with("config:\n", "config:\n  tpuplane:cluster: {}\n")},
                               ["plan", "--config", "{f}/Pulumi.d.yaml"]),
    "plan key bare and qualified": ({"Pulumi.q.yaml": stack_with("config:\n", "config:\n  cluster: {name: other}\n")},
                                    ["plan", "--config", "{f}/Pulumi.q.yaml"]),
    "plan non-string key": ({"Pulumi.k.yaml": stack_with("config:\n", "config:\n  1: x\n")},
                            ["plan", "--config", "{f}/Pulumi.k.yaml"]),
    "plan binary tag": ({"Pulumi.b.yaml": stack_with("config:\n", "config:\n  tpuplane:x: !!binary aGk=\n")},
                        ["plan", "--config", "{f}/Pulumi.b.yaml"]),
    "plan set tag": ({"Pulumi.s.yaml": stack_with("config:\n", "config:\n  tpuplane:x: !!set {a, b}\n")},
                     ["plan", "--config", "{f}/Pulumi.s.yaml"]),
    "plan timestamp value": ({"Pulumi.t.yaml": stack_with("zone: us-east5-b", "zone: 2024-01-01")},
                                 ["plan", "--config", "{f}/Pulumi.t.yaml"]),
    "plan alias bomb": ({"Pulumi.bomb.yaml": alias_bomb()}, ["plan", "--config", "{f}/Pulumi.bomb.yaml"]),
    "plan huge integer": ({"Pulumi.h.yaml": stack_with("config:\n", "config:\n  tpuplane:x: " + "9" * 5000 + "\n")},
                          ["plan", "--config", "{f}/Pulumi.h.yaml"]),
    # --- plan: the values
    "plan unicode region": ({"Pulumi.r.yaml": stack_with("gcp:region: us-east5", "gcp:region: us-east٥")},
                            ["plan", "--config", "{f}/Pulumi.r.yaml"]),
    "plan cpu nodes boolean": ({"Pulumi.c.yaml": stack_with("    name: fleet-dev\n",
                                                            "    name: fleet-dev\n    cpuPool: {maxNodes: true}\n")},
                               ["plan", "--config", "{f}/Pulumi.c.yaml"]),
    "plan slices 10^30": ({"Pulumi.n.yaml": stack_with("maxSlices: 2", "maxSlices: " + "1" + "0" * 30)},
                          ["plan", "--config", "{f}/Pulumi.n.yaml"]),
    "plan malformed cidr": ({"Pulumi.m.yaml": stack_with("cidr: 203.0.113.0/24", "cidr: 0.0.0.0/00")},
                            ["plan", "--config", "{f}/Pulumi.m.yaml"]),
    "plan cidr out of range": ({"Pulumi.m.yaml": stack_with("cidr: 203.0.113.0/24", "cidr: 999.999.999.999/99")},
                               ["plan", "--config", "{f}/Pulumi.m.yaml"]),
    "plan borrowing limit inf": ({"Pulumi.i.yaml": stack_with("config:\n", "config:\n  tpuplane:kueue: {teams: [{name: "
                                                              "a, share: 1.0, borrowingLimit: .inf}]}\n")},
                                 ["plan", "--config", "{f}/Pulumi.i.yaml"]),
    "plan share as boolean": ({"Pulumi.sh.yaml": stack_with("config:\n", "config:\n  tpuplane:kueue: {teams: [{name: "
                                                            "a, share: true}]}\n")},
                              ["plan", "--config", "{f}/Pulumi.sh.yaml"]),
    "plan requirements outside project": ({"Pulumi.p.yaml": stack_with(
        "      requirements: sidecar/requirements.txt", "      requirements: ../.env", GOOD_PATHWAYS)},
        ["plan", "--config", "{f}/Pulumi.p.yaml"]),
    "plan prices infinite": ({"prices.yaml": "chip_hour:\n  v6e:\n    spot: .inf\n"},
                             ["plan", "--prices", "{f}/prices.yaml"]),
    "plan prices repeated key": ({"prices.yaml": "chip_hour: {}\nchip_hour: {}\n"},
                                 ["plan", "--prices", "{f}/prices.yaml"]),
    # --- diff
    "diff missing file": ({}, ["diff", "{f}/a.json", "{f}/b.json"]),
    "diff not json": ({"a.json": "{not json", "b.json": "{}"}, ["diff", "{f}/a.json", "{f}/b.json"]),
    "diff binary": ({"a.json": b"\xff\xfe", "b.json": "{}"}, ["diff", "{f}/a.json", "{f}/b.json"]),
    "diff deeply nested": ({"a.json": nested_json(100_000), "b.json": nested_json(1)},
                           ["diff", "{f}/a.json", "{f}/b.json"]),
    "diff nan": ({"a.json": '{"project": "p", "stack": "s", "resources": [], "x": NaN}', "b.json": "{}"},
                 ["diff", "{f}/a.json", "{f}/b.json"]),
    "diff wrong shape": ({"a.json": json.dumps([1, 2]), "b.json": json.dumps({"resources": 1})},
                         ["diff", "{f}/a.json", "{f}/b.json"]),
    # --- sidecar check
    "sidecar check missing file": ({}, ["sidecar", "check", "-r", "{f}/none.txt", "--jax-version", "0.10.0"]),
    "sidecar check undefined marker": ({"r.txt": 'numpy ; python_version ~= "abc"\n'},
                                       ["sidecar", "check", "-r", "{f}/r.txt", "--jax-version", "0.10.0"]),
    "sidecar check include chain": ({"chain": lambda folder: include_chain(folder, 600)},
                                    ["sidecar", "check", "-r", "{f}/r0.txt", "--jax-version", "0.10.0"]),
    "sidecar check huge version": ({"r.txt": "numpy==" + "1" * 5000 + "\n"},
                                   ["sidecar", "check", "-r", "{f}/r.txt", "--jax-version", "0.10.0"]),
    "sidecar check secret file": ({"r.txt": "AWS_SECRET_ACCESS_KEY=SECRETVALUE42/def\n"},
                                  ["sidecar", "check", "-r", "{f}/r.txt", "--jax-version", "0.10.0"]),
    "sidecar check /dev/zero": ({}, ["sidecar", "check", "-r", "/dev/zero", "--jax-version", "0.10.0"]),
    "sidecar check binary file": ({"r.txt": b"\xff\xfe\x00"}, ["sidecar", "check", "-r", "{f}/r.txt", "--jax-version",
                                                              "0.10.0"]),
    "sidecar check base tags /dev/zero": ({}, ["sidecar", "check", "--jax-version", "0.10.0", "--base-tags", "/dev/zero"]),
    "sidecar check base tags secret": ({"tags": "GITHUB_TOKEN=SECRETVALUE42\n"},
                                       ["sidecar", "check", "--jax-version", "0.10.0", "--base-tags", "{f}/tags"]),
    "sidecar check bad jax version": ({}, ["sidecar", "check", "--jax-version", "0." + "1" * 5000]),
    "sidecar wheel into a file": ({"file": "not a folder\n"}, ["sidecar", "wheel", "{f}/file"]),
    "sidecar wheel into /proc": ({}, ["sidecar", "wheel", "/proc/tpuplane"]),
    # --- workload render
    "workload bad namespace": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1", "--command", "x",
                                    "--namespace", "Bad NS!"]),
    "workload bad queue": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1", "--command", "x",
                                "--queue", "bad queue!"]),
    "workload too many slices": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1", "--command",
                                      "x", "--slices", "3000000000"]),
    "workload empty image": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "", "--command", "x"]),
    "workload empty command": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1", "--command", ""]),
    "workload unknown tpu": ({}, ["workload", "render", "--tpu-type", "v99-1", "--image", "i:1", "--command", "x"]),
    "workload env without value": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1", "--command",
                                        "x", "--env", "NOVALUE"]),
    "workload bad stack file": ({"Pulumi.d.yaml": "config:\n  a: 1\n  a: 2\n"},
                                ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1", "--command", "x",
                                 "--config", "{f}/Pulumi.d.yaml"]),
    # --- experiment render
    "experiment missing file": ({}, ["experiment", "render", "{f}/none.yaml"]),
    "experiment duplicate grid key": ({"e.yaml": "name: s\ngrid:\n  lr: [1]\n  lr: [2]\n" + JOB},
                                      ["experiment", "render", "{f}/e.yaml"]),
    "experiment million trials": ({"e.yaml": "name: s\ngrid:\n" + "".join(f"  p{i}: [{', '.join(map(str, range(10)))}]\n"
                                                                          for i in range(6)) + JOB},
                                  ["experiment", "render", "{f}/e.yaml"]),
    "experiment bad namespace": ({"e.yaml": 'name: s\nnamespace: "Bad NS!"\n' + JOB},
                                 ["experiment", "render", "{f}/e.yaml"]),
    "experiment share as string": ({"e.yaml": "name: s\nmaxRestarts: '3'\n" + JOB},
                                   ["experiment", "render", "{f}/e.yaml"]),
    "experiment not a mapping": ({"e.yaml": "[1, 2]\n"}, ["experiment", "render", "{f}/e.yaml"]),
    # --- workload submit and experiment submit: the file is judged before any cluster is asked
    "submit /dev/zero": ({}, ["workload", "submit", "/dev/zero"]),
    "submit a folder": ({}, ["workload", "submit", "{f}"]),
    "submit missing file": ({}, ["workload", "submit", "{f}/none.yaml"]),
    "submit duplicate keys": ({"w.yaml": "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nkind: Job\n"},
                              ["workload", "submit", "{f}/w.yaml"]),
    "submit a deployment": ({"w.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"},
                            ["workload", "submit", "{f}/w.yaml"]),
    "submit a jobset without a name": ({"w.yaml": "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
                                                  "metadata: {name: [1]}\nspec: {}\n"}, ["workload", "submit", "{f}/w.yaml"]),
    "submit a list": ({"w.yaml": "- 1\n- 2\n"}, ["workload", "submit", "{f}/w.yaml"]),
    "submit an empty file": ({"w.yaml": ""}, ["workload", "submit", "{f}/w.yaml"]),
    "submit bad experiment": ({"e.yaml": "name: s\nmaxRestarts: '3'\n" + JOB}, ["workload", "submit", "{f}/e.yaml"]),
    "experiment submit million trials": ({"e.yaml": "name: s\ngrid:\n" + "".join(
        f"  p{i}: [{', '.join(map(str, range(10)))}]\n" for i in range(7)) + JOB},
        ["experiment", "submit", "{f}/e.yaml"]),
    "submit unknown stack": ({"w.yaml": JOB.replace("jobs:", "name: w\njobs:")},
                             ["workload", "submit", "{f}/w.yaml", "--config", "{f}/Pulumi.none.yaml"]),
}


# --- issue 22's hostile cases: what a PR can put in a plan file, a workload file, a price file or an experiment


def plan_file(change: Callable[[dict], object] = lambda doc: None) -> str:
    """A plan file of one TPU node pool and one ClusterQueue, as `tpuplane plan -f json` writes one, changed."""
    doc = plan(node_pool("train-0"), cluster_queue())
    change(doc)
    return json.dumps(doc)


def pool_inputs(doc: dict) -> dict:
    return next(r["inputs"] for r in doc["resources"] if r["type"] == "gcp:container/nodePool:NodePool")


def queue_inputs(doc: dict) -> dict:
    return next(r["inputs"] for r in doc["resources"] if r["type"].endswith(":ClusterQueue"))


def diff_case(change: Callable[[dict], object], fmt: str) -> tuple[Files, list[str]]:
    return {"a.json": plan_file(), "b.json": plan_file(change)}, ["diff", "{f}/a.json", "{f}/b.json", "-f", fmt]


def workload(text: str, fmt: str = "table") -> tuple[Files, list[str]]:
    return {"w.yaml": text}, ["workload", "check", "{f}/w.yaml", "-f", fmt]


JOBSET_HEAD = "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
TPU_JOB = ("apiVersion: batch/v1\nkind: Job\nmetadata: {{name: x, labels: {{kueue.x-k8s.io/queue-name: "
           "multislice-queue}}}}\nspec:\n  template:\n    spec:\n      restartPolicy: Never\n"
           "      containers: [{{name: c, image: i, resources: {resources}}}]\n")
SECRET_JOB = ("name: s\njobs:\n  tpuType: v6e-16\n  image: img:1\n"
              "  command: 'curl -H \"Authorization: Bearer SECRETVALUE42\" https://x.invalid'\n")
CASES.update({
    # plan files whose read fields have the wrong type (AttributeError and exit 1 before), in every diff format
    "diff autoscaling a list": diff_case(lambda d: pool_inputs(d).update(autoscaling=[1]), "markdown"),
    "diff nodeConfig text": diff_case(lambda d: pool_inputs(d).update(nodeConfig="US\n```\n# HEADING\n<!--"),
                                      "text"),
    "diff labels a list": diff_case(lambda d: pool_inputs(d)["nodeConfig"].update(labels=["x"]), "json"),
    "diff cluster queue spec a list": diff_case(lambda d: queue_inputs(d).update(spec=[1]), "markdown"),
    "diff node count 10^30": diff_case(lambda d: pool_inputs(d).update(nodeCount=10**30), "text"),
    "diff urn empty": diff_case(lambda d: d["resources"][0].update(urn=""), "json"),
    "diff parent loop": diff_case(lambda d: [r.update(parent=r["urn"]) for r in d["resources"]], "markdown"),
    "diff float too large": ({"a.json": plan_file(), "b.json": plan_file().replace('"nodeCount": 4',
                                                                                   '"nodeCount": 1e400')},
                             ["diff", "{f}/a.json", "{f}/b.json"]),
    # workload files: the envelope the check reads, then the API server's own pod rules
    "workload check metadata null": workload(JOBSET_HEAD + "metadata: null\nspec: {}\n"),
    "workload check spec a list": workload(JOBSET_HEAD + "metadata: {name: x}\nspec: [1]\n", "json"),
    "workload check labels a list": workload(JOBSET_HEAD + "metadata: {name: x, labels: [x]}\nspec: {}\n"),
    "workload check unknown version": workload("apiVersion: jobset.x-k8s.io/v9\nkind: JobSet\nmetadata: {name: x}\n"
                                               "spec: {}\n", "json"),
    "workload check unknown group": workload("apiVersion: foo/v9\nkind: Job\nmetadata: {name: x}\nspec: {}\n"),
    "workload check no apiVersion": workload("kind: Job\nmetadata: {name: x}\nspec: {}\n"),
    "workload check tpu limit above request": workload(TPU_JOB.format(
        resources="{requests: {google.com/tpu: 4}, limits: {google.com/tpu: 8}}")),
    "workload check cpu request above limit": workload(TPU_JOB.format(
        resources="{requests: {cpu: 2}, limits: {cpu: 1}}"), "json"),
    "workload check cpu request 1e999999999": workload(TPU_JOB.format(resources="{requests: {cpu: '1e999999999'}}")),
    "workload check memory of 8Ei": workload(TPU_JOB.format(resources="{limits: {memory: 8Ei}}"), "json"),
    "workload check no containers": workload(TPU_JOB.format(resources="{}").replace(
        "[{name: c, image: i, resources: {}}]", "[]")),
    # price files: a typo would price nothing, silently
    "plan prices unknown generation": ({"prices.yaml": "chip_hour: {v7: {spot: 1.0}}\n"},
                                       ["plan", "--prices", "{f}/prices.yaml", "-f", "markdown"]),
    "plan prices unknown mode": ({"prices.yaml": "chip_hour: {v6e: {reserved: 1.0}}\n"},
                                 ["plan", "--prices", "{f}/prices.yaml", "-f", "html"]),
    "plan prices huge rate": ({"prices.yaml": "chip_hour: {v6e: {spot: 1e308}}\n"},
                              ["plan", "--prices", "{f}/prices.yaml"]),
    "diff prices not a number": ({"a.json": plan_file(), "b.json": plan_file(),
                                  "prices.yaml": "chip_hour: {v6e: {spot: cheap}}\n"},
                                 ["diff", "{f}/a.json", "{f}/b.json", "--prices", "{f}/prices.yaml"]),
    # experiments and workloads
    "experiment empty trials": ({"e.yaml": "name: s\ntrials: []\n" + JOB}, ["experiment", "render", "{f}/e.yaml"]),
    "experiment empty grid": ({"e.yaml": "name: s\ngrid: {}\n" + JOB}, ["experiment", "render", "{f}/e.yaml"]),
    "experiment max restarts over int32": ({"e.yaml": "name: s\nmaxRestarts: 1000000000000\n" + JOB},
                                           ["experiment", "render", "{f}/e.yaml"]),
    "experiment error quoting a job with a token": ({"e.yaml": SECRET_JOB}, ["experiment", "render", "{f}/e.yaml"]),
    "workload render max restarts over int32": ({}, ["workload", "render", "--tpu-type", "v6e-16", "--image", "i:1",
                                                     "--command", "x", "--max-restarts", "1000000000000"]),
    # the plan command in each of its formats
    "plan table bad config": ({"Pulumi.t.yaml": stack_with("maxSlices: 2", "maxSlices: [1]")},
                              ["plan", "--config", "{f}/Pulumi.t.yaml", "-f", "table"]),
    "plan json bad config": ({"Pulumi.t.yaml": stack_with("minSlices: 0", "minSlices: -1")},
                             ["plan", "--config", "{f}/Pulumi.t.yaml", "-f", "json"]),
    "diff text max length too small": ({"a.json": plan_file(), "b.json": plan_file()},
                                       ["diff", "{f}/a.json", "{f}/b.json", "--max-length", "10"]),
    "catalog json unknown type": ({}, ["catalog", "v99-16", "--json"]),
})


def write_files(folder: Path, files: Files) -> None:
    for name, content in files.items():
        if callable(content):
            content(folder)
        elif isinstance(content, bytes):
            (folder / name).write_bytes(content)
        else:
            (folder / name).write_text(content)


def run_case(tmp_path: Path, files: Files, args: list[str], env: dict[str, str] | None = None):
    write_files(tmp_path, files)
    argv = [arg.replace("{f}", str(tmp_path)) for arg in args]
    if argv[0] == "plan":
        argv[1:1] = ["--project-dir", str(REPO)]
    elif argv[:2] == ["workload", "check"]:
        argv[2:2] = ["--project-dir", str(REPO)]
    return CliRunner().invoke(app, argv, env={k: v.replace("{f}", str(tmp_path)) for k, v in (env or {}).items()})


def assert_refused(result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, result.stderr
    assert result.stdout == ""
    assert result.stderr.strip() and "Traceback" not in result.stderr
    assert "SECRETVALUE42" not in result.stderr


@pytest.mark.parametrize("case", sorted(CASES))
def test_cli_bad_input_exits_2_with_one_message_and_no_traceback(tmp_path, monkeypatch, case):
    monkeypatch.chdir(REPO)  # sidecar check's defaults are relative to the repository
    assert_refused(run_case(tmp_path, *CASES[case]))


KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: SECRETVALUE42}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""
RUNTIME_CASES = {
    "janitor without kubeconfig": ({}, ["janitor", "--dry-run"], {"KUBECONFIG": "{f}/none"}),
    "janitor malformed kubeconfig": ({"kc": "garbage: [\n"}, ["janitor", "--dry-run"], {"KUBECONFIG": "{f}/kc"}),
    "janitor unknown context": ({"kc": KUBECONFIG}, ["janitor", "--dry-run", "--context", "nope"],
                                {"KUBECONFIG": "{f}/kc"}),
    "workload list without kubeconfig": ({}, ["workload", "list"], {"KUBECONFIG": "{f}/none"}),
    "workload list malformed kubeconfig": ({"kc": "garbage: [\n"}, ["workload", "list"], {"KUBECONFIG": "{f}/kc"}),
    "queues unknown context": ({"kc": KUBECONFIG}, ["queues", "--context", "nope"], {"KUBECONFIG": "{f}/kc"}),
    "queues missing --kubeconfig file": ({}, ["queues", "--kubeconfig", "{f}/none"], {}),
    "status bad request timeout": ({"kc": KUBECONFIG}, ["workload", "status", "x", "--request-timeout", "soon"],
                                   {"KUBECONFIG": "{f}/kc"}),
    "list -n and -A": ({"kc": KUBECONFIG}, ["workload", "list", "-n", "a", "-A"], {"KUBECONFIG": "{f}/kc"}),
    "wait unknown state": ({"kc": KUBECONFIG}, ["workload", "wait", "x", "--for", "done"], {"KUBECONFIG": "{f}/kc"}),
    "wait bad timeout": ({"kc": KUBECONFIG}, ["workload", "wait", "x", "--for", "running", "--timeout", "1d"],
                         {"KUBECONFIG": "{f}/kc"}),
    "status name with a selector in it": ({"kc": KUBECONFIG}, ["workload", "status", "x,y=z"], {"KUBECONFIG": "{f}/kc"}),
    "logs name with a newline": ({"kc": KUBECONFIG}, ["workload", "logs", "x\ny"], {"KUBECONFIG": "{f}/kc"}),
    "list experiment with a selector in it": ({"kc": KUBECONFIG}, ["workload", "list", "--experiment", "a!=b"],
                                              {"KUBECONFIG": "{f}/kc"}),
    "list path in the namespace": ({"kc": KUBECONFIG}, ["workload", "list", "-n", "../kube-system"],
                                   {"KUBECONFIG": "{f}/kc"}),
    "logs negative slice": ({"kc": KUBECONFIG}, ["workload", "logs", "x", "--slice", "-1"], {"KUBECONFIG": "{f}/kc"}),
    "delete nothing selected": ({"kc": KUBECONFIG}, ["workload", "delete", "--yes"], {"KUBECONFIG": "{f}/kc"}),
    "submit the same jobset twice": ({"kc": KUBECONFIG, "w.yaml": "---\n".join(
        ["apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x, namespace: a}\nspec: {}\n"] * 2)},
        ["workload", "submit", "{f}/w.yaml"], {"KUBECONFIG": "{f}/kc"}),
    "submit -n disagreeing with the file": ({"kc": KUBECONFIG, "w.yaml": "apiVersion: jobset.x-k8s.io/v1alpha2\n"
                                             "kind: JobSet\nmetadata: {name: x, namespace: a}\nspec: {}\n"},
                                            ["workload", "submit", "{f}/w.yaml", "-n", "b"], {"KUBECONFIG": "{f}/kc"}),
    "sidecar run unknown module": ({}, ["sidecar", "run", "tpuplane_no_such_module:f"], {}),
    "sidecar run not a target": ({}, ["sidecar", "run", "notatarget"], {}),
    # the target's module is imported here: whatever it does while imported is one line and exit 2
    "sidecar run a path": ({"x.py": "def f():\n    return 1\n"}, ["sidecar", "run", "./x.py:f"], {}),
    "sidecar run a relative module": ({}, ["sidecar", "run", ".x:f"], {}),
    "sidecar run a module that does not compile": ({"tpuplane_hostile_syntax.py": "def f(:\n"},
                                                   ["sidecar", "run", "tpuplane_hostile_syntax:f"], {}),
    "sidecar run a module raising at import": ({"tpuplane_hostile_raises.py": "raise RuntimeError('token="
                                                "SECRETVALUE42')\n"}, ["sidecar", "run", "tpuplane_hostile_raises:f"],
                                               {}),
    "sidecar run a module exiting at import": ({"tpuplane_hostile_exits.py": "import sys\nsys.exit(0)\n"},
                                               ["sidecar", "run", "tpuplane_hostile_exits:f"], {}),
    "queues json unknown context": ({"kc": KUBECONFIG}, ["queues", "-f", "json", "--context", "nope"],
                                    {"KUBECONFIG": "{f}/kc"}),
    "list json without kubeconfig": ({}, ["workload", "list", "-f", "json"], {"KUBECONFIG": "{f}/none"}),
    # the sandbox's commands refuse before anything starts
    "sandbox status unknown format": ({}, ["sandbox", "status", "--format", "yaml", "--dir", "{f}/none"], {}),
    "sandbox status json without a sandbox": ({}, ["sandbox", "status", "-f", "json", "--dir", "{f}/none"], {}),
    "sandbox status a file as its folder": ({"file": "x\n"}, ["sandbox", "status", "--dir", "{f}/file"], {}),
    "sandbox down a file as its folder": ({"file": "x\n"}, ["sandbox", "down", "--dir", "{f}/file"], {}),
    "sandbox up a file as its folder": ({"file": "x\n"}, ["sandbox", "up", "--project-dir", str(REPO), "--dir",
                                                          "{f}/file"], {}),
    "sandbox build an argument": ({}, ["sandbox", "build", "extra"], {}),
    "why name with a selector in it": ({"kc": KUBECONFIG}, ["workload", "why", "x,y=z"], {"KUBECONFIG": "{f}/kc"}),
    "status json name with a selector in it": ({"kc": KUBECONFIG}, ["workload", "status", "x,y=z", "-f", "json"],
                                               {"KUBECONFIG": "{f}/kc"}),
}


@pytest.mark.parametrize("case", sorted(RUNTIME_CASES))
def test_cli_bad_input_runtime_commands_exit_2_without_traceback(tmp_path, monkeypatch, case):
    monkeypatch.chdir(tmp_path)  # sidecar run imports its target from the current directory
    assert_refused(run_case(tmp_path, *RUNTIME_CASES[case]))


def commands(command=None, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple[tuple[str, ...], str | None]]:
    """Every command of `tpuplane` (by its words), with the choices and the default of its `--format` (none and
    None without one)."""
    import typer

    command = command or typer.main.get_command(app)
    subcommands = getattr(command, "commands", {})
    if subcommands:
        return {found: formats for name, sub in subcommands.items()
                for found, formats in commands(sub, (*path, name)).items()}
    option = next((p for p in command.params if "--format" in getattr(p, "opts", ())), None)
    if option is None:
        return {path: ((), None)}
    default, kind = getattr(option.default, "value", option.default), option.type_descriptor.annotation
    choices = tuple(choice.value for choice in kind) if isinstance(kind, type) and issubclass(kind, Enum) else (default,)
    return {path: (choices, default)}


def covered() -> set[tuple[tuple[str, ...], str | None]]:
    """(command, format) of every case of the corpus; a case without -f runs the command's default format."""
    known = commands()
    found = set()
    for _, argv, *_ in [*CASES.values(), *RUNTIME_CASES.values()]:
        command = next(c for c in sorted(known, key=len, reverse=True) if tuple(argv[:len(c)]) == c)
        flags = [argv[i + 1] for i, arg in enumerate(argv[:-1]) if arg in ("-f", "--format")]
        found.add((command, flags[0] if flags else known[command][1]))
    return found


def test_every_format_option_is_a_choice():
    """A `--format` typed as text is refused by each command in its own words, and the corpus cannot see its
    formats; a choice (an Enum) is refused by typer, like every other command's."""
    assert [" ".join(command) for command, (choices, default) in commands().items() if choices == (default,)] == []


def test_cli_bad_input_corpus_covers_every_command_and_every_output_format():
    """A command or output format added later without a bad-input case fails here."""
    seen = covered()
    missing = [(" ".join(command), fmt) for command, (choices, _) in commands().items()
               for fmt in (choices or (None,)) if (command, fmt) not in seen]
    assert missing == []
