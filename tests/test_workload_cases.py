"""The workload corpus (tests/workloads/, table cases.yaml): JobSets as `xpk workload create --dry-run` writes
them for every TPU family and as tpuplane renders them, judged by `tpuplane workload check` against stacks of the
same shapes; what real Kueue does with each (the table's `kueue` column) is checked in tests/e2e."""

from __future__ import annotations

import json
import os

import pytest
import yaml
from typer.testing import CliRunner

from tpuplane.cli.main import app
from tpuplane.cli.plan import read_stack_file
from tpuplane.infra.batch.schedule_check import check_workload, stack_facts
from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.fleet.catalog import GENERATIONS
from tpuplane.infra.fleet.scheduling import ACCELERATOR_LABEL
from workload_cases import REPO, WORKLOADS, WorkloadCase, workload_cases

CASES = workload_cases()


def case_id(case: WorkloadCase) -> str:
    return case.file.removesuffix(".yaml")


@pytest.fixture(scope="module")
def facts():
    """Stack facts per stack file, computed once."""
    cache = {}

    def of(case: WorkloadCase):
        if case.stack not in cache:
            cfg = load_stack_config(read_stack_file(case.stack_path, "tpuplane"))
            cache[case.stack] = stack_facts(cfg.tpu_pools, cfg.batch)
        return cache[case.stack]

    return of


def test_every_workload_file_has_a_case():
    assert sorted(c.file for c in CASES) == sorted(p.name for p in WORKLOADS.glob("*.yaml")
                                                   if p.name != "cases.yaml" and not p.name.startswith("Pulumi."))


def test_xpk_jobsets_cover_every_tpu_family():
    selected = {yaml.safe_load(p.read_text())["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
                ["nodeSelector"][ACCELERATOR_LABEL] for p in WORKLOADS.glob("xpk_*.yaml")}
    assert {g.accelerator for g in GENERATIONS} <= selected


@pytest.mark.parametrize("case", [c for c in CASES if c.render], ids=case_id)
def test_rendered_workloads_are_what_tpuplane_writes_today(case, monkeypatch):
    """Regenerate after an intended renderer change: `TPUPLANE_UPDATE_GOLDEN=1 .venv/bin/pytest
    tests/test_workload_cases.py`."""
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(app, [*case.render, "--project-dir", str(REPO)])
    assert result.exit_code == 0, result.output
    if os.environ.get("TPUPLANE_UPDATE_GOLDEN"):
        case.path.write_text(result.stdout)
    assert case.path.read_text() == result.stdout


@pytest.mark.parametrize("case", [c for c in CASES if c.kueue], ids=case_id)
def test_workload_check_predicts_what_kueue_does(case):
    """The flavor `workload check` names is the one Kueue admits (or holds) the workload to, and the node pools
    it names are those its pods may land on; a workload Kueue keeps pending gets no flavor from the check, and one
    kube-scheduler cannot place gets a flavor but no pool."""
    result = CliRunner().invoke(app, ["workload", "check", str(case.path), "--config", str(case.stack_path),
                                      "--project-dir", str(REPO), "-f", "json"])
    flavor = case.kueue.get("admitted") or case.kueue.get("held")
    for prediction in json.loads(result.stdout):
        [pod_set] = prediction["podSets"] or [{"flavor": None, "nodePools": []}]
        if flavor is not None:
            assert (pod_set["flavor"], sorted(pod_set["nodePools"])) == (flavor, sorted(case.kueue["pools"])) \
                if "pools" in case.kueue else pod_set["flavor"] == flavor
        elif "pending" in case.kueue:
            assert pod_set["flavor"] is None
        else:
            assert pod_set["flavor"] is not None and pod_set["nodePools"] == []


@pytest.mark.parametrize("case", [c for c in CASES if c.admission == "refused"], ids=case_id)
def test_case_the_api_server_refuses_is_bad_input_naming_the_path(case, facts):
    with pytest.raises(ConfigError) as exc:
        check_workload(case.manifest(), facts(case))
    assert case.says in str(exc.value)


@pytest.mark.parametrize("case", [c for c in CASES if c.admission == "accepted"], ids=case_id)
def test_case_the_api_server_accepts_gets_its_expected_verdict(case, facts):
    for document in case.documents():
        result = check_workload(document, facts(case))

        assert result.ok == (case.check == "can run"), result.all_problems()
        if case.says:
            assert any(case.says in problem for problem in result.all_problems()), result.all_problems()


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_workload_check_cli_exit_code_and_reason_per_case(case):
    result = CliRunner().invoke(app, ["workload", "check", str(case.path), "--config", str(case.stack_path),
                                      "--project-dir", str(REPO)])

    assert result.exit_code == case.exit_code, result.output
    if case.says:
        assert case.says in " ".join(result.output.split()), result.output
