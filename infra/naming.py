"""Naming rules: every name tpuplane derives, and the limits GKE, IAM and Kubernetes put on them.

Names are derived in one place so that a node pool, its Kueue flavor and a JobSet selector can never disagree.
"""

from __future__ import annotations

import re

DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
PROJECT_ID = re.compile(r"[a-z][-a-z0-9]{4,28}[a-z0-9]")  # GCP project ids
REGION = re.compile(r"[a-z]+-[a-z]+[0-9]+")  # us-east5
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")  # us-east5-b
SERVICE_ACCOUNT_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[a-z]+")
GKE_NAME_MAX = 40  # GKE cluster and node pool names
GKE_MAX_NODES = 15_000  # nodes per Standard cluster, GKE's default limit
COMPUTE_NAME_MAX = 63  # Compute Engine resources: reservations, resource policies
SERVICE_ACCOUNT_ID_MAX = 30  # IAM service account ids: 6 to 30 characters
K8S_LABEL_VALUE_MAX = 63
INT32_MAX = 2**31 - 1  # what a Kubernetes int32 field (replicas, maxRestarts, ttlSecondsAfterFinished) holds
# The Job controller ends a pod's name with '-' and 5 random characters; JobSet's webhook checks the longest pod
# name of a JobSet with this stand-in, and refuses the JobSet when it exceeds 63 characters.
POD_NAME_SUFFIX = "-abcde"
GKE_NAME = re.compile(f"(?=.{{1,{GKE_NAME_MAX}}}$){DNS_LABEL.pattern}")  # a cluster or node pool name
K8S_NAME = re.compile(f"(?=.{{1,{K8S_LABEL_VALUE_MAX}}}$){DNS_LABEL.pattern}")  # a namespace, at most 63
# A reservation a pool consumes: its name, or its path in a project, optionally one of its blocks.
RESERVATION_PATH = re.compile(
    r"^(projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/reservations/)?(?P<name>[a-z]([-a-z0-9]{0,61}[a-z0-9])?)"
    r"(?P<block>/reservationBlocks/[a-z0-9][-a-z0-9]*(/reservationSubBlocks/[a-z0-9][-a-z0-9]*)?)?$"
)


def node_pool_name(group: str, slice_index: int) -> str:
    """One GKE node pool per slice, named by slice index so resizing adds or removes only the tail."""
    return f"{group}-{slice_index}"


def node_service_account_id(cluster: str) -> str:
    """The dedicated least-privilege service account of the cluster's nodes."""
    return f"{cluster}-nodes"


def workload_policy_name(cluster: str, group: str) -> str:
    """The workload-policy ResourcePolicy that tpu7/tpu7x multi-host pools reference instead of COMPACT."""
    return f"{cluster}-{group}-wp"
