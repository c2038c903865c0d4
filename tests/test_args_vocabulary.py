"""One vocabulary: each component's Args `TypedDict` (what Pulumi serves to every language) says what the model that
reads it declares, field for field, required for required, and the defaults its docstrings state are the model's."""

from __future__ import annotations

import ast
import inspect
import typing
from enum import Enum

import pytest
from pydantic import BaseModel

from tpuplane.components import (
    AuthorizedNetworkArgs,
    AutoprovisioningArgs,
    BatchStackArgs,
    CpuPoolArgs,
    FilestoreShareArgs,
    GcsBucketArgs,
    ImageCacheArgs,
    KueuePoolArgs,
    KueueTeamArgs,
    LustreArgs,
    MaintenanceExclusionArgs,
    ParallelstoreArgs,
    PersistentDiskArgs,
    ProxyJanitorArgs,
    SharedPathwaysServiceArgs,
    SidecarImageArgs,
    SliceAutoscalingArgs,
    StorageVolumeArgs,
    TeamStorageArgs,
    TpuClusterArgs,
    TpuReservationArgs,
    TpuSlicePoolArgs,
    WorkloadTeamArgs,
)
from tpuplane.infra.batch.image_cache import ImageCacheSpec
from tpuplane.infra.batch.kueue_config import KueueTeam, WorkloadTeam
from tpuplane.infra.batch.platform import BatchPlatform
from tpuplane.infra.fleet.autoscaling import Autoprovisioning, SliceAutoscaling
from tpuplane.infra.fleet.cluster import AuthorizedNetwork, ClusterSpec, CpuPool, MaintenanceExclusion
from tpuplane.infra.fleet.pools import KueuePool, SlicePoolSpec
from tpuplane.infra.fleet.reservations import ReservationSpec
from tpuplane.infra.model import nested_model
from tpuplane.infra.pathways.args import SidecarBuild
from tpuplane.infra.pathways.config import ServiceSpec
from tpuplane.infra.pathways.proxy import JanitorSpec
from tpuplane.infra.storage.args import TeamStorageSpec
from tpuplane.infra.storage.volumes import (
    FilestoreShare,
    GcsBucket,
    LustreInstance,
    ParallelstoreInstance,
    PersistentDisk,
    StorageEntry,
)

VOCABULARY = {
    TpuClusterArgs: ClusterSpec, CpuPoolArgs: CpuPool, MaintenanceExclusionArgs: MaintenanceExclusion,
    AuthorizedNetworkArgs: AuthorizedNetwork, TpuSlicePoolArgs: SlicePoolSpec, KueuePoolArgs: KueuePool,
    TpuReservationArgs: ReservationSpec, BatchStackArgs: BatchPlatform, KueueTeamArgs: KueueTeam,
    SharedPathwaysServiceArgs: ServiceSpec, ProxyJanitorArgs: JanitorSpec, SidecarImageArgs: SidecarBuild,
    ImageCacheArgs: ImageCacheSpec, AutoprovisioningArgs: Autoprovisioning, SliceAutoscalingArgs: SliceAutoscaling,
    TeamStorageArgs: TeamStorageSpec, WorkloadTeamArgs: WorkloadTeam, StorageVolumeArgs: StorageEntry,
    GcsBucketArgs: GcsBucket, FilestoreShareArgs: FilestoreShare, ParallelstoreArgs: ParallelstoreInstance,
    LustreArgs: LustreInstance, PersistentDiskArgs: PersistentDisk,
}
# Required by the model, optional in the Args: the component's name stands in.
NAMED_AFTER_THE_COMPONENT = {TpuSlicePoolArgs: {"group"}, TpuReservationArgs: {"name"},
                             SharedPathwaysServiceArgs: {"service_name"}}
ARGS = pytest.mark.parametrize("args", list(VOCABULARY), ids=lambda args: args.__name__)


def field_docs(args: type) -> dict[str, str]:
    """Each field's docstring, as Pulumi's analyzer reads it from the source."""
    body = ast.parse(inspect.getsource(args)).body[0].body
    return {node.target.id: " ".join(body[i + 1].value.value.split()) for i, node in enumerate(body)
            if isinstance(node, ast.AnnAssign) and i + 1 < len(body) and isinstance(body[i + 1], ast.Expr)}


def shown(value: object) -> str:
    """A default as a docstring writes it."""
    if isinstance(value, bool):
        return str(value).lower()
    return value.value if isinstance(value, Enum) else str(value)


def hints(args: type) -> dict[str, object]:
    """Each field's type, `NotRequired[...]` unwrapped (its own annotations: `pulumi.Input` cannot be resolved)."""
    return {name: typing.get_args(hint)[0] if typing.get_origin(hint) is typing.NotRequired else hint
            for name, hint in args.__annotations__.items()}


@ARGS
def test_args_name_the_models_fields(args):
    assert set(hints(args)) == set(VOCABULARY[args].model_fields)


@ARGS
def test_args_require_what_the_model_requires(args):
    model = VOCABULARY[args]
    required = {name for name, info in model.model_fields.items() if info.is_required()}
    assert set(args.__required_keys__) == required - NAMED_AFTER_THE_COMPONENT.get(args, set())


@ARGS
def test_nested_args_are_the_nested_models(args):
    model = VOCABULARY[args]
    for name, hint in hints(args).items():
        nested = next((VOCABULARY[t] for t in (hint, *typing.get_args(hint)) if t in VOCABULARY), None)
        assert nested_model(model.model_fields[name].annotation) is nested, name


@ARGS
def test_args_docstrings_state_the_models_defaults(args):
    docs, unstated = field_docs(args), []
    for name, info in VOCABULARY[args].model_fields.items():
        if info.is_required() or info.default in (None, "", [], {}) or isinstance(info.default, BaseModel):
            continue  # nothing to state, or a nested model's own defaults
        value = shown(info.default)
        stated = (f"default {value}", f"default `{value}`", f"Default {value}", f"{value} (default)")
        if not any(form in docs[name] for form in stated):
            unstated.append((name, value, docs[name]))
    assert unstated == []
