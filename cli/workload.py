"""`tpuplane workload render` and `tpuplane experiment render`: JobSet YAML for `kubectl apply --server-side -f -`.

Output is deterministic (sorted keys; list order is meaningful and kept). With `--stack` or `--config`, the
workload is checked against that stack's pools and queues first; bad input exits 2 with the ConfigError message.
JobSets rendered here are for `kubectl` users, so they keep xpk's `ttlSecondsAfterFinished` (12 h) unless told
otherwise; JobSets a Pulumi stack owns have none (see `tpuplane.components.workload`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from tpuplane.infra.batch.kueue_config import PRIORITIES
from tpuplane.infra.config import Capacity, StackConfig, config_path, load_stack_config
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.batch.experiments import load_experiment, render_experiment
from tpuplane.infra.batch.workload import DEFAULT_TTL, TpuJob, TpuWorkloadSpec, parse_env_pairs, render_tpu_jobset

EXIT_BAD_INPUT = 2

app = typer.Typer(help="TPU workloads as JobSets (xpk workload create, as code).", no_args_is_help=True)
experiment_app = typer.Typer(help="Experiments: one JobSet per trial of a grid or trial list.", no_args_is_help=True)

_STACK = typer.Option(None, "--stack", "-s", help="Check against the pools of <stackConfigDir>/Pulumi.<stack>.yaml.")
_CONFIG = typer.Option(None, "--config", "-c", help="Check against the pools of this Pulumi.<stack>.yaml file.")
_PROJECT = typer.Option(Path("."), "--project-dir", help="Where Pulumi.yaml is (or below it).")


def _stack_config(stack: Optional[str], config: Optional[Path], project_dir: Path) -> StackConfig | None:
    if stack is None and config is None:
        return None
    from tpuplane.cli.plan import PulumiProject, read_stack_file

    project = PulumiProject.find(project_dir.resolve())
    path = config or project.stack_config_dir / f"Pulumi.{stack}.yaml"
    return load_stack_config(read_stack_file(path, project.name))


def _manifest_errors(objects: list[dict[str, Any]]) -> list[str]:
    """The project's own manifest checks; they need the infra extra, and say so when it is missing."""
    try:
        from tpuplane.infra.k8s_validation import manifest_errors  # jsonschema, kubernetes-validate: infra extra
    except ImportError:
        Console(stderr=True).print("note: manifests not checked against the API schemas: install tpuplane[infra]",
                                   highlight=False)
        return []
    return [error for obj in objects for error in manifest_errors(obj)]


def _print_yaml(objects: list[dict[str, Any]], checked: list[dict[str, Any]] | None = None) -> None:
    """Print only what the API server would accept: the manifest checks run first (on `checked`, default all)."""
    errors = _manifest_errors(objects if checked is None else checked)
    if errors:
        raise ConfigError([Problem("rendered JobSet", error, "a manifest the API server accepts",
                                   "fix the option or field the message names") for error in errors])
    sys.stdout.write(yaml.safe_dump_all(objects, sort_keys=True, default_flow_style=False))


def _fail(exc: ConfigError) -> None:
    Console(stderr=True, emoji=False).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _model_error(exc: ValidationError) -> ConfigError:
    return ConfigError([Problem(config_path(tuple(e["loc"])), e.get("input"), e["msg"]) for e in exc.errors()])


@app.command("render")
def render_command(
    tpu_type: str = typer.Option(..., "--tpu-type", help="e.g. v6e-16, v5p-128 (see `tpuplane catalog`)."),
    image: str = typer.Option(..., "--image", help="Container image of the program."),
    command: str = typer.Option(..., "--command", help="Shell command run on every VM, e.g. 'python train.py'."),
    slices: int = typer.Option(1, "--slices", help="Number of slices (each takes a whole node pool)."),
    name: Optional[str] = typer.Option(None, "--name", help="JobSet name (default <tpu-type>-x<slices>)."),
    queue: Optional[str] = typer.Option(None, "--queue", help="LocalQueue (default: multislice-queue)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="Namespace of the queue (default)."),
    priority: Optional[str] = typer.Option(None, "--priority", metavar="<" + "|".join(PRIORITIES) + ">",
                                           help="A WorkloadPriorityClass of the batch stack [default: medium]."),
    capacity: Capacity = typer.Option(Capacity.ON_DEMAND, "--capacity", help="How the workload's pools get VMs."),
    machine_type: Optional[str] = typer.Option(None, "--machine-type", help="Host machine for 2x4 shapes."),
    env: list[str] = typer.Option([], "--env", help="KEY=VALUE, repeatable."),
    max_restarts: int = typer.Option(0, "--max-restarts", help="JobSet restarts on retryable exit codes."),
    restart_on_exit_codes: list[int] = typer.Option([], "--restart-on-exit-code", help="Also retry on this code."),
    ttl: int = typer.Option(DEFAULT_TTL, "--ttl-seconds-after-finished", help="Keep the finished JobSet this long."),
    stack: Optional[str] = _STACK,
    config: Optional[Path] = _CONFIG,
    project_dir: Path = _PROJECT,
) -> None:
    """Print the JobSet of one TPU workload."""
    try:
        try:
            job = TpuJob(tpu_type=tpu_type, machine_type=machine_type, slices=slices, capacity=capacity.value,
                         image=image, command=command, env=parse_env_pairs(env))
            spec = TpuWorkloadSpec(name=name or f"{tpu_type}-x{slices}", jobs=[job], queue=queue,
                                   namespace=namespace, priority=priority,
                                   max_restarts=max_restarts, restart_on_exit_codes=restart_on_exit_codes,
                                   ttl_seconds_after_finished=ttl)
        except ValidationError as exc:
            raise _model_error(exc) from None
        _print_yaml([render_tpu_jobset(spec, _stack_config(stack, config, project_dir))])
    except ConfigError as exc:
        _fail(exc)


@experiment_app.command("render")
def experiment_render_command(
    file: Path = typer.Argument(..., help="Experiment YAML: a workload template plus grid or trials."),
    stack: Optional[str] = _STACK,
    config: Optional[Path] = _CONFIG,
    project_dir: Path = _PROJECT,
) -> None:
    """Print one JobSet per trial, as a multi-document YAML stream (finished JobSets kept 12 h unless the file
    sets ttlSecondsAfterFinished)."""
    try:
        experiment = load_experiment(file)
        if experiment.ttl_seconds_after_finished is None:
            experiment = experiment.model_copy(update={"ttl_seconds_after_finished": DEFAULT_TTL})
        jobsets = render_experiment(experiment, _stack_config(stack, config, project_dir))
        # Trials differ only in their id (one length for all) and their parameters, passed as args and env
        # values, which any string satisfies: the first and last JobSet stand for all (checking 1,000 takes 10 s).
        _print_yaml(jobsets, checked=jobsets[:1] + jobsets[-1:])
    except ConfigError as exc:
        _fail(exc)
