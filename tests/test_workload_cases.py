"""The workload corpus (tests/workloads/, table cases.yaml): JobSets as `xpk workload create --dry-run` writes
them for every TPU family, judged by `tpuplane workload check` against stacks of the same shapes."""

from __future__ import annotations

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


@pytest.mark.parametrize("case", [c for c in CASES if c.admission == "refused"], ids=case_id)
def test_case_the_api_server_refuses_is_bad_input_naming_the_path(case, facts):
    with pytest.raises(ConfigError) as exc:
        check_workload(case.manifest(), facts(case))
    assert case.says in str(exc.value)


@pytest.mark.parametrize("case", [c for c in CASES if c.admission == "accepted"], ids=case_id)
def test_case_the_api_server_accepts_gets_its_expected_verdict(case, facts):
    result = check_workload(case.manifest(), facts(case))

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
