"""`TeamStorageArgs`, or the `tpuplane:storage` section: each team's workload identity, the existing storage its jobs
may mount, and the IAM grants that let them reach it; its rules, reader and plan.

```yaml
tpuplane:storage:
  volumes:
    - name: datasets                       # workloads mount it by name: --mount datasets:/data:ro
      gcs: {bucket: gs://acme-datasets/imagenet, mountOptions: [implicit-dirs]}
      readOnly: true
      teams: [research, evals]
    - name: ckpt
      gcs: {bucket: gs://acme-ckpt}
      teams: [research]
  roles:                                   # more project roles for a team's jobs
    research: [roles/aiplatform.user]
  projectNumber: "123456789012"            # optional: the principal:// member form
```

Every team (of `tpuplane:kueue.teams`; without teams the one team `default`, namespace `default`) gets the Kubernetes
service account `tpuplane-workload` that its workloads run as (`tpuplane.infra.storage.identity`); each storage entry
becomes a PersistentVolume and claim in the namespace of every team it names (`tpuplane.infra.storage.volumes`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Mapping

from pydantic import Field

from tpuplane.infra.args import Source, read_checked, text
from tpuplane.infra.batch.kueue_config import WorkloadTeam
from tpuplane.infra.errors import Problem
from tpuplane.infra.model import Allowed, ConfigModel, FromStack, Hint
from tpuplane.infra.naming import DNS_LABEL, K8S_NAME, PROJECT_ID
from tpuplane.infra.storage.identity import (
    TeamIdentity,
    project_number_problems,
    render_service_account,
    role_problems,
    team_identity,
)
from tpuplane.infra.storage.volumes import (
    Storage, StorageEntry, entry_problems, lustre_port_problems, render_storage,
)

STORAGE_ARGS = "TeamStorageArgs"
DEFAULT_TEAM = "default"  # without Kueue teams, one queue serves namespace `default` (BatchStack's layout)


class TeamStorageSpec(ConfigModel):
    """`TeamStorageArgs`, or the `tpuplane:storage` section (the stack supplies its project and the Kueue teams)."""

    project: Annotated[text("a GCP project id, e.g. acme-ml", PROJECT_ID), FromStack("gcp:project")]
    teams: Annotated[list[WorkloadTeam], FromStack("tpuplane:kueue.teams")] = []
    volumes: list[StorageEntry] = Field([], description="Existing buckets, file systems and disks, each mounted by "
                                        "name in the namespaces of the teams it names.")
    roles: Annotated[dict[str, list[str]], Allowed("a mapping of team names to lists of IAM roles")] = Field(
        {}, description="More IAM roles on the project for a team's jobs, by team name.")
    project_number: Annotated[str | None, Hint('the project\'s number, quoted: "123456789012"')] = Field(
        None, description="The project's number: grants then name the team's service account in GKE's principal:// "
                          "form; default: the form that needs only the project id.")
    grant_access: Annotated[bool, FromStack("")] = True

    @property
    def workload_teams(self) -> list[WorkloadTeam]:
        """The teams, or without any the one team `default` in namespace `default`."""
        return self.teams or [WorkloadTeam(name=DEFAULT_TEAM)]

    @cached_property
    def storages(self) -> list[Storage]:
        """Each entry resolved: the stack's project filled in, its teams as namespaces (valid once read)."""
        namespace = {team.name: team.team_namespace for team in self.workload_teams}
        return [Storage(entry.name, entry.source.with_project(self.project), entry.read_only,
                        tuple(namespace[team] for team in entry.teams)) for entry in self.volumes]


def team_storage_problems(spec: TeamStorageSpec, source: Source, *, teams_read: bool = True) -> list[Problem]:
    """Every rule of the section: teams, storage entries (each one kind, known teams, unique names), extra roles
    and the project number. `teams_read=False`: the teams a stack would supply could not be read (their section
    reports why), so the names used here are not judged against them."""
    problems = _team_problems(spec, source)
    names = [team.name for team in spec.workload_teams] if teams_read else None
    seen: list[str] = []
    for i, entry in enumerate(spec.volumes):
        problems += entry_problems(entry, source.at("volumes", i), names)
        if entry.name in seen:
            problems.append(Problem(source.path("volumes", i, "name"), entry.name, "a name no other entry uses",
                                    "workloads mount storage by name"))
        seen.append(entry.name)
    roles_path = source.path("roles")
    for team, roles in spec.roles.items():
        if names is not None and team not in names:
            problems.append(Problem(roles_path, team, f"a team of the stack: {', '.join(names)}",
                                    "roles are granted to the team's service account"))
        else:
            problems += role_problems(f"{roles_path}.{team}", roles)
    problems += lustre_port_problems(spec.volumes, source)
    return problems + project_number_problems(source.path("project_number"), spec.project_number)


def _team_problems(spec: TeamStorageSpec, source: Source) -> list[Problem]:
    """The teams of Args (a stack supplies its Kueue teams, already checked there)."""
    if source.origin("teams"):
        return []
    problems = []
    for i, team in enumerate(spec.teams):
        if not DNS_LABEL.fullmatch(team.name) or len(team.name) > 63:
            problems.append(Problem(source.path("teams", i, "name"), team.name, "a DNS label of at most 63 characters"))
        if team.namespace is not None and not K8S_NAME.fullmatch(team.namespace):
            problems.append(Problem(source.path("teams", i, "namespace"), team.namespace, "a namespace name"))
        if team.name in [t.name for t in spec.teams[:i]]:
            problems.append(Problem(source.path("teams", i, "name"), team.name, "a name no other team uses"))
    return problems


def read_team_storage(raw: object, source: Source | None = None, *, supplied: Mapping[str, Any] | None = None,
                      teams_read: bool = True) -> TeamStorageSpec:
    """`TeamStorageArgs`, or the `tpuplane:storage` section (the stack supplies project and teams; `teams_read`
    is false when it could not)."""
    return read_checked(TeamStorageSpec, raw, source or Source.args(STORAGE_ARGS, TeamStorageSpec),
                        lambda spec, source: team_storage_problems(spec, source, teams_read=teams_read),
                        supplied=supplied)


# ---- the plan ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TeamStoragePlan:
    """What `TeamStorage` creates: one identity per team (its service account and grants), and the volumes."""

    identities: tuple[TeamIdentity, ...]
    storages: tuple[Storage, ...]

    def service_accounts(self) -> list[dict[str, Any]]:
        return [render_service_account(identity) for identity in self.identities]

    def volumes(self) -> list[dict[str, Any]]:
        """Every PersistentVolume and claim, by storage name, then namespace."""
        return render_storage(list(self.storages))


def plan_team_storage(spec: TeamStorageSpec) -> TeamStoragePlan:
    """Identities sorted by team name; each with its bucket grants and extra roles (checked inputs)."""
    identities = tuple(
        team_identity(team.name, team.team_namespace, spec.storages, project=spec.project,
                      project_number=spec.project_number, roles=tuple(spec.roles.get(team.name, ())))
        for team in sorted(spec.workload_teams, key=lambda t: t.name))
    return TeamStoragePlan(identities, tuple(spec.storages))
