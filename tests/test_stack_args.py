"""The stack config and the components' Args are two spellings of one platform: a stack's config mapped to Args
(`tpuplane.infra.stack_args`) reads back, through the components' own Args readers, into the very models and plans
the config gives. Pure: no Pulumi."""

from __future__ import annotations

import pytest
from conftest import stack_file_config

from tpuplane.infra import stack_args
from tpuplane.infra.batch.args import platform_from_args
from tpuplane.infra.batch.kueue import controller_releases, render_queue_objects
from tpuplane.infra.config import StackConfig, load_stack_config
from tpuplane.infra.fleet.args import cluster_config, reservation_config, slice_pool_config
from tpuplane.infra.pathways.args import service_plan
from tpuplane.infra.pathways.config import plan_service, team_namespaces


@pytest.fixture(params=["dev", "pathways", "prod"])
def cfg(request) -> StackConfig:
    return load_stack_config(stack_file_config(request.param))


def test_stack_args_cluster_reads_back_as_the_cluster_section(cfg):
    assert cluster_config(stack_args.cluster_args(cfg)) == cfg.cluster


def test_stack_args_slice_pools_read_back_as_the_pool_entries(cfg):
    for pool in cfg.tpu_pools:
        args = {**stack_args.slice_pool_args(cfg, pool), "cluster": cfg.cluster.name}
        assert slice_pool_config(pool.name, args) == pool


def test_stack_args_reservations_read_back_in_the_clusters_zone(cfg):
    for res in cfg.reservations:
        read = reservation_config(res.name, stack_args.reservation_args(cfg, res))
        assert read.model_copy(update={"zone": res.zone}) == res and read.zone == (res.zone or cfg.cluster.zone)


def test_stack_args_batch_renders_the_stacks_kueue_objects_and_controllers(cfg):
    """The Args describe pools only as far as Kueue reads them: the same flavors, quotas, queues and charts."""
    platform = platform_from_args(stack_args.batch_args(cfg))
    assert render_queue_objects(platform, "cpu") == render_queue_objects(cfg.batch_platform, "cpu")
    assert controller_releases(platform, "cpu") == controller_releases(cfg.batch_platform, "cpu")


def test_stack_args_pathways_service_plans_as_the_stack_does():
    cfg = load_stack_config(stack_file_config("pathways"))
    args = {**stack_args.service_args(cfg), "node_service_account": "nodes@acme.iam.gserviceaccount.com"}
    pool = cfg.pool_by_name(cfg.pathways.tpu_pool)
    assert service_plan("ignored-component-name", args) == plan_service(
        cfg.pathways, pool, project=cfg.project, cluster_name=cfg.cluster.name, client_namespaces=team_namespaces(cfg))
