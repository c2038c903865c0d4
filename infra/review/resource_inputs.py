"""What the reviewers (the fleet summary, key properties, the TPU impact of a diff) read of each resource type,
typed: the one declaration of every input field they read, in the engine's camelCase spelling.

A plan file is untrusted: any field may hold any JSON. Reading a resource's inputs through its type's model turns
a wrong type or an out-of-range number into a `Problem` at its path (`resources[3].inputs.nodeConfig.labels`)
instead of an AttributeError halfway through a report. Everything else a resource holds is not read, only shown,
and passes as it is. A value the engine marks secret, or that a plan file holds redacted (`[secret]`), reads as
absent wherever a mapping, list, number or flag is expected: it is not shown, and nothing is decided on it.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationInfo,
    field_validator,
)

from tpuplane.infra.model import camel
from tpuplane.infra.quantity import LIMIT, QUANTITY_ALLOWED, parse_quantity
from tpuplane.infra.redaction import PULUMI_SECRET_SIG, REDACTED

# The resource types the reviewers read (Pulumi type tokens).
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
RESERVATION = "gcp:compute/reservation:Reservation"
RESOURCE_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
PERSISTENT_VOLUME = "kubernetes:core/v1:PersistentVolume"
PERSISTENT_VOLUME_CLAIM = "kubernetes:core/v1:PersistentVolumeClaim"
BUCKET_GRANT = "gcp:storage/bucketIAMMember:BucketIAMMember"
PROJECT_GRANT = "gcp:projects/iAMMember:IAMMember"
GRANT_TYPES = (BUCKET_GRANT, PROJECT_GRANT)
DASHBOARD = "gcp:monitoring/dashboard:Dashboard"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
IMAGE = "docker-build:index:Image"


def _whole_number(value: object) -> object:
    """A count as JSON and the engine write it: an integer, or a float with nothing after the point (the engine
    sends every number as a float); never `true` or `"4"`."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("a whole number")
    return value


def _quantity(value: object) -> object:
    """A Kubernetes quantity as a manifest writes it ("64", "1000Mi", 64): text, shown as it is, or a number
    Kubernetes holds. One check, so a wrong value is one problem at the field, not one per member of a union of
    types."""
    if isinstance(value, str):
        return value
    try:
        parse_quantity(value)
    except ValueError:
        raise ValueError(QUANTITY_ALLOWED) from None
    return value


Count = Annotated[int, BeforeValidator(_whole_number), Field(ge=0, lt=int(LIMIT))]
Quantity = Annotated[StrictStr | StrictInt | StrictFloat, BeforeValidator(_quantity)]


class Inputs(BaseModel):
    """The read part of some inputs: typed, extra fields ignored (they are shown, never read)."""

    model_config = ConfigDict(alias_generator=camel, populate_by_name=True, extra="ignore", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _hidden_is_absent(cls, value: Any, info: ValidationInfo) -> Any:
        """A secret (engine-marked, or `[secret]` in a plan file) is text where text is read, else absent: the
        field itself, or an entry of a list of mappings."""
        if isinstance(value, list):
            if not any(_hidden(v) for v in value):
                return value
            value = [REDACTED if _hidden(v) else v for v in value]
            return value if _field_takes(cls, info.field_name)[1] else [v for v in value if v != REDACTED]
        if _hidden(value) and not _field_takes(cls, info.field_name)[0]:
            return None
        return REDACTED if isinstance(value, Mapping) and PULUMI_SECRET_SIG in value else value


def _hidden(value: Any) -> bool:
    """`[secret]`, or a value the engine marks secret."""
    return value == REDACTED if isinstance(value, str) else isinstance(value, Mapping) and PULUMI_SECRET_SIG in value


@functools.lru_cache(maxsize=None)  # one entry per field of the models above
def _field_takes(model: type[BaseModel], name: str) -> tuple[bool, bool]:
    """Whether the field takes text, and whether the items of its list (when it is one) do."""
    annotation = model.model_fields[name].annotation
    item = _list_item(annotation)
    return _takes_text(annotation), item is None or _takes_text(item)


def _list_item(annotation: Any) -> Any:
    """The item type of a list field (`list[Taint] | None` -> Taint), None when it is not a list."""
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return next((item for arg in typing.get_args(annotation) if (item := _list_item(arg)) is not None), None)
    return None


def _takes_text(annotation: Any) -> bool:
    """Does a field of this type take text (`StrictStr | None`, a quantity)? Containers and models do not."""
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _takes_text(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_takes_text(arg) for arg in typing.get_args(annotation))
    return False


class Autoscaling(Inputs):
    min_node_count: Count | None = None
    max_node_count: Count | None = None
    total_min_node_count: Count | None = None
    total_max_node_count: Count | None = None

    @property
    def least(self) -> int | None:
        """The pool's floor: per zone, else in total (GKE takes one or the other)."""
        return self.total_min_node_count if self.min_node_count is None else self.min_node_count

    @property
    def most(self) -> int | None:
        """The pool's ceiling: per zone, else in total."""
        return self.total_max_node_count if self.max_node_count is None else self.max_node_count


class Taint(Inputs):
    key: StrictStr | None = None
    value: StrictStr | None = None
    effect: StrictStr | None = None


class ReservationAffinity(Inputs):
    consume_reservation_type: StrictStr | None = None
    values: list[StrictStr] | None = None


class NodeConfig(Inputs):
    machine_type: StrictStr | None = None
    labels: dict[StrictStr, StrictStr] | None = None
    taints: list[Taint] | None = None
    spot: StrictBool | None = None
    preemptible: StrictBool | None = None
    flex_start: StrictBool | None = None
    reservation_affinity: ReservationAffinity | None = None
    max_run_duration: StrictStr | None = None


class PlacementPolicy(Inputs):
    tpu_topology: StrictStr | None = None


class Enabled(Inputs):
    enabled: StrictBool | None = None


class NetworkConfig(Inputs):
    accelerator_network_profile: StrictStr | None = None


class NodePoolInputs(Inputs):
    name: StrictStr | None = None
    location: StrictStr | None = None
    node_locations: list[StrictStr] | None = None
    node_count: Count | None = None
    initial_node_count: Count | None = None
    autoscaling: Autoscaling | None = None
    node_config: NodeConfig | None = None
    placement_policy: PlacementPolicy | None = None
    queued_provisioning: Enabled | None = None
    network_config: NetworkConfig | None = None


class ReleaseChannel(Inputs):
    channel: StrictStr | None = None


class ResourceLimit(Inputs):
    resource_type: StrictStr | None = None
    maximum: Count | None = None


class ClusterAutoscaling(Inputs):
    """Node auto-provisioning: on, and its limit per resource type."""

    enabled: StrictBool | None = None
    resource_limits: list[ResourceLimit] | None = None


class LustreDriverConfig(Inputs):
    enabled: StrictBool | None = None
    enable_legacy_lustre_port: StrictBool | None = None


class AddonsConfig(Inputs):
    lustre_csi_driver_config: LustreDriverConfig | None = None


class ClusterInputs(Inputs):
    name: StrictStr | None = None
    location: StrictStr | None = None
    release_channel: ReleaseChannel | None = None
    deletion_protection: StrictBool | None = None
    cluster_autoscaling: ClusterAutoscaling | None = None
    addons_config: AddonsConfig | None = None

    @property
    def lustre_legacy_port(self) -> bool:
        lustre = self.addons_config.lustre_csi_driver_config if self.addons_config else None
        return bool(lustre and lustre.enable_legacy_lustre_port)


class InstanceProperties(Inputs):
    machine_type: StrictStr | None = None


class SpecificReservation(Inputs):
    count: Count | None = None
    instance_properties: InstanceProperties | None = None


class ReservationInputs(Inputs):
    zone: StrictStr | None = None
    specific_reservation: SpecificReservation | None = None


class ObjectMeta(Inputs):
    name: StrictStr | None = None
    namespace: StrictStr | None = None
    labels: dict[StrictStr, StrictStr] | None = None


class KubernetesInputs(Inputs):
    """Any Kubernetes object: its metadata."""

    metadata: ObjectMeta | None = None


class Csi(Inputs):
    driver: StrictStr | None = None
    volume_handle: StrictStr | None = None


class ClaimRef(Inputs):
    name: StrictStr | None = None
    namespace: StrictStr | None = None


class PersistentVolumeSpec(Inputs):
    csi: Csi | None = None
    claim_ref: ClaimRef | None = None
    access_modes: list[StrictStr] | None = None
    mount_options: list[StrictStr] | None = None


class PersistentVolumeInputs(KubernetesInputs):
    spec: PersistentVolumeSpec | None = None


class GrantInputs(Inputs):
    """A BucketIAMMember or a projects IAMMember: who gets which role on what."""

    member: StrictStr | None = None
    role: StrictStr | None = None
    bucket: StrictStr | None = None
    project: StrictStr | None = None


class DashboardInputs(Inputs):
    dashboard_json: StrictStr | None = None


class FlavorSpec(Inputs):
    node_labels: dict[StrictStr, StrictStr] | None = None


class ResourceFlavorInputs(KubernetesInputs):
    spec: FlavorSpec | None = None


class ResourceQuota(Inputs):
    name: StrictStr | None = None
    nominal_quota: Quantity | None = None
    borrowing_limit: Quantity | None = None


class FlavorQuotas(Inputs):
    name: StrictStr | None = None
    resources: list[ResourceQuota] | None = None


class ResourceGroup(Inputs):
    flavors: list[FlavorQuotas] | None = None


class ClusterQueueSpec(Inputs):
    cohort_name: StrictStr | None = None
    cohort: StrictStr | None = None  # Kueue v1beta1's spelling
    resource_groups: list[ResourceGroup] | None = None


class ClusterQueueInputs(KubernetesInputs):
    spec: ClusterQueueSpec | None = None


class LocalQueueSpec(Inputs):
    cluster_queue: StrictStr | None = None


class LocalQueueInputs(KubernetesInputs):
    spec: LocalQueueSpec | None = None


class Container(Inputs):
    image: StrictStr | None = None
    args: list[StrictStr] | None = None


class PodSpec(Inputs):
    containers: list[Container] | None = None


class PodTemplate(Inputs):
    spec: PodSpec | None = None


class JobSpec(Inputs):
    template: PodTemplate | None = None


class JobTemplate(Inputs):
    spec: JobSpec | None = None


class ReplicatedJob(Inputs):
    name: StrictStr | None = None
    replicas: Count | None = None
    template: JobTemplate | None = None


class JobSetSpec(Inputs):
    replicated_jobs: list[ReplicatedJob] | None = None


class JobSetInputs(KubernetesInputs):
    spec: JobSetSpec | None = None


class ConfigObject(Inputs):
    kind: StrictStr | None = None
    metadata: ObjectMeta | None = None


class ConfigGroupInputs(Inputs):
    objs: list[ConfigObject] | None = None


class BuildArgs(Inputs):
    base_image: StrictStr | None = Field(None, alias="BASE_IMAGE")


class ImageInputs(Inputs):
    tags: list[StrictStr] | None = None
    build_args: BuildArgs | None = None


class HelmReleaseInputs(Inputs):
    chart: StrictStr | None = None
    version: StrictStr | None = None
    namespace: StrictStr | None = None


INPUTS_BY_TYPE: Mapping[str, type[Inputs]] = {
    NODE_POOL: NodePoolInputs, CLUSTER: ClusterInputs, RESERVATION: ReservationInputs,
    RESOURCE_FLAVOR: ResourceFlavorInputs, CLUSTER_QUEUE: ClusterQueueInputs, LOCAL_QUEUE: LocalQueueInputs,
    JOBSET: JobSetInputs, CONFIG_GROUP: ConfigGroupInputs, IMAGE: ImageInputs, HELM_RELEASE: HelmReleaseInputs,
    PERSISTENT_VOLUME: PersistentVolumeInputs, BUCKET_GRANT: GrantInputs, PROJECT_GRANT: GrantInputs,
    DASHBOARD: DashboardInputs,
}

def inputs_model(resource_type: str) -> type[Inputs]:
    """The model a resource type's inputs are read with: its own, a Kubernetes object's metadata, or nothing."""
    if resource_type in INPUTS_BY_TYPE:
        return INPUTS_BY_TYPE[resource_type]
    return KubernetesInputs if resource_type.startswith("kubernetes:") else Inputs


def read_inputs(resource_type: str, inputs: Mapping[str, Any]) -> Inputs:
    """`inputs` read as `resource_type`'s model; raises pydantic's ValidationError (a plan checks every resource as
    it is read, so a reader of a plan never sees one)."""
    return inputs_model(resource_type).model_validate(inputs)
