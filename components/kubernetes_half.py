"""The stack program's Kubernetes half, composed once for its two callers: the stack program (`stacks/__main__.py`)
on the cluster it creates, and `tpuplane sandbox` on a local control plane, with GCP's side given as things that
already exist. Both register the same components under the same names, so the same URNs.

What the half takes from GCP's side is `GcpSide`: the Kubernetes provider, the nodes' service account, the sidecar
image, whether the controllers and the scratch bucket are the half's to make, and whether it may grant IAM roles
(the teams' access to their buckets).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from tpuplane.components.batch import BatchStack
from tpuplane.components.janitor import ProxyJanitor
from tpuplane.components.pathways import SharedPathwaysService
from tpuplane.components.storage import TeamStorage
from tpuplane.infra.stack import StackConfig


@dataclass(frozen=True)
class GcpSide:
    """What the Kubernetes half needs from the GCP half of a stack."""

    provider: pulumi.ProviderResource
    node_service_account: pulumi.Input[str]
    sidecar_image: pulumi.Input[str] | None = None
    install_controllers: bool = True  # False: Kueue and JobSet already run there (no Helm release)
    existing_bucket: str | None = None  # given: the service uses it and creates no GCP resource
    iam_grants: bool = True  # False: no GCP resource at all (the teams' grants are managed elsewhere)


@dataclass(frozen=True)
class KubernetesHalf:
    batch: BatchStack
    storage: TeamStorage
    pathways: SharedPathwaysService | None
    janitors: tuple[ProxyJanitor, ...]


def compose_kubernetes_half(cfg: StackConfig, side: GcpSide) -> KubernetesHalf:
    """Kueue and JobSet (and the queues derived from the pools), the teams' service accounts and storage, then the
    Shared Pathways Service and its proxy janitors, all through `side.provider`."""
    providers = pulumi.ResourceOptions(providers=[side.provider])
    batch_args = cfg.batch if side.install_controllers else cfg.batch.model_copy(update={"install_controllers": False})
    batch = BatchStack("batch", batch_args, opts=providers)
    storage_args = cfg.storage if side.iam_grants else cfg.storage.model_copy(update={"grant_access": False})
    storage = TeamStorage("storage", storage_args, opts=pulumi.ResourceOptions.merge(
        providers, pulumi.ResourceOptions(depends_on=[batch])))  # the teams' namespaces first
    if cfg.pathways is None:
        return KubernetesHalf(batch, storage, None, ())
    pw = cfg.pathways
    update: dict[str, object] = {"node_service_account": side.node_service_account,
                                 "sidecar_image": side.sidecar_image}
    if side.existing_bucket is not None:
        update |= {"gcs_bucket": pw.gcs_bucket or side.existing_bucket, "grant_bucket_access": False}
    controllers = [batch.jobset_release] if batch.jobset_release is not None else []
    pathways = SharedPathwaysService(pw.service_name, pw.model_copy(update=update),
                                     opts=pulumi.ResourceOptions.merge(providers,
                                                                       pulumi.ResourceOptions(depends_on=controllers)))
    janitors = tuple(ProxyJanitor(f"proxy-janitor-{janitor.namespace}", janitor,
                                  opts=pulumi.ResourceOptions(providers=[side.provider], depends_on=[batch]))
                     for janitor in cfg.janitors)
    return KubernetesHalf(batch, storage, pathways, janitors)
