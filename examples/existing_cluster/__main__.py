"""Add two TPU slice groups, Kueue, JobSet, team queues and the teams' storage to a GKE cluster that already exists
(made by your own Terraform or Pulumi). Nothing here adopts a tpuplane stack config: each component takes its own
Args.

    pulumi config set gcp:project acme-ml
    pulumi config set cluster ml-prod          # the existing cluster: name, location, TPU zone
    pulumi config set location us-east5
    pulumi config set zone us-east5-b
    pulumi config set nodeServiceAccount ml-nodes@acme-ml.iam.gserviceaccount.com
    pulumi config set cpuPool system           # its CPU node pool: Kueue and JobSet run there
    pulumi up

Set `createNodePools false` when the pools exist already (only the queues follow them), `installControllers
false` when Kueue and JobSet run there already, and `grantAccess false` when the teams' IAM grants are made
elsewhere. The cluster needs Workload Identity and the Cloud Storage FUSE CSI driver, as tpuplane's clusters have.
"""

import pulumi
import pulumi_kubernetes as k8s

from tpuplane.components import (
    BatchStack,
    BatchStackArgs,
    KueueTeamArgs,
    SliceAutoscalingArgs,
    StorageVolumeArgs,
    TeamStorage,
    TeamStorageArgs,
    TpuSlicePool,
    TpuSlicePoolArgs,
)

config = pulumi.Config()
cluster = dict(project=pulumi.Config("gcp").require("project"), cluster=config.require("cluster"),
               location=config.require("location"), zone=config.require("zone"),
               service_account=config.require("nodeServiceAccount"),
               # v6e pools default to GKE's automated accelerator networking, which needs a cluster with
               # multi-networking and Dataplane V2; an existing cluster may have neither
               accelerator_network=config.get_bool("acceleratorNetwork") or False)

# Two slice groups: one node pool per slice (train-0 ... train-3, serve-0, serve-1); train scales from zero.
groups = {"train": TpuSlicePoolArgs(**cluster, tpu_type="v6e-16", capacity="spot",
                                    autoscaling=SliceAutoscalingArgs(min_slices=0, max_slices=4)),
          "serve": TpuSlicePoolArgs(**cluster, tpu_type="v6e-8", slices=2)}
if config.get_bool("createNodePools") is False:
    pools = [TpuSlicePool.describe(name, args) for name, args in groups.items()]
else:
    slice_pools = {name: TpuSlicePool(name, args) for name, args in groups.items()}
    pools = [pool.kueue_pool for pool in slice_pools.values()]
    for name, pool in slice_pools.items():
        pulumi.export(f"{name}_node_pools", pool.node_pool_names)

# Kueue and JobSet through the cluster's own kubeconfig context; quotas follow the two groups above.
kubernetes = k8s.Provider("existing-cluster", context=config.get("kubeContext"))
teams = [KueueTeamArgs(name="research", share=0.5), KueueTeamArgs(name="serving", share=0.5, priority="high")]
batch = BatchStack("batch", BatchStackArgs(
    pools=pools, teams=teams,
    cpu_pool_name=config.require("cpuPool"), cpu_machine_type="n2-standard-16", cpu_max_nodes=3,
    install_controllers=config.get_bool("installControllers") is not False),
    opts=pulumi.ResourceOptions(providers=[kubernetes]))

# Each team's jobs run as its `tpuplane-workload` service account; research mounts its checkpoint bucket
# (`--mount checkpoints:/ckpt`), which that account may read and write.
storage = TeamStorage("storage", TeamStorageArgs(
    project=cluster["project"], teams=[{"name": team["name"]} for team in teams],
    volumes=[StorageVolumeArgs(name="checkpoints", teams=["research"], gcs={"bucket": "gs://acme-ml-checkpoints"})],
    grant_access=config.get_bool("grantAccess") is not False),
    opts=pulumi.ResourceOptions(providers=[kubernetes], depends_on=[batch]))

pulumi.export("local_queues", batch.local_queues)
pulumi.export("service_accounts", storage.service_accounts)
