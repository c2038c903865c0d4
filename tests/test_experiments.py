"""Experiments: grid and trial expansion, deterministic trial names, arguments, job groups, and the file model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.batch.experiments import (
    ExperimentSpec,
    expand_trials,
    experiment_problems,
    load_experiment,
    render_experiment,
    trial_id,
)
from tpuplane.infra.k8s_validation import manifest_errors

JOB = {"tpuType": "v6e-16", "slices": 2, "image": "us-docker.pkg.dev/acme/train:1", "command": "python train.py"}


def experiment(**fields) -> ExperimentSpec:
    return ExperimentSpec.model_validate({"name": "sweep", "jobs": [JOB], **fields})


def command_of(jobset, i=0) -> str:
    """The user's command line inside the SIGTERM wrapper (on lines of its own, after the subshell's trap and
    before ') &')."""
    script = jobset["spec"]["replicatedJobs"][i]["template"]["spec"]["template"]["spec"]["containers"][0]["command"][2]
    return script.split("(\ntrap : TERM\n", 1)[1].split("\n) &", 1)[0]


def names(jobsets) -> list[str]:
    return [j["metadata"]["name"] for j in jobsets]


def test_experiment_grid_is_the_product_over_sorted_keys():
    trials = expand_trials(experiment(grid={"lr": [0.1, 0.01], "batch": [128, 256, 512]}))
    assert [t.params for t in trials][:2] == [{"batch": 128, "lr": 0.1}, {"batch": 128, "lr": 0.01}]
    assert len(trials) == 6


def test_experiment_grid_key_order_does_not_rename_trials():
    a = render_experiment(experiment(grid={"lr": [0.1, 0.01], "batch": [1, 2]}))
    b = render_experiment(experiment(grid={"batch": [1, 2], "lr": [0.1, 0.01]}))
    assert yaml.safe_dump_all(a, sort_keys=True) == yaml.safe_dump_all(b, sort_keys=True)


def test_experiment_trial_names_args_env_and_labels():
    jobsets = render_experiment(experiment(trials=[{"lr": 0.1, "warm": True}, {"lr": 0.2, "tag": "b c"}]))
    assert names(jobsets) == [f"sweep-{trial_id({'lr': 0.1, 'warm': True})}",
                              f"sweep-{trial_id({'lr': 0.2, 'tag': 'b c'})}"]
    assert command_of(jobsets[0]) == "python train.py --lr=0.1 --warm=true"
    assert command_of(jobsets[1]) == "python train.py --lr=0.2 '--tag=b c'"
    env = {e["name"]: e.get("value") for e in
           jobsets[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert json.loads(env["TPUPLANE_TRIAL_PARAMS"]) == {"lr": 0.2, "tag": "b c"}
    assert jobsets[1]["metadata"]["labels"]["tpuplane.dev/experiment"] == "sweep"
    assert jobsets[1]["metadata"]["labels"]["tpuplane.dev/trial"] == trial_id({"lr": 0.2, "tag": "b c"})


def test_experiment_trial_id_is_pinned():
    """Trial names are JobSet names a stack owns: changing the hash would replace (re-run) every trial."""
    assert trial_id({"lr": 0.1}) == "tsn2sq"


def test_experiment_trial_ids_are_dns_safe_and_tell_values_apart():
    ids = [trial_id(p) for p in ({"x": 1}, {"x": 1.0}, {"x": True}, {"x": "1"}, {"y": 1}, {})]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 6 and i.isalnum() and i == i.lower() for i in ids)


def test_experiment_editing_a_grid_keeps_every_name_with_its_parameters():
    def by_name(jobsets):
        return {j["metadata"]["name"]: command_of(j) for j in jobsets}

    before = by_name(render_experiment(experiment(grid={"lr": [0.1, 0.01], "batch": [128]})))
    after = by_name(render_experiment(experiment(grid={"lr": [0.3, 0.1, 0.01], "batch": [128, 256]})))
    assert len(after) == 6
    assert {name: after[name] for name in before} == before


def test_experiment_trial_order_does_not_rename_trials():
    a = names(render_experiment(experiment(trials=[{"lr": 1}, {"lr": 2}])))
    b = names(render_experiment(experiment(trials=[{"lr": 2}, {"lr": 1}])))
    assert a == b[::-1]


def test_experiment_repeated_trial_is_refused():
    [problem] = experiment_problems(experiment(trials=[{"lr": 1}, {"lr": 2}, {"lr": 1}]))
    assert problem.path == "trials[2]" and "trial 0" in problem.hint


def test_experiment_repeated_grid_value_is_refused():
    [problem] = experiment_problems(experiment(grid={"lr": [1, 1]}))
    assert problem.path == "grid"


def test_experiment_user_labels_cannot_take_tpuplanes_keys():
    problems = experiment_problems(experiment(labels={"tpuplane.dev/trial": "x"}))
    assert [p.path for p in problems] == ["labels"]


def test_experiment_without_sweep_runs_once_under_its_name():
    [jobset] = render_experiment(experiment())
    assert jobset["metadata"]["name"] == "sweep"
    assert command_of(jobset) == "python train.py"


def test_experiment_job_group_is_one_jobset_per_trial_with_every_member():
    members = [{**JOB, "name": "trainer"}, {**JOB, "name": "evaluator", "slices": 1, "command": "python eval.py"}]
    jobsets = render_experiment(experiment(jobs=members, grid={"lr": [1, 2]}))
    assert len(jobsets) == 2
    assert [r["name"] for r in jobsets[1]["spec"]["replicatedJobs"]] == ["trainer", "evaluator"]
    assert command_of(jobsets[1], 1) == "python eval.py --lr=2"
    assert all(manifest_errors(j) == [] for j in jobsets)


def test_experiment_grid_and_trials_together_are_refused():
    problems = experiment_problems(experiment(grid={"lr": [1]}, trials=[{"lr": 2}]))
    assert [p.path for p in problems] == ["trials"]


def test_experiment_empty_grid_list_is_refused():
    assert [p.path for p in experiment_problems(experiment(grid={"lr": []}))] == ["grid.lr"]


@pytest.mark.parametrize("sweep", [{"trials": []}, {"grid": {}}])
def test_experiment_empty_sweep_is_refused_not_run_once(sweep):
    """`trials: []` is a sweep of nothing, like an empty grid value: not the single run of no sweep at all."""
    assert [p.path for p in experiment_problems(experiment(**sweep))] == list(sweep)


def test_experiment_name_limit_accounts_for_the_trial_suffix():
    # a v6e-16 workload name is at most 47: its last pod name <name>-slice-0-3-<5 random> fits in 63
    ok_len = 47 - len("-abcdef")
    assert experiment_problems(experiment(name="a" * ok_len, grid={"x": list(range(10))})) == []
    [problem] = experiment_problems(experiment(name="a" * (ok_len + 1), grid={"x": list(range(10))}))
    assert problem.path == "name" and "at most 40 characters" in problem.allowed


def test_experiment_too_many_trials_is_refused():
    problems = experiment_problems(experiment(grid={"a": list(range(40)), "b": list(range(40))}))
    assert [p.path for p in problems] == ["grid"]


def test_experiment_bad_parameter_name_is_refused():
    assert [p.path for p in experiment_problems(experiment(trials=[{"bad name": 1}]))] == ["trials"]


def test_experiment_file_round_trip(tmp_path: Path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "lr", "priority": "low", "jobs": [JOB], "grid": {"lr": [0.1, 0.2]}}))
    jobsets = render_experiment(load_experiment(path))
    assert [j["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] for j in jobsets] == ["low", "low"]


def test_experiment_file_unknown_key_names_the_field(tmp_path: Path):
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "lr", "jobs": [{**JOB, "tpuTyp": "x"}]}))
    with pytest.raises(ConfigError) as exc:
        load_experiment(path)
    assert "jobs[0].tpuTyp" in [p.path for p in exc.value.problems]
