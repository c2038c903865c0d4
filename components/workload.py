"""TPU workloads as stack resources: `TpuWorkload` (one JobSet), `TpuExperiment` (one JobSet per trial) and
`ImageCache` (a DaemonSet that pre-pulls images onto the TPU nodes).

Every check runs before the component registers, so a workload for a TPU type no pool provides stops
`pulumi preview` with a ConfigError. Given the stack's `BatchStack`, JobSets wait for the JobSet controller,
Kueue's webhook and the LocalQueues (a JobSet created before them would be rejected or never admitted).

A JobSet's spec is immutable, so any change to it replaces the JobSet (deleted first: the name is fixed), i.e.
re-runs it. JobSets a stack owns carry no `ttlSecondsAfterFinished` unless the spec asks for one: a finished
JobSet the TTL deleted would vanish on `pulumi refresh` and be created, i.e. run, again by the next `pulumi up`.
Delete a finished run by removing it from the program.
"""

from __future__ import annotations

from typing import Optional

import pulumi

from tpuplane.components.batch import BatchStack
from tpuplane.components.manifests import manifest_resource
from tpuplane.infra.config import StackConfig
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.batch.experiments import ExperimentSpec, render_experiment
from tpuplane.infra.batch.image_cache import DEFAULT_CACHE_NAME, render_image_cache
from tpuplane.infra.batch.workload import TpuWorkloadSpec, render_tpu_jobset


def _batch_dependencies(batch: BatchStack | None) -> list[pulumi.Resource]:
    if batch is None:
        return []
    return [batch.jobset_release, batch.webhook_ready, *batch.queue_resources]


def jobset_options(parent: pulumi.Resource, batch: BatchStack | None) -> pulumi.ResourceOptions:
    """A JobSet's spec cannot be patched: replace it on any spec change, deleting the old one first (same name)."""
    return pulumi.ResourceOptions(parent=parent, depends_on=_batch_dependencies(batch),
                                  replace_on_changes=["spec"], delete_before_replace=True)


class TpuWorkload(pulumi.ComponentResource):
    """One JobSet, checked against the stack's pools and queues."""

    jobset: pulumi.Resource
    jobset_name: str

    def __init__(self, name: str, workload: TpuWorkloadSpec, cfg: StackConfig, *, batch: BatchStack | None = None,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        manifest = render_tpu_jobset(workload, cfg)
        super().__init__("tpuplane:index:TpuWorkload", name, {}, opts)
        self.jobset_name = manifest["metadata"]["name"]
        self.jobset = manifest_resource(manifest, jobset_options(self, batch))
        self.register_outputs({"jobsetName": self.jobset_name, "namespace": manifest["metadata"]["namespace"]})


class TpuExperiment(pulumi.ComponentResource):
    """One JobSet per trial of an experiment (or one job-group JobSet per trial)."""

    jobsets: list[pulumi.Resource]
    trial_names: list[str]

    def __init__(self, name: str, experiment: ExperimentSpec, cfg: StackConfig, *, batch: BatchStack | None = None,
                 opts: Optional[pulumi.ResourceOptions] = None) -> None:
        manifests = render_experiment(experiment, cfg)
        super().__init__("tpuplane:index:TpuExperiment", name, {}, opts)
        self.jobsets = [manifest_resource(m, jobset_options(self, batch)) for m in manifests]
        self.trial_names = [m["metadata"]["name"] for m in manifests]
        self.register_outputs({"trials": self.trial_names})


class ImageCache(pulumi.ComponentResource):
    """A DaemonSet on every TPU node that keeps `images` pulled, so large jobs start without a pull storm."""

    daemonset: pulumi.Resource

    def __init__(self, name: str, images: list[str], cfg: StackConfig, *, cache_name: str = DEFAULT_CACHE_NAME,
                 namespace: str = "default", opts: Optional[pulumi.ResourceOptions] = None) -> None:
        if not cfg.tpu_pools:
            raise ConfigError.at("tpuplane:tpuPools", [], "at least one TPU pool", "the image cache runs on TPU nodes")
        manifest = render_image_cache(images, name=cache_name, namespace=namespace)
        super().__init__("tpuplane:index:ImageCache", name, {}, opts)
        self.daemonset = manifest_resource(manifest, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"images": list(dict.fromkeys(images))})
