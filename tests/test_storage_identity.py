"""Each team's jobs run as one Kubernetes service account, granted exactly the buckets its storage names."""

import pytest

from tpuplane.infra.k8s_validation import validate_manifests
from tpuplane.infra.storage.identity import (
    OBJECT_USER,
    OBJECT_VIEWER,
    WORKLOAD_SERVICE_ACCOUNT,
    BucketGrant,
    render_service_account,
    project_number_problems,
    role_problems,
    team_identity,
    workload_member,
)
from tpuplane.infra.storage.volumes import FilestoreShare, GcsBucket, Storage


def bucket(name, bucket_path, read_only, *namespaces):
    return Storage(name, GcsBucket(bucket=bucket_path), read_only, namespaces)


STORAGES = [
    bucket("imagenet", "gs://acme-data/imagenet", True, "team-a", "team-b"),
    bucket("ckpt-a", "gs://acme-ckpt/team-a", False, "team-a"),
    bucket("ckpt-read", "gs://acme-ckpt", True, "team-a", "team-b"),
    Storage("shared-fs", FilestoreShare(location="us-east5-b", instance="fs", share="vol1", ip="10.0.0.2", size="1Ti"),
            False, ("team-a",)),
]


def test_the_default_member_needs_only_the_project_id():
    assert workload_member(project="acme-ml", namespace="team-a", service_account="sa") == \
        "serviceAccount:acme-ml.svc.id.goog[team-a/sa]"


def test_with_the_project_number_the_member_is_the_principal_form():
    assert workload_member(project="acme-ml", namespace="team-a", service_account="sa", project_number="1234") == (
        "principal://iam.googleapis.com/projects/1234/locations/global/workloadIdentityPools/acme-ml.svc.id.goog/"
        "subject/ns/team-a/sa/sa")


def test_a_team_gets_one_grant_per_bucket_it_may_mount_object_user_when_any_entry_writes():
    identity = team_identity("a", "team-a", STORAGES, project="acme-ml")

    member = "serviceAccount:acme-ml.svc.id.goog[team-a/tpuplane-workload]"
    assert identity.bucket_grants == (
        BucketGrant("acme-ckpt", OBJECT_USER, member, ("ckpt-a", "ckpt-read")),
        BucketGrant("acme-data", OBJECT_VIEWER, member, ("imagenet",)),
    )


def test_a_team_that_only_reads_gets_object_viewer_and_nothing_for_other_teams_buckets():
    identity = team_identity("b", "team-b", STORAGES, project="acme-ml")

    assert [(g.bucket, g.role) for g in identity.bucket_grants] == [("acme-ckpt", OBJECT_VIEWER),
                                                                   ("acme-data", OBJECT_VIEWER)]


def test_a_team_without_buckets_gets_no_grant_but_still_its_service_account():
    identity = team_identity("c", "team-c", STORAGES, project="acme-ml", roles=("roles/logging.logWriter",))

    assert identity.bucket_grants == ()
    assert [(g.role, g.member) for g in identity.project_grants] == [
        ("roles/logging.logWriter", "serviceAccount:acme-ml.svc.id.goog[team-c/tpuplane-workload]")]
    account = render_service_account(identity)
    validate_manifests([account])
    assert account["metadata"]["name"] == WORKLOAD_SERVICE_ACCOUNT and account["metadata"]["namespace"] == "team-c"


@pytest.mark.parametrize(("roles", "allowed"), [
    (["storage.admin"], "an IAM role"),
    (["roles/owner"], "a role other than"),
    (["roles/iam.serviceAccountTokenCreator"], "a role other than"),
    (["roles/a", "roles/a"], "each role once"),
    (["roles/a\nroles/b"], "an IAM role"),
])
def test_bad_extra_roles_are_refused_with_their_index(roles, allowed):
    [problem] = role_problems("tpuplane:storage.roles.research", roles)

    assert problem.path == f"tpuplane:storage.roles.research[{len(roles) - 1}]" and allowed in problem.allowed


def test_custom_roles_of_a_project_or_organization_are_accepted():
    assert role_problems("r", ["projects/acme-ml/roles/trainer", "organizations/123/roles/reader"]) == []


@pytest.mark.parametrize("number", ["0123", "12a", "", "1" * 21])
def test_a_project_number_is_digits(number):
    [problem] = project_number_problems("tpuplane:storage.projectNumber", number)

    assert "digits only" in problem.allowed
