"""Add two TPU slice groups, Kueue, JobSet and team queues to a GKE cluster that already exists (made by your own
Terraform or Pulumi). Nothing here adopts a tpuplane stack config: each component takes its own Args.

    pulumi config set gcp:project acme-ml
    pulumi config set cluster ml-prod          # the existing cluster: name, location, TPU zone
    pulumi config set location us-east5
    pulumi config set zone us-east5-b
    pulumi config set nodeServiceAccount ml-nodes@acme-ml.iam.gserviceaccount.com
    pulumi config set cpuPool system           # its CPU node pool: Kueue and JobSet run there
    pulumi up
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
train = TpuSlicePool("train", TpuSlicePoolArgs(**cluster, tpu_type="v6e-16", slices=4, capacity="spot"))
serve = TpuSlicePool("serve", TpuSlicePoolArgs(**cluster, tpu_type="v6e-8", slices=2))

# Kueue and JobSet through the cluster's own kubeconfig context; quotas follow the two groups above.
kubernetes = k8s.Provider("existing-cluster", context=config.get("kubeContext"))
batch = BatchStack("batch", BatchStackArgs(
    pools=[train.kueue_pool, serve.kueue_pool],
    teams=[KueueTeamArgs(name="research", share=0.5), KueueTeamArgs(name="serving", share=0.5, priority="high")],
    cpu_pool_name=config.require("cpuPool"), cpu_machine_type="n2-standard-16", cpu_max_nodes=3),
    opts=pulumi.ResourceOptions(providers=[kubernetes]))

pulumi.export("train_node_pools", train.node_pool_names)
pulumi.export("serve_node_pools", serve.node_pool_names)
pulumi.export("local_queues", batch.local_queues)
