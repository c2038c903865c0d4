"""TPU workloads as stack resources: `TpuWorkload` (one JobSet), `TpuExperiment` (one JobSet per trial) and
`ImageCache` (a DaemonSet that pre-pulls images onto the TPU nodes).

Every check runs before the component registers, so a workload for a TPU type no pool provides stops
`pulumi preview` with a ConfigError. Given `opts.depends_on=[batch_stack]`, the JobSets wait for the JobSet
controller, Kueue's webhook and the LocalQueues (a JobSet created before them would be rejected or never admitted).

A JobSet's spec is immutable, so any change to it replaces the JobSet (deleted first: the name is fixed), i.e.
re-runs it. JobSets a stack owns carry no `ttlSecondsAfterFinished` unless the spec asks for one: a finished
JobSet the TTL deleted would vanish on `pulumi refresh` and be created, i.e. run, again by the next `pulumi up`.
Delete a finished run by removing it from the program.
"""

from typing import Any, NotRequired, Optional, TypedDict

import pulumi

from tpuplane.components.batch_args import BatchStackArgs
from tpuplane.components.storage import TeamStorageArgs
from tpuplane.components.manifests import manifest_resource
from tpuplane.components.options import child_options
from tpuplane.infra.args import Source
from tpuplane.infra.batch.args import rendered_workload
from tpuplane.infra.batch.image_cache import IMAGE_CACHE_ARGS, ImageCacheSpec, read_image_cache, render_image_cache
from tpuplane.infra.batch.experiments import ExperimentSpec, render_experiment
from tpuplane.infra.batch.workload import TpuWorkloadSpec, render_tpu_jobset


class TpuWorkloadArgs(TypedDict):
    """One TPU workload (a JobSet), checked against the pools and queues of a `BatchStack`."""

    workload: dict[str, Any]
    """The workload as a workload file spells it: name, jobs (tpuType, slices, image, command, ...), queue, mounts,
    pathways, ..."""
    batch: NotRequired[BatchStackArgs]
    """The Args of the cluster's `BatchStack`: the workload must fit its pools, queues and quotas."""
    storage: NotRequired[TeamStorageArgs]
    """The Args of the cluster's `TeamStorage` (`TeamStorage(...).args`): the workload's mounts must name its
    storage, and its pods run as their team's service account."""


class TpuExperimentArgs(TypedDict):
    """An experiment: a workload template and a grid or list of trials, one JobSet per trial."""

    experiment: dict[str, Any]
    """The experiment as an experiment file spells it: a workload plus `grid` or `trials`."""
    batch: NotRequired[BatchStackArgs]
    """The Args of the cluster's `BatchStack`: every trial must fit its pools, queues and quotas."""
    storage: NotRequired[TeamStorageArgs]
    """The Args of the cluster's `TeamStorage`: every trial's mounts must name its storage."""


class ImageCacheArgs(TypedDict):
    """Images every TPU node keeps pulled, so large jobs start without a pull storm."""

    images: list[str]
    """Images, pinned by tag or digest; pulled in this order."""
    cache_name: NotRequired[str]
    """The DaemonSet's name (default `image-cache`)."""
    namespace: NotRequired[str]
    """Its namespace (default `default`)."""


def jobset_options(parent: pulumi.Resource, opts: Optional[pulumi.ResourceOptions]) -> pulumi.ResourceOptions:
    """A JobSet's spec cannot be patched: replace it on any spec change, deleting the old one first (same name)."""
    return child_options(parent, opts,
                                  replace_on_changes=["spec"], delete_before_replace=True)


class TpuWorkload(pulumi.ComponentResource):
    """One JobSet, checked against the pools and queues of `batch`. Child: `jobset`."""

    jobset_name: pulumi.Output[str]
    """The JobSet's name."""
    namespace: pulumi.Output[str]
    """Its namespace (the LocalQueue's)."""

    def __init__(self, name: str, args: TpuWorkloadArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        manifest = rendered_workload(args, "TpuWorkloadArgs", "workload", TpuWorkloadSpec, render_tpu_jobset)
        super().__init__("tpuplane:index:TpuWorkload", name, {}, opts)
        self.jobset = manifest_resource(manifest, jobset_options(self, opts))
        self.jobset_name = pulumi.Output.from_input(manifest["metadata"]["name"])
        self.namespace = pulumi.Output.from_input(manifest["metadata"]["namespace"])
        self.register_outputs({"jobset_name": self.jobset_name, "namespace": self.namespace})


class TpuExperiment(pulumi.ComponentResource):
    """One JobSet per trial of an experiment (or one job-group JobSet per trial). Children: `jobsets`."""

    trial_names: pulumi.Output[list[str]]
    """The trials' JobSet names, in trial order."""

    def __init__(self, name: str, args: TpuExperimentArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        manifests = rendered_workload(args, "TpuExperimentArgs", "experiment", ExperimentSpec, render_experiment)
        super().__init__("tpuplane:index:TpuExperiment", name, {}, opts)
        self.jobsets = [manifest_resource(m, jobset_options(self, opts)) for m in manifests]
        self.trial_names = pulumi.Output.from_input([m["metadata"]["name"] for m in manifests])
        self.register_outputs({"trial_names": self.trial_names})


class ImageCache(pulumi.ComponentResource):
    """A DaemonSet on every TPU node that keeps `images` pulled. Child: `daemonset`."""

    images: pulumi.Output[list[str]]
    """The images it keeps, deduplicated, in pull order."""

    def __init__(self, name: str, args: ImageCacheArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        spec = read_image_cache(args, Source.args(IMAGE_CACHE_ARGS, ImageCacheSpec))
        manifest = render_image_cache(spec)
        super().__init__("tpuplane:index:ImageCache", name, {}, opts)
        self.daemonset = manifest_resource(manifest, child_options(self, opts))
        self.images = pulumi.Output.from_input(list(dict.fromkeys(spec.images)))
        self.register_outputs({"images": self.images})
