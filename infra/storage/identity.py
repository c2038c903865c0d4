"""Identity for jobs: each team's Kubernetes service account, and the IAM grants Workload Identity Federation for GKE
gives it on exactly the buckets its storage entries name.

The grant names the Kubernetes service account itself; no Google service account is involved. Two member forms name
it (https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity):
- `serviceAccount:<project>.svc.id.goog[<namespace>/<name>]` needs only the project id, and IAM takes it as a direct
  member of any allow policy ("To grant a role to the Kubernetes service account ... --member=serviceAccount:
  PROJECT_ID.svc.id.goog[...]", https://cloud.google.com/kubernetes-engine/multi-cloud/docs/attached/eks/concepts/
  workload-identity). The default, as the Pathways scratch bucket's grant already is.
- `principal://iam.googleapis.com/projects/<number>/locations/global/workloadIdentityPools/<project>.svc.id.goog/
  subject/ns/<namespace>/sa/<name>`, GKE's current form, when the project number is given.

Roles on a bucket follow GKE's Cloud Storage FUSE guide and xpk: `roles/storage.objectViewer` when every entry of the
bucket a team may mount is read-only, `roles/storage.objectUser` when one is read-write.

hostNetwork pods, which every tpuplane TPU pod is: GKE's metadata server does not serve them ("Workload Identity
Federation for GKE ... restrictions", https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity).
The Cloud Storage FUSE volumes still act as the team's service account, through the driver's `hostNetworkPodKSA`
opt-in (`tpuplane.infra.storage.volumes`). A Google client library called directly in such a pod gets no Workload
Identity token; by those restrictions (inferred, not tested here) it reaches the Compute Engine metadata server and
acts as the node's service account, which tpuplane keeps least-privileged, so its bucket calls fail with 403. Read
and write checkpoints through a mounted bucket.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tpuplane.infra.errors import Problem
from tpuplane.infra.storage.volumes import GcsBucket, Storage

WORKLOAD_SERVICE_ACCOUNT = "tpuplane-workload"  # one per team namespace: what the team's workloads run as
OBJECT_VIEWER = "roles/storage.objectViewer"
OBJECT_USER = "roles/storage.objectUser"
PROJECT_NUMBER = re.compile(r"[1-9][0-9]{0,19}")
# Predefined roles, and custom roles of a project or an organization.
ROLE = re.compile(r"roles/[A-Za-z][A-Za-z0-9_.]{0,127}|(projects/[a-z][-a-z0-9]{4,28}[a-z0-9]|organizations/[0-9]{1,20})"
                  r"/roles/[A-Za-z0-9_.]{3,64}")
ROLE_ALLOWED = "an IAM role: roles/<name>, projects/<project>/roles/<id> or organizations/<number>/roles/<id>"
# Roles that would let a job act as someone else, or grant itself more: never given to a workload from config.
FORBIDDEN_ROLES = frozenset({"roles/owner", "roles/editor", "roles/iam.securityAdmin",
                             "roles/iam.serviceAccountTokenCreator", "roles/iam.serviceAccountUser",
                             "roles/iam.workloadIdentityUser", "roles/resourcemanager.projectIamAdmin"})


def workload_member(*, project: str, namespace: str, service_account: str, project_number: str | None = None) -> str:
    """The IAM member that names a Kubernetes service account through Workload Identity Federation for GKE."""
    if project_number is None:
        return f"serviceAccount:{project}.svc.id.goog[{namespace}/{service_account}]"
    return (f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
            f"{project}.svc.id.goog/subject/ns/{namespace}/sa/{service_account}")


@dataclass(frozen=True)
class BucketGrant:
    bucket: str
    role: str
    member: str
    storages: tuple[str, ...]  # the storage entries that need it: why it exists


@dataclass(frozen=True)
class ProjectGrant:
    role: str
    member: str


@dataclass(frozen=True)
class TeamIdentity:
    """What one team's jobs run as, and what they may reach."""

    team: str
    namespace: str
    service_account: str
    member: str
    bucket_grants: tuple[BucketGrant, ...]
    project_grants: tuple[ProjectGrant, ...]


def role_problems(path: str, roles: list[str]) -> list[Problem]:
    """The extra roles a team's jobs get on the project: well-formed, each once, none that escalates."""
    problems = []
    for i, role in enumerate(roles):
        if not ROLE.fullmatch(role):
            problems.append(Problem(f"{path}[{i}]", role, ROLE_ALLOWED, "e.g. roles/aiplatform.user"))
        elif role in FORBIDDEN_ROLES:
            problems.append(Problem(f"{path}[{i}]", role, f"a role other than {', '.join(sorted(FORBIDDEN_ROLES))}",
                                    "a job that holds it can act as other principals or grant itself more"))
        elif role in roles[:i]:
            problems.append(Problem(f"{path}[{i}]", role, "each role once"))
    return problems


def project_number_problems(path: str, number: str | None) -> list[Problem]:
    if number is None or PROJECT_NUMBER.fullmatch(number):
        return []
    return [Problem(path, number, "the project's number: digits only, e.g. 123456789012",
                    "`gcloud projects describe <project> --format='value(projectNumber)'`; leave it out to grant the "
                    "project-id form")]


def bucket_grants(storages: list[Storage], namespace: str, member: str) -> tuple[BucketGrant, ...]:
    """One grant per bucket the namespace may mount: object user if any of its entries is read-write."""
    by_bucket: dict[str, list[Storage]] = {}
    for storage in storages:
        if isinstance(storage.source, GcsBucket) and namespace in storage.namespaces:
            by_bucket.setdefault(storage.source.bucket_name, []).append(storage)
    return tuple(
        BucketGrant(bucket, OBJECT_VIEWER if all(s.read_only for s in entries) else OBJECT_USER, member,
                    tuple(sorted(s.name for s in entries)))
        for bucket, entries in sorted(by_bucket.items()))


def team_identity(team: str, namespace: str, storages: list[Storage], *, project: str,
                  project_number: str | None = None, roles: tuple[str, ...] = ()) -> TeamIdentity:
    """A team's service account and its grants (checked inputs: `role_problems`, `project_number_problems`)."""
    member = workload_member(project=project, namespace=namespace, service_account=WORKLOAD_SERVICE_ACCOUNT,
                             project_number=project_number)
    return TeamIdentity(team, namespace, WORKLOAD_SERVICE_ACCOUNT, member,
                        bucket_grants(storages, namespace, member),
                        tuple(ProjectGrant(role, member) for role in sorted(roles)))


def render_service_account(identity: TeamIdentity) -> dict[str, Any]:
    """The Kubernetes service account; IAM knows it by name, so it carries no annotation."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"labels": {"app.kubernetes.io/managed-by": "tpuplane"}, "name": identity.service_account,
                         "namespace": identity.namespace}}
