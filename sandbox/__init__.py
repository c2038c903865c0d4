"""`tpuplane sandbox`: a stack's Kubernetes side on a real control plane on this machine.

Real etcd, kube-apiserver, kube-controller-manager, kube-scheduler, Kueue and JobSet (host processes built from
pinned Go modules, `toolchain`), kwok for the nodes, and the real Pulumi engine applying the stack's Kubernetes
half through the same components `pulumi up` uses. GCP cannot exist here: its half stays under the offline plan's
mocks, and the sandbox is given what it would have made (a cluster name, a bucket, images by reference).
"""
