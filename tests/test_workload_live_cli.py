"""The day-two commands end to end through the real `kubernetes` client: a cluster that cannot be used gets one
line on stderr and exit 2, never a traceback or a hang; reads and writes go where they should.

The unreachable and stalled API servers are real sockets. Everything that needs an API server to answer uses
`standin_api` (objects as `recorded_kueue` writes them, the API server's own Status bodies), so that the unit tier
covers every command and every failure quickly; the e2e tier runs the same commands against the real control
plane of `tpuplane sandbox` (tests/e2e/test_day_two.py, test_day_two_cohort.py), and holds the recorded objects
against what it returns. `logs` needs a kubelet, which the sandbox does not have: its stream is tested here, against
the stand-in, and nowhere else.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

import recorded_kueue as rk
from standin_api import not_found, object_list, standin_api, status, write_kubeconfig
from tpuplane.cli.main import app
from tpuplane.infra.batch.workload import DEFAULT_TTL
from tpuplane.infra.batch.queue_usage import QUEUES_SCHEMA
from tpuplane.infra.batch.workload_state import LIST_SCHEMA
from tpuplane.infra.batch.workload_status import STATUS_SCHEMA

JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/team-a/jobsets"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
SHORT = rk.short_of_quota("slice", 32, 32)  # as Kueue writes it for a tpuplane ClusterQueue

# Every live command, as a user would type it (the kubeconfig is appended).
LIVE_COMMANDS = {
    "list": ["workload", "list"],
    "list -A": ["workload", "list", "-A", "-f", "json"],
    "status": ["workload", "status", "a-big"],
    "why": ["workload", "why", "a-big"],
    "wait": ["workload", "wait", "a-big", "--for", "admitted", "--timeout", "3s"],
    "delete": ["workload", "delete", "a-big", "--yes"],
    "logs": ["workload", "logs", "a-big"],
    "queues": ["queues"],
    "submit": ["workload", "submit", "{jobsets}", "--force"],
}


def tpuplane(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def jobsets_file(tmp_path) -> Path:
    path = tmp_path / "jobsets.yaml"
    import yaml

    jobset = rk.jobset("a-new", "team-a", queue="team-a")
    for key in ("uid", "resourceVersion", "generation", "creationTimestamp"):
        del jobset["metadata"][key]
    del jobset["status"]
    path.write_text(yaml.safe_dump(jobset))
    return path


def command(name: str, kubeconfig: Path, jobsets: Path, *extra: str) -> list[str]:
    return [a.replace("{jobsets}", str(jobsets)) for a in LIVE_COMMANDS[name]] + ["--kubeconfig", str(kubeconfig),
                                                                                  *extra]


def assert_one_line_error(result, starts: str) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(starts), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed when the fixture returns: nothing listens there


@pytest.mark.parametrize("name", list(LIVE_COMMANDS))
def test_live_command_on_an_unreachable_cluster_says_so_in_one_line(name, tmp_path, closed_port, jobsets_file):
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", closed_port)

    result = tpuplane(*command(name, kubeconfig, jobsets_file))

    line = assert_one_line_error(result, f"error: cannot reach the Kubernetes API server http://127.0.0.1:{closed_port}")
    assert "connection was refused" in line


@pytest.mark.parametrize("name", ["list", "queues", "status"])
def test_live_command_on_a_stalled_cluster_gives_up_after_the_request_timeout(name, tmp_path, silent_port,
                                                                              jobsets_file):
    """A real process: were a request unbounded, it would hang until `timeout` kills it and the test fails."""
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", silent_port)
    argv = command(name, kubeconfig, jobsets_file, "--request-timeout", "1s")

    proc = subprocess.run([sys.executable, "-c", "from tpuplane.cli.main import app; app(prog_name='tpuplane')",
                           *argv], capture_output=True, text=True, timeout=60)

    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr.startswith("error: cannot reach the Kubernetes API server") and proc.stderr.count("\n") == 1
    assert "did not answer within 1s" in proc.stderr


@pytest.fixture
def standin(tmp_path):
    with standin_api(tmp_path) as api:
        yield api


@pytest.mark.parametrize("name", list(LIVE_COMMANDS))
def test_live_command_with_rejected_credentials(name, standin, jobsets_file):
    standin.everything = (401, status(401, "Unauthorized", "Unauthorized"))

    result = tpuplane(*command(name, standin.kubeconfig, jobsets_file))

    assert_one_line_error(result, f"error: the Kubernetes API server http://127.0.0.1:{standin.port} rejected the "
                                  "credentials (401 Unauthorized): they are missing, wrong or expired.")


@pytest.mark.parametrize("name", list(LIVE_COMMANDS))
def test_live_command_forbidden_by_rbac_quotes_what_was_refused(name, standin, jobsets_file):
    message = ('jobsets.jobset.x-k8s.io is forbidden: User "alice@acme.com" cannot list resource "jobsets" in API '
               'group "jobset.x-k8s.io" in the namespace "team-a"')
    standin.everything = (403, status(403, "Forbidden", message, {"group": "jobset.x-k8s.io", "kind": "jobsets"}))

    result = tpuplane(*command(name, standin.kubeconfig, jobsets_file))

    line = assert_one_line_error(result, "error: forbidden: ")
    assert message in line and "RBAC" in line


@pytest.mark.parametrize("name", ["list", "list -A", "queues", "status", "wait"])
def test_live_command_without_kueue_installed_says_so(name, standin, jobsets_file):
    """JobSet is served, Kueue's types are not: their lists come back 404 without an object name."""
    standin.serve(JOBSETS, object_list("JobSet", [rk.jobset("a-big", "team-a", queue="team-a")]))
    standin.serve("/apis/jobset.x-k8s.io/v1alpha2/jobsets", object_list("JobSet", []))
    standin.serve(f"{JOBSETS}/a-big", rk.jobset("a-big", "team-a", queue="team-a"))

    result = tpuplane(*command(name, standin.kubeconfig, jobsets_file))

    line = assert_one_line_error(result, f"error: the cluster http://127.0.0.1:{standin.port} does not serve ")
    assert "kueue.x-k8s.io/v1beta2: Kueue (>= 0.15" in line and "is not installed" in line


def test_a_missing_workload_name_is_bad_input(standin, jobsets_file):
    standin.serve(f"{JOBSETS}/a-big", not_found("jobsets", "jobset.x-k8s.io", "a-big"), 404)

    result = tpuplane(*command("why", standin.kubeconfig, jobsets_file))

    assert_one_line_error(result, "error: NAME: got 'a-big'; allowed: a JobSet in namespace team-a")


# ---------------------------------------------------------------------------------------------------------------
# Reads against the stand-in


@pytest.fixture
def world(standin):
    """team-a runs a-train and waits with a-big (quota); the stand-in serves them as the API server would."""
    a_train = rk.jobset("a-train", "team-a", queue="team-a", slices=2, ready=2, created=30)
    a_big = rk.jobset("a-big", "team-a", queue="team-a", priority="high", slices=2, suspend=True, created=3)
    workloads = [rk.workload(a_train, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a"),
                 rk.workload(a_big, conditions=rk.pending_conditions(SHORT))]
    standin.serve(JOBSETS, object_list("JobSet", [a_train, a_big]))
    standin.serve(f"{JOBSETS}/a-big", a_big)
    standin.serve(WORKLOADS, object_list("Workload", workloads))
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/workloads", object_list("Workload", workloads))
    queues = [rk.local_queue("team-a", "team-a", "team-a", used=32, admitted=1, pending=1)]
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues", object_list("LocalQueue", queues))
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/localqueues", object_list("LocalQueue", queues))
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", object_list("ClusterQueue", rk.team_queues()))
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/resourceflavors", object_list("ResourceFlavor", [rk.resource_flavor()]))
    standin.serve("/api/v1/nodes", object_list("Node", rk.fleet_nodes()))
    standin.serve("/api/v1/namespaces/team-a/pods", object_list("Pod", [rk.pod(a_train, s, w) for s in range(2)
                                                                        for w in range(4)]))
    standin.serve("/api/v1/namespaces/team-a/events", object_list("Event", [
        rk.event(workloads[1], "Workload", "Pending", SHORT, event_type="Warning", count=12)]))
    return standin


def test_list_reads_jobsets_workloads_queues_and_pods_and_writes_nothing(world):
    result = tpuplane("workload", "list", "--kubeconfig", str(world.kubeconfig), "-f", "json")

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(LIST_SCHEMA).validate(document)
    assert [(i["name"], i["state"], i["reason"]) for i in document["items"]] == [
        ("a-train", "running", None), ("a-big", "pending", "WaitingForQuota")]
    assert {r.method for r in world.requests} == {"GET"}
    assert {r.path for r in world.requests} >= {JOBSETS, WORKLOADS, "/api/v1/namespaces/team-a/pods"}


def test_list_table_for_people(world):
    result = tpuplane("workload", "list", "--kubeconfig", str(world.kubeconfig))

    header, *rows = result.stdout.splitlines()
    assert header.split() == ["NAME", "TEAM/QUEUE", "PRIORITY", "STATE", "FLAVOR", "PODS", "RESTARTS", "AGE"]
    assert rows[1].split()[:5] == ["a-big", "team-a/team-a", "high", "(750)", "pending"]


def test_why_explains_from_what_the_cluster_holds(world):
    result = tpuplane("workload", "why", "a-big", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("team-a/a-big: pending (WaitingForQuota)\n- pod set slice: waiting for quota: "
                                    f"it needs 32 more {rk.TPU} in flavor {rk.FLAVOR} than ClusterQueue team-a")
    assert "Its cohort tpuplane could lend 0 more now" in " ".join(result.stdout.split())


def test_status_shows_conditions_admission_slices_events_and_why(world):
    result = tpuplane("workload", "status", "a-big", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    out = result.stdout
    for part in ("Conditions", "QuotaReserved", "Admission", "none: it holds no quota", "Slices", "Events",
                 "Warning Pending: couldn't assign flavors", "(x12)", "Why", "waiting for quota"):
        assert part in out, part


def test_tables_into_a_pipe_keep_each_row_on_one_line_however_wide(world):
    """kubectl never wraps a row: a script greps a row and finds all of it (the message is 280 characters)."""
    result = tpuplane("workload", "status", "a-big", "--kubeconfig", str(world.kubeconfig))

    (row,) = [line for line in result.stdout.splitlines() if line.startswith("Workload") and "QuotaReserved" in line]
    assert row.split()[:4] == ["Workload", "QuotaReserved", "False", "Pending"]
    assert row.rstrip().endswith(SHORT)


def test_status_json_follows_its_schema(world):
    result = tpuplane("workload", "status", "a-big", "-f", "json", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(STATUS_SCHEMA).validate(document)
    assert (document["workload"]["reason"], document["admission"]) == ("WaitingForQuota", None)
    assert [(s["slice"], s["expectedPods"]) for s in document["slices"]] == [(0, 4), (1, 4)]
    assert document["events"][0]["count"] == 12 and document["why"][0]["kind"] == "quota"


def test_status_json_of_an_admitted_running_workload_follows_its_schema(world):
    world.serve(f"{JOBSETS}/a-train", rk.jobset("a-train", "team-a", queue="team-a", slices=2, ready=2, created=30))

    result = tpuplane("workload", "status", "a-train", "-f", "json", "--kubeconfig", str(world.kubeconfig))

    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(STATUS_SCHEMA).validate(document)
    assert document["admission"]["clusterQueue"] == "team-a"
    assert all(isinstance(v, (int, float)) for p in document["admission"]["podSets"]
               for v in p["resourceUsage"].values())


def test_queues_tables_and_json(world):
    table = tpuplane("queues", "--kubeconfig", str(world.kubeconfig))
    document = json.loads(tpuplane("queues", "--kubeconfig", str(world.kubeconfig), "-f", "json").stdout)

    assert table.exit_code == 0, table.output
    jsonschema.Draft202012Validator(QUEUES_SCHEMA).validate(document)
    assert "ClusterQueues (google.com/tpu)" in table.stdout and "Cohorts (google.com/tpu)" in table.stdout
    assert [q["name"] for q in document["clusterQueues"]] == ["team-a", "team-b", "unassigned"]


def test_queues_for_a_team_the_cluster_does_not_have(world):
    result = tpuplane("queues", "--team", "team-z", "--kubeconfig", str(world.kubeconfig))

    assert_one_line_error(result, "error: --team: got 'team-z'; allowed: a ClusterQueue of the cluster: team-a, "
                                  "team-b, unassigned")


@pytest.fixture
def cpu_only(standin):
    """A cluster whose one ClusterQueue holds CPU quota and no TPU chips."""
    queue = rk.cluster_queue("batch", 32)
    queue["spec"]["resourceGroups"] = [{"coveredResources": ["cpu"], "flavors": [
        {"name": rk.CPU_FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "48"}]}]}]
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", object_list("ClusterQueue", [queue]))
    standin.serve("/apis/kueue.x-k8s.io/v1beta2/localqueues", object_list("LocalQueue", []))
    return standin


def test_queues_json_of_a_cluster_without_tpu_quota(cpu_only):
    result = tpuplane("queues", "--kubeconfig", str(cpu_only.kubeconfig), "-f", "json")

    assert result.exit_code == 0, result.output
    assert [q["name"] for q in json.loads(result.stdout)["clusterQueues"]] == ["batch"]


def test_queues_tables_of_a_cluster_without_tpu_quota_show_what_it_holds(cpu_only):
    result = tpuplane("queues", "--kubeconfig", str(cpu_only.kubeconfig))

    assert result.exit_code == 0, result.output
    assert "ClusterQueues (cpu)" in result.stdout


def test_queues_for_a_resource_no_queue_covers(world):
    result = tpuplane("queues", "--resource", "nvidia.com/gpu", "--kubeconfig", str(world.kubeconfig))

    assert_one_line_error(result, "error: --resource: got 'nvidia.com/gpu'; allowed: a resource the ClusterQueues "
                                  "cover: cpu, google.com/tpu, memory")


# ---------------------------------------------------------------------------------------------------------------
# submit: checked on the cluster's own queues and nodes, then server-side applied


def test_submit_checks_then_applies_server_side_as_tpuplane(world, jobsets_file):
    world.serve(f"{JOBSETS}/a-new", not_found("jobsets", "jobset.x-k8s.io", "a-new"), 404)
    world.serve(f"{JOBSETS}/a-new", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}, method="PATCH")

    result = tpuplane("workload", "submit", str(jobsets_file), "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    assert result.stdout == "jobset.jobset.x-k8s.io/team-a/a-new submitted\n"
    (apply,) = [r for r in world.requests if r.method == "PATCH"]
    assert (apply.path, apply.content_type) == (f"{JOBSETS}/a-new", "application/apply-patch+yaml")
    assert apply.query == {"fieldManager": ["tpuplane"]}
    assert apply.body["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert {"/api/v1/nodes", "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"} <= {r.path for r in world.requests}


def test_submit_server_dry_run_stores_nothing(world, jobsets_file):
    world.serve(f"{JOBSETS}/a-new", not_found("jobsets", "jobset.x-k8s.io", "a-new"), 404)
    world.serve(f"{JOBSETS}/a-new", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}, method="PATCH")

    result = tpuplane("workload", "submit", str(jobsets_file), "--dry-run", "server",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    assert [r.query["dryRun"] for r in world.requests if r.method == "PATCH"] == [["All"]]


def test_submit_refused_by_an_admission_webhook_is_not_called_forbidden_by_rbac(world, jobsets_file):
    """controller-runtime's webhooks deny with 403 (the body as the sandbox's API server returned it)."""
    message = ('admission webhook "vjobset.kb.io" denied the request: metadata.labels[kueue.x-k8s.io/queue-name]: '
               'Invalid value: "Team_A": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
               "characters, '-' or '.'")
    world.serve(f"{JOBSETS}/a-new", not_found("jobsets", "jobset.x-k8s.io", "a-new"), 404)
    world.serve(f"{JOBSETS}/a-new", {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                     "message": message, "reason": "Forbidden", "code": 403}, 403, method="PATCH")

    result = tpuplane("workload", "submit", str(jobsets_file), "--kubeconfig", str(world.kubeconfig))

    line = assert_one_line_error(result, "error: apply JobSet team-a/a-new: the API server refused it: admission "
                                         'webhook "vjobset.kb.io" denied the request: ')
    assert "RBAC" not in line


@pytest.mark.parametrize("code, reason", [(409, "Conflict"), (500, "InternalError"), (503, "ServiceUnavailable")])
def test_submit_failed_by_the_api_server_is_one_line_and_exit_1(world, jobsets_file, code, reason):
    """The action failed, the input was fine: kubectl's exit 1 (a 409 is another manager's field, a 5xx the
    server's own failure)."""
    world.serve(f"{JOBSETS}/a-new", not_found("jobsets", "jobset.x-k8s.io", "a-new"), 404)
    world.serve(f"{JOBSETS}/a-new", status(code, reason, "try again later"), code, method="PATCH")

    result = tpuplane("workload", "submit", str(jobsets_file), "--kubeconfig", str(world.kubeconfig))

    assert (result.exit_code, result.stdout) == (1, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: apply JobSet team-a/a-new: ") and "try again later" in line


def test_submit_refuses_what_could_never_run_with_the_checks_reasons(world, tmp_path):
    import yaml

    jobset = rk.jobset("a-huge", "team-a", queue="team-a", slices=5)
    (tmp_path / "huge.yaml").write_text(yaml.safe_dump({k: jobset[k] for k in ("apiVersion", "kind", "spec")}
                                                       | {"metadata": {"name": "a-huge", "namespace": "team-a",
                                                                       "labels": jobset["metadata"]["labels"]}}))

    result = tpuplane("workload", "submit", str(tmp_path / "huge.yaml"), "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 1
    assert "team-a/a-huge: slice: no flavor fits" in result.stderr and "google.com/tpu 80 > 64" in result.stderr
    assert "(--force submits anyway)" in result.stderr
    assert [r for r in world.requests if r.method != "GET"] == []


def test_submit_whose_check_may_not_read_the_nodes_says_how_to_check_otherwise(world, jobsets_file):
    world.serve("/api/v1/nodes", status(403, "Forbidden", 'nodes is forbidden: User "alice" cannot list resource '
                                                          '"nodes" in API group "" at the cluster scope'), 403)

    result = tpuplane("workload", "submit", str(jobsets_file), "--kubeconfig", str(world.kubeconfig))

    line = assert_one_line_error(result, "error: the check before submitting reads the cluster's queues and nodes, "
                                         "and RBAC forbids it: nodes is forbidden")
    assert "--stack or --config" in line and "--force" in line


def test_submit_says_when_the_name_is_taken(world, jobsets_file):
    world.serve(f"{JOBSETS}/a-new", rk.jobset("a-new", "team-a", queue="team-a"))

    result = tpuplane("workload", "submit", str(jobsets_file), "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 1
    assert "team-a/a-new: a JobSet of that name exists, and its spec cannot be changed" in result.stderr
    assert [r for r in world.requests if r.method != "GET"] == []


def test_submit_an_experiment_skips_trials_already_there(world, tmp_path):
    from tpuplane.infra.batch.experiments import ExperimentSpec, render_experiment

    spec = {"name": "lr", "queue": "team-a", "namespace": "team-a", "grid": {"lr": [0.1, 0.2]},
            "ttlSecondsAfterFinished": DEFAULT_TTL,  # as submit renders it
            "jobs": [{"tpuType": "v6e-16", "image": "img:1", "command": "python train.py"}]}
    import yaml

    (tmp_path / "lr.yaml").write_text(yaml.safe_dump(spec))
    first, second = render_experiment(ExperimentSpec.model_validate(spec))
    world.serve(f"{JOBSETS}/{first['metadata']['name']}", first)
    second_name = second["metadata"]["name"]
    world.serve(f"{JOBSETS}/{second_name}", not_found("jobsets", "jobset.x-k8s.io", second_name), 404)
    world.serve(f"{JOBSETS}/{second_name}", second, method="PATCH")

    result = tpuplane("experiment", "submit", str(tmp_path / "lr.yaml"), "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    assert f"{first['metadata']['name']}: already submitted (same trial)" in result.stderr
    assert [r.path.rsplit("/", 1)[1] for r in world.requests if r.method == "PATCH"] == [second_name]


def test_submit_refuses_a_trial_whose_experiment_changed_since_it_was_submitted(world, tmp_path):
    """A trial's name hashes its parameters only: an edited template (here the image) is the same name, another
    spec, which a resubmit must not silently skip."""
    from tpuplane.infra.batch.experiments import ExperimentSpec, render_experiment
    import yaml

    spec = {"name": "lr", "queue": "team-a", "namespace": "team-a", "grid": {"lr": [0.1]},
            "ttlSecondsAfterFinished": DEFAULT_TTL,
            "jobs": [{"tpuType": "v6e-16", "image": "img:1", "command": "python train.py"}]}
    (submitted,) = render_experiment(ExperimentSpec.model_validate(spec))
    world.serve(f"{JOBSETS}/{submitted['metadata']['name']}", submitted)
    spec["jobs"][0]["image"] = "img:2"
    (tmp_path / "lr.yaml").write_text(yaml.safe_dump(spec))

    result = tpuplane("experiment", "submit", str(tmp_path / "lr.yaml"), "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 1
    assert f"{submitted['metadata']['name']}: this trial was submitted with another spec" in result.stderr
    assert [r for r in world.requests if r.method == "PATCH"] == []


# ---------------------------------------------------------------------------------------------------------------
# delete and wait: input and confirmation


def test_delete_without_a_terminal_and_without_yes_refuses_and_deletes_nothing(world):
    result = tpuplane("workload", "delete", "a-big", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 2
    assert "deleting 1 workload needs a confirmation, and there is no terminal to ask on. Hint: pass --yes" \
        in result.stderr
    assert [r for r in world.requests if r.method == "DELETE"] == []


@pytest.mark.parametrize("answer, deleted", [("n\n", 0), ("\n", 0), ("y\n", 1)])
def test_delete_at_a_terminal_asks_and_deletes_only_on_yes(world, monkeypatch, answer, deleted):
    import tpuplane.cli.workload_live as live

    monkeypatch.setattr(live, "interactive", lambda: True)
    world.serve(f"{JOBSETS}/a-big", {"kind": "Status", "apiVersion": "v1", "status": "Success"}, method="DELETE")

    result = CliRunner().invoke(app, ["workload", "delete", "a-big", "--kubeconfig", str(world.kubeconfig)],
                                input=answer)

    assert result.exit_code == 0, result.output
    assert "Delete 1 workload? [y/N]" in result.stderr
    assert len([r for r in world.requests if r.method == "DELETE"]) == deleted


def test_delete_interrupted_at_the_question_deletes_nothing_and_exits_130(world, monkeypatch):
    """Ctrl-C at the question (the prompt turns it, like the end of input, into Abort) is an interruption, as it is
    anywhere else in the live commands; it used to end with "Aborted!" and exit 1."""
    import tpuplane.cli.workload_live as live

    monkeypatch.setattr(live, "interactive", lambda: True)

    result = CliRunner().invoke(app, ["workload", "delete", "a-big", "--kubeconfig", str(world.kubeconfig)],
                                input="")

    assert result.exit_code == 130, result.output
    assert result.stderr.splitlines()[-1] == "interrupted: nothing deleted"
    assert [r for r in world.requests if r.method == "DELETE"] == []


def test_delete_with_yes_deletes_the_jobset_in_the_background(world):
    world.serve(f"{JOBSETS}/a-big", {"kind": "Status", "apiVersion": "v1", "status": "Success"}, method="DELETE")

    result = tpuplane("workload", "delete", "a-big", "--yes", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    (delete,) = [r for r in world.requests if r.method == "DELETE"]
    assert (delete.path, delete.query) == (f"{JOBSETS}/a-big", {"propagationPolicy": ["Background"]})


def test_delete_forbidden_by_rbac_is_one_line_and_exit_2_like_any_forbidden_request(world):
    message = 'jobsets.jobset.x-k8s.io "a-big" is forbidden: User "alice" cannot delete resource "jobsets"'
    world.serve(f"{JOBSETS}/a-big", status(403, "Forbidden", message), 403, method="DELETE")

    result = tpuplane("workload", "delete", "a-big", "--yes", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 2
    assert result.stdout.splitlines()[0].split()[0] == "NAME"  # the table of what was selected
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: forbidden: {message}") and "RBAC" in line


def test_delete_the_api_server_fails_is_reported_per_workload_with_exit_1(world):
    world.serve(f"{JOBSETS}/a-big", status(500, "InternalError", "etcdserver: request timed out"), 500,
                method="DELETE")

    result = tpuplane("workload", "delete", "a-big", "--yes", "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 1
    assert result.stderr.startswith("x team-a/a-big: ") and "etcdserver: request timed out" in result.stderr


def test_delete_needs_a_name_or_a_filter(world):
    result = tpuplane("workload", "delete", "--yes", "--kubeconfig", str(world.kubeconfig))

    assert_one_line_error(result, "error: nothing selected")


def test_delete_refuses_a_name_that_is_not_there(world):
    result = tpuplane("workload", "delete", "a-bigg", "--yes", "--kubeconfig", str(world.kubeconfig))

    assert_one_line_error(result, "error: NAMES: got ['a-bigg']")


@pytest.mark.parametrize("flags, hint", [
    (["-A"], "Hint: drop -A, use -n"),
    (["--team", "team-a"], "Hint: --team without -n searches every namespace: add -n NAMESPACE, or drop the names"),
])
def test_delete_by_name_across_namespaces_hints_at_what_was_typed(world, flags, hint):
    result = tpuplane("workload", "delete", "a-big", *flags, "--yes", "--kubeconfig", str(world.kubeconfig))

    line = assert_one_line_error(result, "error: NAMES: got ['a-big']; allowed: names in one namespace")
    assert line.endswith(hint)
    assert ("-A" in line) == ("-A" in flags)


def test_delete_by_name_for_a_team_in_one_namespace(world):
    world.serve(f"{JOBSETS}/a-big", {"kind": "Status", "apiVersion": "v1", "status": "Success"}, method="DELETE")

    result = tpuplane("workload", "delete", "a-big", "--team", "team-a", "-n", "team-a", "--yes",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    assert [r.path for r in world.requests if r.method == "DELETE"] == [f"{JOBSETS}/a-big"]


@pytest.mark.parametrize("args", [["--timeout", "soon"], ["--timeout", "-1s"], ["--for", "done"]])
def test_wait_bad_input_exits_2_before_any_request(world, args):
    base = {"--for": "admitted", "--timeout": "1s"}
    base.update(dict(zip(args[::2], args[1::2])))

    result = tpuplane("workload", "wait", "a-big", *[x for kv in base.items() for x in kv],
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 2
    assert world.requests == []


def test_wait_times_out_with_exit_124_and_says_where_it_is(world):
    result = tpuplane("workload", "wait", "a-big", "--for", "running", "--timeout", "0.2s",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 124
    assert "timed out after 0.2s waiting for a-big to be running: it is pending (WaitingForQuota)" in result.stderr


def test_wait_on_a_server_slower_than_what_is_left_of_the_timeout_still_times_out(world):
    """The last reads get only what is left of --timeout: a remote server slower than that ends in 124, not in
    'unreachable' (exit 2)."""
    world.latency = 0.3

    result = tpuplane("workload", "wait", "a-big", "--for", "running", "--timeout", "1s",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 124, result.output
    assert "timed out after 1s waiting for a-big to be running" in result.stderr


def test_wait_still_pending_at_the_timeout_exits_124(world):
    result = tpuplane("workload", "wait", "a-big", "--for", "admitted", "--timeout", "2s",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 124  # a-big never gets admitted on the stand-in


def test_wait_reached_exits_0(world):
    world.serve(f"{JOBSETS}/a-train", rk.jobset("a-train", "team-a", queue="team-a", ready=2))

    result = tpuplane("workload", "wait", "a-train", "--for", "admitted", "--timeout", "5s",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 0, result.output
    assert "a-train is running" in result.stderr


def test_wait_on_a_failed_workload_exits_125(world):
    world.serve(f"{JOBSETS}/a-big", rk.jobset("a-big", "team-a", queue="team-a", conditions=(rk.failed(),)))

    result = tpuplane("workload", "wait", "a-big", "--for", "finished", "--timeout", "5s",
                      "--kubeconfig", str(world.kubeconfig))

    assert result.exit_code == 125
    assert "a-big ended failed (FailedJobs)" in result.stderr


def test_ctrl_c_during_wait_exits_130_with_one_line(world):
    """A real process and a real SIGINT, as a shell sends it on Ctrl-C (with the handler a shell gives)."""
    argv = ["workload", "wait", "a-big", "--for", "running", "--timeout", "10m", "--kubeconfig", str(world.kubeconfig)]
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, "
                             "signal.default_int_handler); from tpuplane.cli.main import app; "
                             "app(prog_name='tpuplane')", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        waiting = proc.stderr.readline()  # a line per change without a terminal: it is waiting now
        # rich clears its buffer just after writing the line: a SIGINT inside that instant writes the line again
        # as the spinner closes (seen under load). The Ctrl-C this test means lands while it polls.
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()

    assert waiting == "a-big: pending (WaitingForQuota)\n"
    assert (proc.returncode, out, err) == (130, "", "interrupted\n")


def test_ctrl_c_during_logs_follow_exits_130_after_what_was_printed(standin, monkeypatch):
    """The kubelet's stream is a stand-in (as below); Ctrl-C arrives while it waits for the next line."""
    from tpuplane.runtime.batch_api import BatchApi

    def stream_then_ctrl_c(*args, **kwargs):
        yield b"step 1\n"
        raise KeyboardInterrupt

    a_train = rk.jobset("a-train", "team-a", queue="team-a")
    standin.serve("/api/v1/namespaces/team-a/pods", object_list("Pod", [rk.pod(a_train, 0, 0)]))
    monkeypatch.setattr(BatchApi, "stream_log", stream_then_ctrl_c)

    result = tpuplane("workload", "logs", "a-train", "-f", "--kubeconfig", str(standin.kubeconfig))

    assert (result.exit_code, result.stdout, result.stderr) == (130, "step 1\n", "interrupted\n")


# ---------------------------------------------------------------------------------------------------------------
# logs: a kubelet's stream, from the stand-in (no kubelet can run here)


def test_logs_reads_the_pod_of_the_slice_and_worker_asked_for(standin):
    """A stand-in on purpose: a pod's log comes from its node's kubelet, and the sandbox's nodes (kwok) have none."""
    a_train = rk.jobset("a-train", "team-a", queue="team-a", slices=2)
    pods = [rk.pod(a_train, s, w) for s in range(2) for w in range(4)]
    standin.serve("/api/v1/namespaces/team-a/pods", object_list("Pod", pods))
    wanted = next(p for p in pods if p["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1"
                  and p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] == "2")
    log_path = f"/api/v1/namespaces/team-a/pods/{wanted['metadata']['name']}/log"
    standin.serve(log_path, b"step 1 loss 2.3\nstep 2 loss 1.9\n")

    result = tpuplane("workload", "logs", "a-train", "--slice", "1", "--worker", "2", "--tail", "2",
                      "--kubeconfig", str(standin.kubeconfig))

    assert result.exit_code == 0, result.output
    assert result.stdout == "step 1 loss 2.3\nstep 2 loss 1.9\n"
    (request,) = [r for r in standin.requests if r.path == log_path]
    assert request.query == {"container": ["jax-tpu"], "follow": ["false"], "tailLines": ["2"]}


def test_logs_follow_streams_until_the_server_ends_it(standin):
    """A stand-in, as above. Following must not give the client a read timeout it refuses (it once raised a
    traceback for `(connect, None)`)."""
    a_train = rk.jobset("a-train", "team-a", queue="team-a")
    pod = rk.pod(a_train, 0, 0)
    standin.serve("/api/v1/namespaces/team-a/pods", object_list("Pod", [pod]))
    log_path = f"/api/v1/namespaces/team-a/pods/{pod['metadata']['name']}/log"
    standin.serve(log_path, b"step 1\nstep 2\n")

    result = tpuplane("workload", "logs", "a-train", "-f", "--kubeconfig", str(standin.kubeconfig))

    assert (result.exit_code, result.stdout) == (0, "step 1\nstep 2\n")
    (request,) = [r for r in standin.requests if r.path == log_path]
    assert request.query["follow"] == ["true"]


def test_logs_of_a_worker_that_does_not_exist_lists_those_that_do(standin):
    a_train = rk.jobset("a-train", "team-a", queue="team-a")
    standin.serve("/api/v1/namespaces/team-a/pods", object_list("Pod", [rk.pod(a_train, 0, w) for w in range(2)]))

    result = tpuplane("workload", "logs", "a-train", "--worker", "7", "--kubeconfig", str(standin.kubeconfig))

    line = assert_one_line_error(result, "error: --slice/--worker: got 'slice 0 worker 7'")
    assert "slice 0 worker 0, slice 0 worker 1" in line


# ---------------------------------------------------------------------------------------------------------------
# Hostile values from the cluster: any controller (or anyone who may write a status) chooses these strings


SCHEMAS = {"list": LIST_SCHEMA, "status": STATUS_SCHEMA}
HOSTILE = "\x1b[31mred\x1b[0m\nsecond line [bold]markup[/bold] <script>alert(1)</script> password=hunter2"


@pytest.fixture
def hostile(world):
    a_big = rk.jobset("a-big", "team-a", queue="team-a", suspend=True)
    bad = rk.workload(a_big, conditions=rk.pending_conditions(HOSTILE))
    bad["spec"]["priorityClassRef"]["name"] = "high\x1b]0;pwned\x07"
    world.serve(JOBSETS, object_list("JobSet", [a_big]))
    world.serve(f"{JOBSETS}/a-big", a_big)
    world.serve(WORKLOADS, object_list("Workload", [bad]))
    world.serve("/apis/kueue.x-k8s.io/v1beta2/workloads", object_list("Workload", [bad]))
    world.serve("/api/v1/namespaces/team-a/events", object_list("Event", [rk.event(bad, "Workload", "Pending", HOSTILE)]))
    return world


@pytest.mark.parametrize("args", [["workload", "list"], ["workload", "status", "a-big"], ["workload", "why", "a-big"]])
def test_hostile_strings_reach_the_terminal_as_one_inert_line(hostile, args):
    result = tpuplane(*args, "--kubeconfig", str(hostile.kubeconfig))

    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "hunter2" not in result.stdout
    if args[1] != "list":  # list shows no message
        assert "[bold]markup[/bold]" in " ".join(result.stdout.split())  # shown as text, not applied
    assert not any(line.startswith("second line") for line in result.stdout.splitlines())


@pytest.mark.parametrize("args", [["workload", "list"], ["workload", "status", "a-big"]])
def test_hostile_strings_in_json_are_escaped_and_secrets_masked(hostile, args):
    result = tpuplane(*args, "-f", "json", "--kubeconfig", str(hostile.kubeconfig))

    document = json.loads(result.stdout)
    jsonschema.Draft202012Validator(SCHEMAS[args[1]]).validate(document)
    assert "hunter2" not in result.stdout
    assert "\x1b[31mred" in json.dumps(document, ensure_ascii=False) or "\\u001b[31mred" in result.stdout
