"""Experiments, in XManager's model: a job template and a set of trials, each trial one JobSet.

- `grid`: the product of value lists (keys sorted, so the file's key order never renames a trial);
- `trials`: an explicit list of parameter sets;
- neither: a single run of the template.
The template may hold several jobs: they form a job group, gang-scheduled in one JobSet (one replicated job per
member). A trial named `<experiment>-<index>` passes its parameters to every job as `--key=value` arguments and as
JSON in `TPUPLANE_TRIAL_PARAMS`.
"""

from __future__ import annotations

import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import yaml
from pydantic import Field, ValidationError

from tpuplane.infra.config import StackConfig, config_path
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.naming import DNS_LABEL
from tpuplane.infra.workload import TpuWorkloadSpec, max_name_length, render_tpu_jobset, workload_problems

ParamValue = Union[bool, int, float, str]
EXPERIMENT_LABEL = "tpuplane.dev/experiment"
TRIAL_LABEL = "tpuplane.dev/trial"
TRIAL_PARAMS_ENV = "TPUPLANE_TRIAL_PARAMS"
MAX_TRIALS = 1000  # a typo in a grid must not submit ten thousand JobSets
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


class ExperimentSpec(TpuWorkloadSpec):
    """The experiment file: a workload (the template) plus a grid or a list of trials."""

    grid: dict[str, list[ParamValue]] = {}
    trials: list[dict[str, ParamValue]] = []
    description: str = Field("", max_length=2000)


@dataclass(frozen=True)
class Trial:
    index: int | None  # None: the experiment has no sweep and runs once under its own name
    params: dict[str, ParamValue]


def expand_trials(exp: ExperimentSpec) -> list[Trial]:
    """The trials in a stable order: grid product over sorted keys, or the listed trials in file order."""
    if exp.grid:
        keys = sorted(exp.grid)
        combos = itertools.product(*(exp.grid[k] for k in keys))
        return [Trial(i, dict(zip(keys, values))) for i, values in enumerate(combos)]
    if exp.trials:
        return [Trial(i, dict(sorted(t.items()))) for i, t in enumerate(exp.trials)]
    return [Trial(None, {})]


def trial_name(exp: ExperimentSpec, trial: Trial) -> str:
    return exp.name if trial.index is None else f"{exp.name}-{trial.index}"


def param_arg(key: str, value: ParamValue) -> str:
    """`--lr=0.001`; booleans as true/false (JSON spelling), strings as they are."""
    return f"--{key}={value if isinstance(value, str) else json.dumps(value)}"


def trial_workload(exp: ExperimentSpec, trial: Trial) -> TpuWorkloadSpec:
    """The workload of one trial: the template's jobs with the trial's arguments, env and labels added."""
    args = [param_arg(k, v) for k, v in trial.params.items()]
    env = {TRIAL_PARAMS_ENV: json.dumps(trial.params, sort_keys=True, separators=(",", ":"))} if trial.params else {}
    jobs = [job.model_copy(update={"args": [*job.args, *args], "env": {**job.env, **env}}) for job in exp.jobs]
    labels = {**exp.labels, EXPERIMENT_LABEL: exp.name}
    if trial.index is not None:
        labels[TRIAL_LABEL] = str(trial.index)
    fields = {k: getattr(exp, k) for k in TpuWorkloadSpec.model_fields}
    return TpuWorkloadSpec(**{**fields, "name": trial_name(exp, trial), "jobs": jobs, "labels": labels})


def experiment_problems(exp: ExperimentSpec, cfg: StackConfig | None = None) -> list[Problem]:
    """Rules of the experiment file, then every rule of a workload, checked on its longest trial name."""
    problems = []
    if exp.grid and exp.trials:
        problems.append(Problem("trials", f"{len(exp.trials)} trials", "either grid or trials, not both",
                                "a grid is a product of lists; trials list parameter sets one by one"))
    for key, values in exp.grid.items():
        if not values:
            problems.append(Problem(f"grid.{key}", values, "at least one value"))
    for key in sorted({k for t in [exp.grid, *exp.trials] for k in t}):
        if not _PARAM_NAME.fullmatch(key):
            problems.append(Problem("grid" if key in exp.grid else "trials", key,
                                    "a parameter name of letters, digits, '_' and '-'"))
    if problems:  # trial names are meaningless until the sweep itself is valid
        return problems
    trials = expand_trials(exp)
    if len(trials) > MAX_TRIALS:
        problems.append(Problem("grid", f"{len(trials)} trials", f"at most {MAX_TRIALS}", "split the sweep"))
        return problems
    if not DNS_LABEL.fullmatch(exp.name):
        problems.append(Problem("name", exp.name, "lowercase letters, digits and '-', starting with a letter"))
        return problems
    longest = trial_workload(exp, trials[-1])
    limit = max_name_length(longest) - (len(longest.name) - len(exp.name))
    if len(exp.name) > limit:
        problems.append(Problem("name", exp.name, f"at most {limit} characters with {len(trials)} trials",
                                f"trial JobSets are named like '{longest.name}'"))
        return problems
    return problems + [p for p in workload_problems(longest, cfg) if p.path != "name"]


def render_experiment(exp: ExperimentSpec, cfg: StackConfig | None = None) -> list[dict[str, Any]]:
    """One JobSet per trial, in trial order. Raises ConfigError."""
    problems = experiment_problems(exp, cfg)
    if problems:
        raise ConfigError(problems)
    return [render_tpu_jobset(trial_workload(exp, t), cfg) for t in expand_trials(exp)]


def load_experiment(path: Path) -> ExperimentSpec:
    """Read an experiment YAML file; schema errors become a ConfigError naming the field."""
    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError.at(str(path), "(file)", "a readable YAML experiment file", str(exc)) from None
    try:
        return ExperimentSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError([Problem(config_path(tuple(e["loc"])) or "(file)", e.get("input"), e["msg"])
                           for e in exc.errors()]) from None
