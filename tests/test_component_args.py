"""Every component checks its whole Args before it registers anything: a bad field is a ConfigError naming the Args
field, and the program registers ZERO resources. Pulumi's mocks stand in for GCP and Kubernetes (which cannot exist
here); the registrations are counted at the mock monitor."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pulumi_gcp
import pytest

from tpuplane.components import (
    BatchStack,
    FleetDashboard,
    ImageCache,
    ProxyJanitor,
    TpuCluster,
    TeamStorage,
    TpuExperiment,
    TpuReservation,
    TpuWorkload,
)
from tpuplane.components.offline import run_under_mocks
from tpuplane.infra.errors import ConfigError

BATCH: dict[str, Any] = {"pools": [{"name": "train", "tpu_type": "v6e-16", "slices": 4, "capacity": "spot"}],
                         "teams": [{"name": "research", "share": 0.5}, {"name": "serving", "share": 0.5}]}
JOB = {"tpuType": "v6e-16", "capacity": "spot", "image": "img:1", "command": "python train.py"}
VALID: dict[type, dict[str, Any]] = {
    TpuCluster: {"project": "acme-ml", "region": "us-east5", "name": "fleet", "zone": "us-east5-b"},
    TpuReservation: {"project": "acme-ml", "zone": "us-east5-b", "tpu_type": "v5p-128"},
    BatchStack: BATCH,
    TpuWorkload: {"workload": {"name": "train", "queue": "research", "namespace": "research", "jobs": [JOB]},
                  "batch": BATCH},
    TpuExperiment: {"experiment": {"name": "lr", "queue": "research", "namespace": "research", "jobs": [JOB],
                                   "grid": {"lr": [0.1, 0.2]}}, "batch": BATCH},
    ImageCache: {"images": ["us-docker.pkg.dev/p/r/img:1"]},
    ProxyJanitor: {"namespace": "research", "image": "us-docker.pkg.dev/p/r/tpuplane:1"},
    TeamStorage: {"project": "acme-ml", "teams": [{"name": "research"}],
                  "volumes": [{"name": "data", "teams": ["research"], "gcs": {"bucket": "gs://acme-data"}}]},
    FleetDashboard: {"project": "acme-ml", "cluster_name": "fleet"},
}


def construct(component: type, changes: dict[str, Any]) -> None:
    args = {**copy.deepcopy(VALID[component]), **changes}
    run_under_mocks(lambda: component("subject", {k: v for k, v in args.items() if v is not None}), {})


@pytest.mark.parametrize("component", list(VALID), ids=lambda c: c.__name__)
def test_component_valid_args_register_it(component, registrations):
    construct(component, {})
    assert registrations[0] == f"tpuplane:index:{component.__name__}::subject"


@pytest.mark.parametrize("component, changes, path", [
    (TpuCluster, {"zone": "europe-west4-a"}, "TpuClusterArgs.zone"),
    (TpuCluster, {"name": "Fleet"}, "TpuClusterArgs.name"),
    (TpuCluster, {"release_channel": "NIGHTLY"}, "TpuClusterArgs.release_channel"),
    (TpuCluster, {"cpu_pool": {"min_nodes": 5, "max_nodes": 2}}, "TpuClusterArgs.cpu_pool.min_nodes"),
    (TpuCluster, {"private_endpoint": True}, "TpuClusterArgs.private_endpoint"),
    (TpuCluster, {"region": None}, "TpuClusterArgs.region"),
    (TpuCluster, {"nodes": 3}, "TpuClusterArgs.nodes"),
    (TpuReservation, {"tpu_type": "v5p-129"}, "TpuReservationArgs.tpu_type"),
    (TpuReservation, {"slices": 0}, "TpuReservationArgs.slices"),
    (TpuReservation, {"name": "Bad_Name"}, "TpuReservationArgs.name"),
    (TpuReservation, {"zone": None}, "TpuReservationArgs.zone"),
    (BatchStack, {"pools": [{"name": "train", "tpu_type": "v6e-17"}]}, "BatchStackArgs.pools[0].tpu_type"),
    (BatchStack, {"pools": [{"name": "train", "tpu_type": "v6e-16", "slices": True}]}, "BatchStackArgs.pools[0].slices"),
    (BatchStack, {"pools": [{"name": "a", "tpu_type": "v6e-16"}, {"name": "a", "tpu_type": "v6e-8"}]},
     "BatchStackArgs.pools[1].name"),
    (BatchStack, {"teams": [{"name": "a", "share": 0.7}, {"name": "b", "share": 0.7}]}, "BatchStackArgs.teams[1].share"),
    (BatchStack, {"teams": [{"name": "kube-system", "share": 0.5}]}, "BatchStackArgs.teams[0].name"),
    (BatchStack, {"kueue_version": "v0.19.2"}, "BatchStackArgs.kueue_version"),
    (BatchStack, {"kueue_version": 19}, "BatchStackArgs.kueue_version"),
    (BatchStack, {"cpu_machine_type": "n2-weird"}, "BatchStackArgs.cpu_machine_type"),
    (BatchStack, {"cpu_max_nodes": 0}, "BatchStackArgs.cpu_max_nodes"),
    (BatchStack, {"service_namespaces": ["Not A Namespace"]}, "BatchStackArgs.service_namespaces[0]"),
    (BatchStack, {"service_namespaces": ["research"]}, "BatchStackArgs.service_namespaces[0]"),
    (BatchStack, {"cluster_name": 7}, "BatchStackArgs.cluster_name"),
    (BatchStack, {"pools": [{"name": "big", "tpu_type": "tpu7x-128"}]}, "BatchStackArgs.cluster_name"),
    (BatchStack, {"pools": [{"name": "Train_X", "tpu_type": "v6e-16"}]}, "BatchStackArgs.pools[0].name"),
    (BatchStack, {"pools": [{"name": "t", "tpu_type": "v6e-16", "max_run_duration": "60s"}]},
     "BatchStackArgs.pools[0].max_run_duration"),
    (BatchStack, {"pools": ["train"]}, "BatchStackArgs.pools[0]"),
    (BatchStack, {"pools": None}, "BatchStackArgs.pools"),
    (TpuWorkload, {"workload": {"name": "train", "queue": "research", "namespace": "research",
                                "jobs": [{**JOB, "tpuType": "v5p-128"}]}}, "TpuWorkloadArgs.workload.jobs[0].tpuType"),
    (TpuWorkload, {"workload": {"name": "train", "jobs": [JOB]}}, "TpuWorkloadArgs.workload.queue"),
    (TpuWorkload, {"workload": {"name": "eval", "queue": "research", "namespace": "research",
                                "jobs": [{**JOB, "tpuType": "v4-8", "slices": 2}]}},
     "TpuWorkloadArgs.workload.jobs[0].slices"),  # GKE: no Multislice on single-host slices
    (TpuWorkload, {"batch": {"pools": "train"}}, "TpuWorkloadArgs.batch.pools"),
    (TpuExperiment, {"experiment": {"name": "lr", "queue": "research", "namespace": "research", "jobs": [JOB],
                                    "grid": {"lr": []}}}, "TpuExperimentArgs.experiment.grid.lr"),
    (TpuWorkload, {"bacth": BATCH}, "TpuWorkloadArgs.bacth"),
    (TpuWorkload, {"workload": 123}, "TpuWorkloadArgs.workload"),
    (TpuWorkload, {"workload": {"name": "train", "queue": "research", "namespace": "research",
                                "jobs": [{**JOB, "slices": "two"}]}}, "TpuWorkloadArgs.workload.jobs[0].slices"),
    (TpuExperiment, {"experiment": ["lr"]}, "TpuExperimentArgs.experiment"),
    # the config file's camelCase keys are not the Args' spelling, at any depth
    (TpuCluster, {"cpu_pool": {"minNodes": 1, "max_nodes": 2}}, "TpuClusterArgs.cpu_pool.minNodes"),
    (BatchStack, {"teams": [{"name": "a", "share": 1.0, "borrowingLimit": 1.0}]}, "BatchStackArgs.teams[0].borrowingLimit"),
    (BatchStack, {"pools": [{"name": "train", "tpuType": "v6e-16"}]}, "BatchStackArgs.pools[0].tpuType"),
    (TpuWorkload, {"workload": {"name": "train", "queue": "research", "namespace": "research", "maxRestarts": 10**12,
                                "jobs": [JOB]}}, "TpuWorkloadArgs.workload.maxRestarts"),  # JobSet's int32
    (TpuExperiment, {"experiment": {"name": "lr", "queue": "research", "namespace": "research", "jobs": [JOB],
                                    "trials": []}}, "TpuExperimentArgs.experiment.trials"),
    (ImageCache, {"images": []}, "ImageCacheArgs.images"),
    (ImageCache, {"images": "us-docker.pkg.dev/p/r/img:1"}, "ImageCacheArgs.images"),
    (ImageCache, {"images": [{"image": "x"}]}, "ImageCacheArgs.images"),
    (ImageCache, {"namespace": "Bad Name!"}, "ImageCacheArgs.namespace"),
    (ImageCache, {"cache_name": None, "namespace": 7}, "ImageCacheArgs.namespace"),
    (ImageCache, {"cache_name": "Cache!"}, "ImageCacheArgs.cache_name"),
    (ProxyJanitor, {"schedule": "every minute"}, "ProxyJanitorArgs.schedule"),
    (ProxyJanitor, {"stale_after_seconds": 5}, "ProxyJanitorArgs.stale_after_seconds"),
    (ProxyJanitor, {"object_name": "x" * 60}, "ProxyJanitorArgs.object_name"),
])
def test_component_bad_args_name_the_field_and_register_nothing(component, changes, path, registrations):
    with pytest.raises(ConfigError) as raised:
        construct(component, changes)
    assert path in [p.path for p in raised.value.problems]
    assert registrations == []


@pytest.mark.parametrize("component", list(VALID), ids=lambda c: c.__name__)
def test_component_args_that_are_not_a_mapping_are_named(component, registrations):
    with pytest.raises(ConfigError, match=f"{component.__name__}Args"):
        run_under_mocks(lambda: component("subject", ["not", "args"]), {})
    assert registrations == []


def test_component_args_list_entries_are_named_by_index(registrations):
    with pytest.raises(ConfigError) as raised:
        construct(BatchStack, {"teams": [{"name": "a", "share": 0.5}, {"name": "b", "share": 1.5}]})
    assert [p.path for p in raised.value.problems] == ["BatchStackArgs.teams[1].share"]


@pytest.mark.parametrize("component", list(VALID), ids=lambda c: c.__name__)
def test_component_children_wait_for_what_the_callers_depends_on_names(component):
    def program() -> None:
        gate = pulumi_gcp.storage.Bucket("gate", name="gate", location="US")
        component("subject", copy.deepcopy(VALID[component]), opts=pulumi.ResourceOptions(depends_on=[gate]))

    plan = run_under_mocks(program, {})
    gate = plan.named("gate").urn
    children = [r for r in plan.resources if r.custom and r.urn != gate and "tpuplane:index:" in r.urn]
    assert children and all(gate in r.depends_on for r in children)
