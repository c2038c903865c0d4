"""Add two TPU slice groups, Kueue, JobSet and team queues to a GKE cluster that already exists (made by your own
Terraform or Pulumi). Nothing here adopts a tpuplane stack config: each component takes its own Args.

    pulumi config set gcp:project acme-ml
    pulumi config set cluster ml-prod          # the existing cluster: name, location, TPU zone
    pulumi config set location us-east5
    pulumi config set zone us-east5-b
    pulumi config set nodeServiceAccount ml-nodes@acme-ml.iam.gserviceaccount.com
    pulumi config set cpuPool system           # its CPU node pool: Kueue and JobSet run there
    pulumi up

Set `createNodePools false` when the pools exist already (only the queues follow them), and `installControllers
false` when Kueue and JobSet run there already.
"""

import pulumi
import pulumi_kubernetes as k8s

from tpuplane.components import BatchStack, BatchStackArgs, KueueTeamArgs, TpuSlicePool, TpuSlicePoolArgs

config = pulumi.Config()
cluster = dict(project=pulumi.Config("gcp").require("project"), cluster=config.require("cluster"),
               location=config.require("location"), zone=config.require("zone"),
               service_account=config.require("nodeServiceAccount"),
               # v6e pools default to GKE's automated accelerator networking, which needs a cluster with
               # multi-networking and Dataplane V2; an existing cluster may have neither
               accelerator_network=config.get_bool("acceleratorNetwork") or False)

# Two slice groups: one node pool per slice (train-0 ... train-3, serve-0, serve-1).
groups = {"train": TpuSlicePoolArgs(**cluster, tpu_type="v6e-16", slices=4, capacity="spot"),
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
batch = BatchStack("batch", BatchStackArgs(
    pools=pools,
    teams=[KueueTeamArgs(name="research", share=0.5), KueueTeamArgs(name="serving", share=0.5, priority="high")],
    cpu_pool_name=config.require("cpuPool"), cpu_machine_type="n2-standard-16", cpu_max_nodes=3,
    install_controllers=config.get_bool("installControllers") is not False),
    opts=pulumi.ResourceOptions(providers=[kubernetes]))

pulumi.export("local_queues", batch.local_queues)
