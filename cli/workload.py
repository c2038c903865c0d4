"""`tpuplane workload render` and `tpuplane experiment render`: JobSet YAML for `kubectl apply --server-side -f -`.

Output is deterministic (sorted keys; list order is meaningful and kept). With `--stack` or `--config`, the
workload is checked against that stack's pools and queues first; bad input exits 2 with the ConfigError message.
JobSets rendered here are for `kubectl` users, so they keep xpk's `ttlSecondsAfterFinished` (12 h) unless told
otherwise; JobSets a Pulumi stack owns have none (see `tpuplane.components.workload`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape

from tpuplane.infra.batch.kueue_config import PRIORITIES
from tpuplane.infra.args import Source, validation_problems
from tpuplane.infra.fleet.pools import Capacity
from tpuplane.infra.stack import StackConfig, load_stack_config
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.batch.experiments import load_experiment, render_experiment
from tpuplane.infra.batch.workload import DEFAULT_TTL, TpuJob, TpuWorkloadSpec, parse_env_pairs, render_tpu_jobset
from tpuplane.infra.pathways.job import PathwaysJobOptions, proxy_address, service_defaults

from tpuplane.cli import EXIT_BAD_INPUT, FORMAT, OutputFormat

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
    sys.stdout.write(yaml.dump_all(objects, Dumper=_DUMPER, sort_keys=True, default_flow_style=False,
                                   width=_NO_FOLDING))


# LibYAML's emitter where PyYAML has it (7x faster on a 1,000-trial sweep); with no line folding, it writes the same
# bytes as PyYAML's own, so the output is the same wherever it runs.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_NO_FOLDING = 2**31 - 1


def _check_schedule(jobsets: list[dict[str, Any]], cfg: StackConfig | None) -> None:
    """With a stack, refuse what Kueue would never admit or the scheduler never place (`workload check`)."""
    if cfg is None:
        return
    from tpuplane.infra.batch.schedule_check import schedule_problems

    problems = schedule_problems(jobsets, cfg.tpu_pools, cfg.batch, cfg.storage)
    if problems:
        raise ConfigError(problems)


def _fail(exc: ConfigError) -> None:
    Console(stderr=True, emoji=False).print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _model_error(exc: ValidationError) -> ConfigError:
    """A workload built from options, its fields named as `tpuplane workload render` names them."""
    return ConfigError(validation_problems(exc, Source.args("", TpuWorkloadSpec)))


@app.command("render")
def render_command(
    tpu_type: str = typer.Option(..., "--tpu-type", help="e.g. v6e-16, v5p-128 (see `tpuplane catalog`)."),
    image: Optional[str] = typer.Option(None, "--image", help="Container image of the program (required, but with "
                                        "--pathways --headless)."),
    command: Optional[str] = typer.Option(None, "--command", help="Shell command run on every VM, e.g. 'python "
                                          "train.py' (with --pathways: once, beside the Pathways head)."),
    slices: int = typer.Option(1, "--slices", help="Number of slices (each takes a whole node pool)."),
    name: Optional[str] = typer.Option(None, "--name", help="JobSet name (default <tpu-type>-x<slices>)."),
    queue: Optional[str] = typer.Option(None, "--queue", help="LocalQueue (default: multislice-queue)."),
    namespace: Optional[str] = typer.Option(None, "--namespace", "-n", help="Namespace of the queue (default)."),
    priority: Optional[str] = typer.Option(None, "--priority", metavar="<" + "|".join(PRIORITIES) + ">",
                                           help="A WorkloadPriorityClass of the batch stack [default: medium]."),
    capacity: Capacity = typer.Option(Capacity.ON_DEMAND, "--capacity", help="How the workload's pools get VMs."),
    machine_type: Optional[str] = typer.Option(None, "--machine-type", help="Host machine for 2x4 shapes."),
    env: list[str] = typer.Option([], "--env", help="KEY=VALUE, repeatable."),
    mount: list[str] = typer.Option([], "--mount", help="NAME:/path[:ro]: a storage of the stack (tpuplane:storage) "
                                    "mounted in every TPU container (with --pathways: in every Pathways worker and "
                                    "in the program's container beside the head); repeatable. Needs --stack or "
                                    "--config."),
    max_restarts: int = typer.Option(0, "--max-restarts", help="JobSet restarts on retryable exit codes."),
    restart_on_exit_codes: list[int] = typer.Option([], "--restart-on-exit-code", help="Also retry on this code."),
    ttl: int = typer.Option(DEFAULT_TTL, "--ttl-seconds-after-finished", help="Keep the finished JobSet this long."),
    pathways: bool = typer.Option(False, "--pathways", help="A per-job Pathways cluster: the slices run Pathways "
                                  "workers, the program runs beside the job's own resource manager and proxy "
                                  "(xpk workload create-pathways)."),
    headless: bool = typer.Option(False, "--headless", help="With --pathways: no program, clients connect to the "
                                  "proxy (port 29000)."),
    sidecar_image: Optional[str] = typer.Option(None, "--sidecar-image", help="With --pathways: a colocated-Python "
                                                "sidecar on every worker."),
    gcs_scratch: Optional[str] = typer.Option(None, "--gcs-scratch", help="With --pathways: gs://bucket[/folder] "
                                              "for the job's scratch (default: a folder of the stack's Pathways "
                                              "bucket)."),
    jax_version: Optional[str] = typer.Option(None, "--jax-version", help="With --pathways: the JAX release of the "
                                              "server and proxy images (default: the stack's Pathways service's)."),
    stack: Optional[str] = _STACK,
    config: Optional[Path] = _CONFIG,
    project_dir: Path = _PROJECT,
) -> None:
    """Print the JobSet of one TPU workload (with --pathways, of a per-job Pathways cluster)."""
    try:
        for option, value in (("--image", image), ("--command", command)):
            if value is None and not (pathways and headless):
                raise ConfigError.at(option, None, "a value: this option is required",
                                     "only a headless Pathways cluster (--pathways --headless) runs no program")
        try:
            job = TpuJob(tpu_type=tpu_type, machine_type=machine_type, slices=slices, capacity=capacity.value,
                         image=image, command=command, env=parse_env_pairs(env))
            spec = TpuWorkloadSpec(name=name or f"{tpu_type}-x{slices}", jobs=[job], queue=queue,
                                   namespace=namespace, priority=priority,
                                   max_restarts=max_restarts, restart_on_exit_codes=restart_on_exit_codes,
                                   ttl_seconds_after_finished=ttl, mounts=mount,
                                   pathways=PathwaysJobOptions(headless=headless, sidecar_image=sidecar_image,
                                                               gcs_scratch=gcs_scratch, jax_version=jax_version)
                                   if pathways else None)
        except ValidationError as exc:
            raise _model_error(exc) from None
        _only_with_pathways(pathways, headless=headless, sidecar_image=sidecar_image, gcs_scratch=gcs_scratch,
                            jax_version=jax_version)
        cfg = _stack_config(stack, config, project_dir)
        spec = on_stack_service(spec, cfg)
        jobset = render_tpu_jobset(spec, cfg.batch if cfg else None, storage=cfg.storage if cfg else None,
                                   mounts_at="--mount")
        _check_schedule([jobset], cfg)
        _print_yaml([jobset])
        if pathways and headless:  # where its clients connect, as xpk says after create-pathways
            meta = jobset["metadata"]
            Console(stderr=True, emoji=False).print(
                f"note: clients reach the proxy at {escape(proxy_address(meta['name'], meta['namespace']))}",
                highlight=False, soft_wrap=True)
    except ConfigError as exc:
        _fail(exc)


def _only_with_pathways(pathways: bool, **options: object) -> None:
    """Without --pathways, the first of these options given is refused."""
    if pathways:
        return
    for name, value in options.items():
        if value:
            raise ConfigError.at(f"--{name.replace('_', '-')}", value, "only with --pathways",
                                 "these options describe a per-job Pathways cluster")


def on_stack_service(spec: Any, cfg: StackConfig | None) -> Any:
    """A Pathways workload on a stack with a Shared Pathways Service takes what it leaves out from the service."""
    if spec.pathways is None or cfg is None:
        return spec
    return spec.model_copy(update={"pathways": service_defaults(spec.pathways, cfg.pathways, spec.name)})


@app.command("check")
def check_command(
    file: Path = typer.Argument(..., help="YAML of JobSets and/or Jobs (several documents allowed), e.g. "
                                          "`workload render` or `xpk workload create --dry-run` output."),
    stack: Optional[str] = _STACK,
    config: Optional[Path] = _CONFIG,
    project_dir: Path = _PROJECT,
    fmt: OutputFormat = FORMAT,
) -> None:
    """Would Kueue admit it and could its pods run? Simulates flavor assignment, quota (with the cohort) and node
    placement on the stack's pools; exit 0 when every workload can run, 1 when one cannot, 2 on bad input."""
    from tpuplane.infra.batch.schedule_check import check_workload, stack_facts
    from tpuplane.infra.yaml_input import MAX_YAML_BYTES, load_yaml_documents, read_text_bounded

    try:
        cfg = _stack_config(stack or ("dev" if config is None else None), config, project_dir)
        source = str(file)
        documents = load_yaml_documents(read_text_bounded(file, source, MAX_YAML_BYTES, "workload YAML"), source)
        if not documents or not all(isinstance(d, dict) for d in documents):
            raise ConfigError.at(source, f"{len(documents)} document(s)", "one or more JobSet or Job objects",
                                 "pass the YAML you would `kubectl apply -f`")
        facts = stack_facts(cfg.tpu_pools, cfg.batch, cfg.storage)
        results = [check_workload(doc, facts) for doc in documents]
    except ConfigError as exc:
        _fail(exc)
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps([r.to_json() for r in results], indent=2, sort_keys=True) + "\n")
    else:
        _print_checks(results)
    raise typer.Exit(0 if all(r.ok for r in results) else 1)


def _print_checks(results: list) -> None:
    from rich.table import Table

    console = Console(emoji=False, highlight=False, width=160 if not sys.stdout.isatty() else None)
    for result in results:
        verdict = "[green]can run[/]" if result.ok else "[red]cannot run[/]"
        console.print(f"[bold]{escape(result.workload)}[/] in {escape(result.namespace)} via LocalQueue "
                      f"{escape(result.queue or '-')} -> ClusterQueue {escape(result.cluster_queue or '-')}: {verdict}")
        if result.pod_sets:
            table = Table(box=None, pad_edge=False)
            for column in ("pod set", "pods", "requests per pod", "flavor", "node pools"):
                table.add_column(column, overflow="fold")  # values wrap, never cut (as in the plan table)
            for p in result.pod_sets:
                requests = ", ".join(f"{k}={v}" for k, v in p.to_json()["requests"].items()) or "-"
                pools = ", ".join(p.pools[:4]) + (f" (+{len(p.pools) - 4})" if len(p.pools) > 4 else "")
                table.add_row(escape(p.name), str(p.pods), escape(requests), escape(p.flavor or "-"), escape(pools or "-"))
            console.print(table)
        for problem in result.all_problems():
            console.print(f"  [red]x[/] {escape(problem)}", soft_wrap=True)


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
        cfg = _stack_config(stack, config, project_dir)
        experiment = on_stack_service(experiment, cfg)
        jobsets = render_experiment(experiment, cfg.batch if cfg else None, storage=cfg.storage if cfg else None)
        _check_schedule(jobsets, cfg)
        # Trials differ only in their id (one length for all) and their parameters, passed as args and env
        # values, which any string satisfies: the first and last JobSet stand for all (checking 1,000 takes 10 s).
        _print_yaml(jobsets, checked=jobsets[:1] + jobsets[-1:])
    except ConfigError as exc:
        _fail(exc)
