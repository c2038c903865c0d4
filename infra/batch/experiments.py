"""Experiments, in XManager's model: a job template and a set of trials, each trial one JobSet.

- `grid`: the product of value lists (keys sorted, so the file's key order never renames a trial);
- `trials`: an explicit list of parameter sets;
- neither: a single run of the template.
The template may hold several jobs: they form a job group, gang-scheduled in one JobSet (one replicated job per
member). A trial is named `<experiment>-<id>`, its id six characters of a hash of its parameters (canonical JSON),
so a name always means the same parameters: adding a value to a grid or reordering trials never renames a trial
or gives an existing name (and so an existing JobSet) other parameters. It passes its parameters to every job
as `--key=value` arguments and as JSON in `TPUPLANE_TRIAL_PARAMS`.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from pydantic import Field

from tpuplane.infra.batch.api_objects import field, labels
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.args import Source, read
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.naming import DNS_LABEL
from tpuplane.infra.storage.args import TeamStorageSpec
from tpuplane.infra.yaml_input import read_yaml_file
from tpuplane.infra.batch.workload import TpuWorkloadSpec, max_name_length, render_tpu_jobset, workload_problems

ParamValue = Union[bool, int, float, str]
EXPERIMENT_LABEL = "tpuplane.dev/experiment"
TRIAL_LABEL = "tpuplane.dev/trial"
# A digest of the trial's whole JobSet spec: its id names the parameters only, so this tells a trial of a changed
# template (image, command, slices) from the one already submitted.
TRIAL_SPEC_ANNOTATION = "tpuplane.dev/trial-spec"
TRIAL_PARAMS_ENV = "TPUPLANE_TRIAL_PARAMS"
TRIAL_ID_LENGTH = 6  # base32 (a-z, 2-7): 30 bits; a collision inside one sweep is refused, never silent
MAX_TRIALS = 1000  # a typo in a grid must not submit ten thousand JobSets
_PARAM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


class ExperimentSpec(TpuWorkloadSpec):
    """The experiment file: a workload (the template) plus a grid or a list of trials."""

    grid: dict[str, list[ParamValue]] = {}
    trials: list[dict[str, ParamValue]] = []
    description: str = Field("", max_length=2000)


def canonical_params(params: dict[str, ParamValue]) -> str:
    """The one JSON spelling of a parameter set (sorted keys, no spaces): `1`, `1.0`, `true` and `"1"` differ."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"))


def trial_id(params: dict[str, ParamValue]) -> str:
    """Six DNS-safe characters (lowercase base32) of the SHA-256 of the canonical parameters."""
    digest = hashlib.sha256(canonical_params(params).encode()).digest()
    return base64.b32encode(digest).decode().lower()[:TRIAL_ID_LENGTH]


@dataclass(frozen=True)
class Trial:
    id: str | None  # None: the experiment has no sweep and runs once under its own name
    params: dict[str, ParamValue]


def expand_trials(exp: ExperimentSpec) -> list[Trial]:
    """The trials in a stable order: grid product over sorted keys, or the listed trials in file order."""
    if exp.grid:
        keys = sorted(exp.grid)
        combos = [dict(zip(keys, values)) for values in itertools.product(*(exp.grid[k] for k in keys))]
    elif exp.trials:
        combos = [dict(sorted(t.items())) for t in exp.trials]
    else:
        return [Trial(None, {})]
    return [Trial(trial_id(params), params) for params in combos]


def trial_name(exp: ExperimentSpec, trial: Trial) -> str:
    return exp.name if trial.id is None else f"{exp.name}-{trial.id}"


def trial_labels(exp: ExperimentSpec, trial: Trial) -> dict[str, str]:
    """tpuplane's labels of a trial's JobSet and pods: which experiment, which trial."""
    labels = {EXPERIMENT_LABEL: exp.name}
    if trial.id is not None:
        labels[TRIAL_LABEL] = trial.id
    return labels


def param_arg(key: str, value: ParamValue) -> str:
    """`--lr=0.001`; booleans as true/false (JSON spelling), strings as they are."""
    return f"--{key}={value if isinstance(value, str) else json.dumps(value)}"


def trial_workload(exp: ExperimentSpec, trial: Trial) -> TpuWorkloadSpec:
    """The workload of one trial: the template's jobs with the trial's arguments and env added (its labels come
    from `trial_labels` at render time, after the user's labels are checked)."""
    args = [param_arg(k, v) for k, v in trial.params.items()]
    env = {TRIAL_PARAMS_ENV: canonical_params(trial.params)} if trial.params else {}
    jobs = [job.model_copy(update={"args": [*job.args, *args], "env": {**job.env, **env}}) for job in exp.jobs]
    fields = {k: getattr(exp, k) for k in TpuWorkloadSpec.model_fields}
    return TpuWorkloadSpec(**{**fields, "name": trial_name(exp, trial), "jobs": jobs})


def _same_id_problems(exp: ExperimentSpec, trials: list[Trial]) -> list[Problem]:
    """Two trials with one id: the same parameters twice (a repeated grid value or trial), or (rarely) two
    parameter sets whose hashes meet."""
    problems = []
    first: dict[str | None, int] = {}
    for i, trial in enumerate(trials):
        j = first.setdefault(trial.id, i)
        if j == i:
            continue
        path = "grid" if exp.grid else f"trials[{i}]"
        if trials[j].params == trial.params:
            problems.append(Problem(path, trial.params, "a parameter set no other trial has",
                                    f"trial {j} has the same parameters: remove the repeated value or trial"))
        else:
            problems.append(Problem(path, trial.params, f"parameters whose trial id differs from trial {j}'s "
                                    f"({trial.id})", "a rare hash collision: add a parameter that tells them "
                                    "apart, e.g. seed"))
    return problems


def experiment_problems(exp: ExperimentSpec, platform: BatchPlatform | None = None,
                        storage: TeamStorageSpec | None = None) -> list[Problem]:
    """Rules of the experiment file, then every rule of a workload, checked on its longest trial name."""
    problems = []
    if exp.grid and exp.trials:
        problems.append(Problem("trials", f"{len(exp.trials)} trials", "either grid or trials, not both",
                                "a grid is a product of lists; trials list parameter sets one by one"))
    for key, values in exp.grid.items():
        if not values:
            problems.append(Problem(f"grid.{key}", values, "at least one value"))
    problems += [Problem(key, getattr(exp, key), f"at least one {what}", "leave the key out to run the workload once")
                 for key, what in (("grid", "parameter"), ("trials", "trial"))
                 if key in exp.model_fields_set and not getattr(exp, key)]
    for key in sorted({k for t in [exp.grid, *exp.trials] for k in t}):
        if not _PARAM_NAME.fullmatch(key):
            problems.append(Problem("grid" if key in exp.grid else "trials", key,
                                    "a parameter name of letters, digits, '_' and '-'"))
    if problems:  # trial names are meaningless until the sweep itself is valid
        return problems
    count = math.prod(len(v) for v in exp.grid.values()) if exp.grid else len(exp.trials)
    if count > MAX_TRIALS:  # counted before expanding: a 10^6-trial grid is refused at once, not built
        problems.append(Problem("grid" if exp.grid else "trials", f"{count} trials", f"at most {MAX_TRIALS}",
                                "split the sweep"))
        return problems
    trials = expand_trials(exp)
    problems += _same_id_problems(exp, trials)
    if not DNS_LABEL.fullmatch(exp.name):
        problems.append(Problem("name", exp.name, "lowercase letters, digits and '-', starting with a letter"))
        return problems
    sample = trial_workload(exp, trials[-1])  # every trial name has the same length
    limit = max_name_length(sample) - (len(sample.name) - len(exp.name))
    if len(exp.name) > limit:
        problems.append(Problem("name", exp.name, f"at most {limit} characters"
                                + (f" (trial names add '-' and a {TRIAL_ID_LENGTH}-character id)" if trials[-1].id
                                   else ""),
                                f"trial JobSets are named like '{sample.name}'"))
        return problems
    return problems + [p for p in workload_problems(sample, platform, storage) if p.path != "name"]


def render_experiment(exp: ExperimentSpec, platform: BatchPlatform | None = None, *,
                      storage: TeamStorageSpec | None = None) -> list[dict[str, Any]]:
    """One JobSet per trial, in trial order; `storage` is the stack's, which the mounts name. Raises ConfigError."""
    problems = experiment_problems(exp, platform, storage)
    if problems:
        raise ConfigError(problems)
    return [_with_spec_digest(render_tpu_jobset(trial_workload(exp, t), platform, storage=storage,
                                                system_labels=trial_labels(exp, t)))
            for t in expand_trials(exp)]


def _with_spec_digest(jobset: dict[str, Any]) -> dict[str, Any]:
    spec = json.dumps(jobset["spec"], sort_keys=True, separators=(",", ":"))
    jobset["metadata"].setdefault("annotations", {})[TRIAL_SPEC_ANNOTATION] = hashlib.sha256(
        spec.encode()).hexdigest()[:16]
    return jobset


def same_trial(submitted: dict[str, Any], jobset: dict[str, Any]) -> bool | None:
    """Is the `submitted` JobSet this very trial (True), another spec of the same trial (False), or not a trial of
    this experiment at all (None)?"""
    mine, theirs = labels(jobset), labels(submitted)
    if not mine.get(TRIAL_LABEL) or any(mine.get(k) != theirs.get(k) for k in (EXPERIMENT_LABEL, TRIAL_LABEL)):
        return None
    return (field(jobset, "metadata", "annotations", TRIAL_SPEC_ANNOTATION)
            == field(submitted, "metadata", "annotations", TRIAL_SPEC_ANNOTATION))


def load_experiment(path: Path) -> ExperimentSpec:
    """Read an experiment YAML file; schema errors become a ConfigError naming the field."""
    return read_experiment(read_yaml_file(path, str(path), "YAML experiment file"))


def read_experiment(raw: object) -> ExperimentSpec:
    """An experiment document (its file's camelCase keys); schema errors become a ConfigError naming the field."""
    return read(ExperimentSpec, raw, Source.config("", ExperimentSpec))
