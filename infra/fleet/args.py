"""The Args of `TpuCluster`, `TpuSlicePool` and `TpuReservation`, read into the stack config's own models and
checked by its own rules before the component registers anything; errors name the Args field."""

from __future__ import annotations

import re
from typing import Any, Mapping

from tpuplane.infra.args import (
    given,
    model_from_args,
    reject_unknown,
    require_flag,
    snake_paths,
    text_problems,
)
from tpuplane.infra.config import (
    ClusterConfig,
    ReservationConfig,
    TpuPoolConfig,
    cluster_problems,
    pool_problems,
    reservation_name_problems,
    reservation_problems,
)
from tpuplane.infra.errors import ConfigError, Problem
from tpuplane.infra.naming import DNS_LABEL, GKE_NAME, PROJECT_ID, REGION, SERVICE_ACCOUNT_EMAIL, ZONE

CLUSTER_ARGS, POOL_ARGS, RESERVATION_ARGS = "TpuClusterArgs", "TpuSlicePoolArgs", "TpuReservationArgs"
# Stands in, while the Args are checked, for a reservation name that is another resource's output (a
# `TpuReservation` of the same program): a valid name, so only the rules that do not depend on it judge.
PENDING_RESERVATION = "pending-reservation"
_POOL_FIELDS = ("tpu_type", "slices", "capacity", "reservation", "machine_type", "max_run_duration",
                "maintenance_interval", "disk_size_gb", "disk_type", "accelerator_network")
_SLICE_POOL_FIELDS = (*_POOL_FIELDS, "project", "location", "zone", "cluster", "cluster_name", "service_account",
                      "group", "dedicated_slices", "dedicated_owner")
_LOCATION = re.compile(f"{REGION.pattern}(-[a-z])?")
_PROJECT, _ZONE = "a GCP project id, e.g. acme-ml", "a zone, e.g. us-east5-b"


def cluster_config(args: Mapping[str, Any]) -> ClusterConfig:
    """`TpuClusterArgs` as the stack config's cluster section."""
    args = given(args, CLUSTER_ARGS)
    problems = text_problems(args, CLUSTER_ARGS, "project", pattern=PROJECT_ID, allowed=_PROJECT)
    problems += text_problems(args, CLUSTER_ARGS, "region", pattern=REGION, allowed="a region, e.g. us-east5")
    if problems:
        raise ConfigError(problems)
    require_flag(args, CLUSTER_ARGS, "multi_networking")
    cluster = model_from_args(ClusterConfig, {k: v for k, v in args.items()
                                              if k not in ("project", "region", "multi_networking")}, CLUSTER_ARGS)
    problems = cluster_problems(cluster, region=args["region"], path=CLUSTER_ARGS,
                                region_path=f"{CLUSTER_ARGS}.region")
    if problems:
        raise ConfigError(snake_paths(problems))
    return cluster


def slice_pool_cluster_name(args: Mapping[str, Any]) -> str | None:
    """The cluster's name as text: `cluster_name`, or `cluster` when it is not an Output."""
    return args.get("cluster_name") or (args["cluster"] if isinstance(args.get("cluster"), str) else None)


def _slice_pool_field_problems(args: Mapping[str, Any]) -> list[Problem]:
    """The fields no stack config rule reads: where the pools go, on which cluster, as whom, held by whom."""
    problems = text_problems(args, POOL_ARGS, "project", pattern=PROJECT_ID, allowed=_PROJECT)
    problems += text_problems(args, POOL_ARGS, "location", pattern=_LOCATION, allowed="the cluster's region or zone")
    problems += text_problems(args, POOL_ARGS, "zone", pattern=ZONE, allowed=_ZONE)
    problems += text_problems(args, POOL_ARGS, "cluster", pattern=GKE_NAME, allowed="a GKE cluster name",
                              output_ok=True)
    problems += text_problems(args, POOL_ARGS, "cluster_name", pattern=GKE_NAME, allowed="a GKE cluster name",
                              required=False)
    problems += text_problems(args, POOL_ARGS, "service_account", pattern=SERVICE_ACCOUNT_EMAIL,
                              allowed="a service account email", required=False, output_ok=True)
    problems += text_problems(args, POOL_ARGS, "group", pattern=DNS_LABEL, allowed="a node pool name prefix",
                              required=False)
    if problems:
        return problems
    if args.get("tpu_type") is None:
        return [Problem(f"{POOL_ARGS}.tpu_type", None, "a TPU type, e.g. v6e-16", "this field is required")]
    dedicated = args.get("dedicated_slices", 0)
    if isinstance(dedicated, bool) or not isinstance(dedicated, int) or dedicated < 0:
        return [Problem(f"{POOL_ARGS}.dedicated_slices", dedicated, "a whole number of slices, 0 or more")]
    return text_problems(args, POOL_ARGS, "dedicated_owner", pattern=DNS_LABEL, required=dedicated > 0,
                         allowed="the name of the service that holds the dedicated slices (a DNS label)")


def slice_pool_config(name: str, args: Mapping[str, Any]) -> TpuPoolConfig:
    """`TpuSlicePoolArgs` as one `tpuplane:tpuPools` entry named after the group (default: the component)."""
    args = given(args, POOL_ARGS)
    reject_unknown(args, POOL_ARGS, _SLICE_POOL_FIELDS)
    problems = _slice_pool_field_problems(args)
    if problems:
        raise ConfigError(problems)
    group = args.get("group") or name
    pool = model_from_args(TpuPoolConfig, {"name": group, **{f: args[f] for f in _POOL_FIELDS if f in args}},
                           POOL_ARGS)
    cluster_name = slice_pool_cluster_name(args)
    problems = pool_problems(pool, POOL_ARGS, cluster_name=cluster_name or "", project=args["project"])
    # the group's name is `group`, or the component's name when `group` is not given
    problems = [Problem(f"{POOL_ARGS}.group", p.given, p.allowed, p.hint or "the group name defaults to the "
                        "component's name") if p.path == f"{POOL_ARGS}.name" else p for p in problems]
    if not problems and pool.spec.needs_workload_policy and not cluster_name:
        problems.append(Problem(f"{POOL_ARGS}.cluster_name", None, "the cluster's name as plain text",
                                f"{pool.tpu_type} slices need a workload policy named after the cluster"))
    if args.get("dedicated_slices", 0) > pool.slices:
        problems.append(Problem(f"{POOL_ARGS}.dedicated_slices", args["dedicated_slices"],
                                f"0 to slices ({pool.slices})"))
    if problems:
        raise ConfigError(snake_paths(problems))
    return pool


def pending_reservation_problems(pool: TpuPoolConfig, value: object, project: str) -> list[Problem]:
    """The reservation rules for a name known only once another resource exists (`PENDING_RESERVATION` stood in
    while the rest of the Args was checked)."""
    if not isinstance(value, str):
        return [Problem(f"{POOL_ARGS}.reservation", value, "a reservation name")]
    return reservation_name_problems(pool.model_copy(update={"reservation": value}), POOL_ARGS, project)


def reservation_config(name: str, args: Mapping[str, Any]) -> ReservationConfig:
    """`TpuReservationArgs` as one `tpuplane:reservations` entry named `name` unless the Args name it."""
    args = given(args, RESERVATION_ARGS)
    problems = text_problems(args, RESERVATION_ARGS, "project", pattern=PROJECT_ID, allowed=_PROJECT)
    problems += text_problems(args, RESERVATION_ARGS, "zone", pattern=ZONE, allowed=_ZONE)
    problems += text_problems(args, RESERVATION_ARGS, "name", required=False, allowed="a reservation name")
    if problems:
        raise ConfigError(problems)
    require_flag(args, RESERVATION_ARGS, "keep_on_delete")
    fields = {"name": args.get("name") or name,
              **{k: v for k, v in args.items() if k not in ("name", "project", "keep_on_delete")}}
    res = model_from_args(ReservationConfig, fields, RESERVATION_ARGS)
    problems = reservation_problems(res, RESERVATION_ARGS)
    if problems:
        raise ConfigError(snake_paths(problems))
    return res
