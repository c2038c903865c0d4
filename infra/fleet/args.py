"""The Args of `TpuCluster`, `TpuSlicePool` and `TpuReservation`, read into the stack config's own models and
checked by its own rules before the component registers anything; errors name the Args field."""

from __future__ import annotations

from typing import Any, Mapping

from tpuplane.infra.args import check_args, model_from_args, reject_unknown, renamed, require_flag, require_text
from tpuplane.infra.config import (
    ClusterConfig,
    ReservationConfig,
    TpuPoolConfig,
    cluster_problems,
    pool_problems,
    reservation_problems,
)
from tpuplane.infra.errors import ConfigError, Problem

CLUSTER_ARGS, POOL_ARGS, RESERVATION_ARGS = "TpuClusterArgs", "TpuSlicePoolArgs", "TpuReservationArgs"
# Stands in, while the Args are checked, for a reservation name that is another resource's output (a
# `TpuReservation` of the same program): a valid name, so only the rules that do not depend on it judge.
PENDING_RESERVATION = "pending-reservation"
_POOL_FIELDS = ("tpu_type", "slices", "capacity", "reservation", "machine_type", "max_run_duration",
                "maintenance_interval", "disk_size_gb", "disk_type", "accelerator_network")
_SLICE_POOL_FIELDS = (*_POOL_FIELDS, "project", "location", "zone", "cluster", "cluster_name", "service_account",
                      "group", "dedicated_slices", "dedicated_owner")


def cluster_config(args: Mapping[str, Any]) -> ClusterConfig:
    """`TpuClusterArgs` as the stack config's cluster section."""
    check_args(args, CLUSTER_ARGS)
    require_text(args, CLUSTER_ARGS, ("project", "region"))
    require_flag(args, CLUSTER_ARGS, "multi_networking")
    cluster = model_from_args(ClusterConfig, {k: v for k, v in args.items()
                                              if k not in ("project", "region", "multi_networking")}, CLUSTER_ARGS)
    problems = cluster_problems(cluster, region=args["region"], path=CLUSTER_ARGS,
                                region_path=f"{CLUSTER_ARGS}.region")
    if problems:
        raise ConfigError(renamed(problems, {CLUSTER_ARGS: CLUSTER_ARGS}))
    return cluster


def slice_pool_cluster_name(args: Mapping[str, Any]) -> str | None:
    """The cluster's name as text: `cluster_name`, or `cluster` when it is not an Output."""
    return args.get("cluster_name") or (args["cluster"] if isinstance(args.get("cluster"), str) else None)


def slice_pool_config(name: str, args: Mapping[str, Any]) -> TpuPoolConfig:
    """`TpuSlicePoolArgs` as one `tpuplane:tpuPools` entry named after the group (default: the component)."""
    check_args(args, POOL_ARGS)
    reject_unknown(args, POOL_ARGS, _SLICE_POOL_FIELDS)
    missing = [f for f in ("project", "location", "zone", "cluster", "tpu_type") if args.get(f) is None]
    if missing:
        raise ConfigError([Problem(f"{POOL_ARGS}.{f}", None, "a value", "this field is required") for f in missing])
    fields = {"name": args.get("group") or name, **{f: args[f] for f in _POOL_FIELDS if f in args}}
    pool = model_from_args(TpuPoolConfig, fields, POOL_ARGS)
    cluster_name = slice_pool_cluster_name(args)
    problems = pool_problems(pool, POOL_ARGS, cluster_name=cluster_name or "", project=args["project"])
    if not problems and pool.spec.needs_workload_policy and not cluster_name:
        problems.append(Problem(f"{POOL_ARGS}.cluster_name", None, "the cluster's name as plain text",
                                f"{pool.tpu_type} slices need a workload policy named after the cluster"))
    dedicated = args.get("dedicated_slices", 0)
    if isinstance(dedicated, bool) or not isinstance(dedicated, int) or not 0 <= dedicated <= pool.slices:
        problems.append(Problem(f"{POOL_ARGS}.dedicated_slices", dedicated, f"0 to slices ({pool.slices})"))
    if problems:
        raise ConfigError(renamed(problems, {POOL_ARGS: POOL_ARGS}))
    return pool


def reservation_config(name: str, args: Mapping[str, Any]) -> ReservationConfig:
    """`TpuReservationArgs` as one `tpuplane:reservations` entry named `name` unless the Args name it."""
    check_args(args, RESERVATION_ARGS)
    require_text(args, RESERVATION_ARGS, ("project", "zone"))
    require_flag(args, RESERVATION_ARGS, "keep_on_delete")
    fields = {"name": args.get("name") or name,
              **{k: v for k, v in args.items() if k not in ("name", "project", "keep_on_delete")}}
    res = model_from_args(ReservationConfig, fields, RESERVATION_ARGS)
    problems = reservation_problems(res, RESERVATION_ARGS)
    if problems:
        raise ConfigError(renamed(problems, {RESERVATION_ARGS: RESERVATION_ARGS}))
    return res
