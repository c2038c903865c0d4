"""Small offline plans, shaped like `tpuplane plan --format json`, for the diff and policy tests.

Every builder returns a fresh, policy-compliant resource; a test changes one thing with `patch`.
"""

from __future__ import annotations

import copy
from typing import Any

from tpuplane.infra.review.plan import CLUSTER, NODE_POOL, RESERVATION, Plan, parse_plan
from tpuplane.infra.review.plan_diff import PlanDiff, diff_plans

PROJECT = "tpuplane"
STACK = "dev"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
SLICE_POOL = "tpuplane:index:TpuSlicePool"
TPU_TAINT = {"key": "google.com/tpu", "value": "present", "effect": "NO_SCHEDULE"}


def urn(type_token: str, name: str, parent_type: str | None = None) -> str:
    qualified = f"{parent_type}${type_token}" if parent_type else type_token
    return f"urn:pulumi:{STACK}::{PROJECT}::{qualified}::{name}"


def resource(type_token: str, name: str, inputs: dict[str, Any], parent_type: str | None = None) -> dict[str, Any]:
    return {"urn": urn(type_token, name, parent_type), "type": type_token, "name": name, "parent": None,
            "inputs": inputs, "dependsOn": []}


def patch(res: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """A copy of `res` with `changes` deep-merged into its inputs; a None value deletes the key."""
    def merge(target: dict[str, Any], update: dict[str, Any]) -> None:
        for key, value in update.items():
            if value is None:
                target.pop(key, None)
            elif isinstance(value, dict) and isinstance(target.get(key), dict):
                merge(target[key], value)
            else:
                target[key] = copy.deepcopy(value)

    out = copy.deepcopy(res)
    merge(out["inputs"], changes)
    return out


def node_pool(name: str = "train-0", *, machine_type: str = "ct6e-standard-4t", node_count: int = 4,
              topology: str = "4x4", zone: str = "us-east5-b") -> dict[str, Any]:
    """A v6e-16 spot slice pool, as a TpuSlicePool child."""
    return resource(NODE_POOL, name, {
        "cluster": "fleet",
        "location": "us-east5",
        "nodeLocations": [zone],
        "nodeCount": node_count,
        "nodeConfig": {
            "machineType": machine_type,
            "spot": True,
            "taints": [dict(TPU_TAINT)],
            "labels": {"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                       "cloud.google.com/gke-tpu-topology": topology},
            "reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "workloadMetadataConfig": {"mode": "GKE_METADATA"},
            "serviceAccount": "fleet-nodes@acme-ml.iam.gserviceaccount.com",
        },
        "placementPolicy": {"type": "COMPACT", "tpuTopology": topology},
        "management": {"autoRepair": True, "autoUpgrade": False},
    }, parent_type=SLICE_POOL)


def cpu_pool(name: str = "cpu") -> dict[str, Any]:
    return resource(NODE_POOL, name, {
        "cluster": "fleet", "location": "us-east5", "nodeLocations": ["us-east5-b"], "nodeCount": 1,
        "nodeConfig": {"machineType": "n2-standard-64", "workloadMetadataConfig": {"mode": "GKE_METADATA"}},
    })


def cluster(name: str = "fleet", *, production: bool = False) -> dict[str, Any]:
    labels = {"tpuplane-production": "true"} if production else {}
    return resource(CLUSTER, name, {
        "name": name,
        "location": "us-east5",
        "network": "default",
        "networkingMode": "VPC_NATIVE",
        "removeDefaultNodePool": True,
        "initialNodeCount": 1,
        "workloadIdentityConfig": {"workloadPool": "acme-ml.svc.id.goog"},
        "masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "10.0.0.0/8", "displayName": "corp"}]},
        "resourceLabels": labels,
        "deletionProtection": True,
    })


def reservation(name: str = "v6e-res", *, count: int = 8, machine_type: str = "ct6e-standard-4t",
                zone: str = "us-east5-b") -> dict[str, Any]:
    return resource(RESERVATION, name, {
        "name": name,
        "project": "acme-ml",
        "zone": zone,
        "specificReservation": {"count": count, "instanceProperties": {"machineType": machine_type}},
        "specificReservationRequired": True,
        "deletionPolicy": "PREVENT",
    })


def reserved_pool(name: str, reservation_path: str, *, node_count: int = 4,
                  machine_type: str = "ct6e-standard-4t") -> dict[str, Any]:
    return patch(node_pool(name, machine_type=machine_type, node_count=node_count), {"nodeConfig": {
        "spot": None,
        "reservationAffinity": {"consumeReservationType": "SPECIFIC_RESERVATION",
                                "key": "compute.googleapis.com/reservation-name", "values": [reservation_path]},
    }})


def cluster_queue(name: str = "tpu-queue", *, tpu_quota: int | str = 16) -> dict[str, Any]:
    return resource(CLUSTER_QUEUE, name, {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["google.com/tpu"],
            "flavors": [{"name": "v6e-16", "resources": [{"name": "google.com/tpu", "nominalQuota": tpu_quota}]}],
        }]},
    })


def plan(*resources: dict[str, Any]) -> dict[str, Any]:
    return {"project": PROJECT, "stack": STACK, "resources": list(copy.deepcopy(resources))}


def diff_docs(base: dict[str, Any], head: dict[str, Any]) -> PlanDiff:
    """The diff of two plan documents, read as `tpuplane diff` reads plan files."""
    return diff_plans(parse_plan(base, "base"), parse_plan(head, "head"))


def plan_of(*resources: dict[str, Any]) -> Plan:
    """A `Plan` of these resources, as a plan file would give it."""
    return parse_plan({"project": PROJECT, "stack": STACK, "resources": list(resources)})
