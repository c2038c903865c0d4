"""The objects the day-two tests read are ones the API server would store: each Kueue and JobSet object of
`recorded_kueue` validates against its CRD's schema, as pinned (sigs.k8s.io/kueue v0.19.2, sigs.k8s.io/jobset
v0.12.0, read from the Go module cache), with unknown fields refused (the API server would prune them, so a test
relying on one would test nothing)."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

import recorded_kueue as rk

MODULES = {"kueue.x-k8s.io": "sigs.k8s.io/kueue@v0.19.2", "jobset.x-k8s.io": "sigs.k8s.io/jobset@v0.12.0"}


@cache
def module_dir(module: str) -> Path | None:
    if shutil.which("go") is None:
        return None
    proc = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, timeout=60)
    path = Path(proc.stdout.strip()) / module
    return path if path.is_dir() else None


def strict(schema: Any) -> Any:
    """An OpenAPI v3 CRD schema as JSON Schema: `nullable` allows null, listed properties are all there is."""
    if isinstance(schema, list):
        return [strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: strict(v) for k, v in schema.items()}
    if out.pop("nullable", False) and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields") and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


@cache
def crd_schema(group: str, kind: str, version: str) -> dict[str, Any]:
    root = module_dir(MODULES[group])
    if root is None:
        pytest.skip(f"{MODULES[group]} is not in the Go module cache (`go mod download {MODULES[group]}`)")
    path = root / "config" / "components" / "crd" / "bases" / f"{group}_{kind.lower()}s.yaml"
    crd = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    schema = strict(found["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def cases() -> dict[str, dict[str, Any]]:
    a_train = rk.jobset("a-train", "team-a", queue="team-a", slices=2, ready=2)
    a_big = rk.jobset("a-big", "team-a", queue="team-a", priority="high", slices=2, suspend=True)
    return {
        "JobSet running": a_train,
        "JobSet suspended": a_big,
        "JobSet completed": rk.jobset("done", "team-a", queue="team-a", conditions=(rk.completed(),)),
        "Workload admitted": rk.workload(a_train, conditions=rk.admitted_conditions("team-a"), cluster_queue="team-a"),
        "Workload pending": rk.workload(a_big, conditions=rk.pending_conditions("couldn't assign flavors to pod set "
                                                                               "slice: whatever")),
        "Workload preempted": rk.workload(a_big, conditions=rk.preempted_conditions(
            rk.workload(a_train, conditions=[]), "team-a", "team-b")),
        "Workload checks": rk.workload(a_big, conditions=rk.admitted_conditions("team-a", pods_ready=False),
                                       cluster_queue="team-a", admission_checks=[
                {"name": "dws-prov", "state": "Pending", "message": "", "lastTransitionTime": rk.at(2)}]),
        "ClusterQueue": rk.cluster_queue("team-a", 32, used=16, borrowing_limit=16, lending_limit=8, admitted=1),
        "LocalQueue": rk.local_queue("team-a", "team-a", "team-a", used=16, admitted=1),
        "ResourceFlavor": rk.resource_flavor(),
    }


@pytest.mark.parametrize("name", list(cases()))
def test_recorded_object_matches_its_crd(name):
    obj = cases()[name]
    group, version = obj["apiVersion"].split("/")
    validator = jsonschema.Draft202012Validator(crd_schema(group, obj["kind"], version))

    errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(json.loads(
        json.dumps(obj)))]

    assert errors == []


def test_crd_check_refuses_a_field_the_crd_lacks():
    """The check can fail: a v1beta1 spelling (`cohort`) in a v1beta2 ClusterQueue is refused."""
    obj = rk.cluster_queue("team-a", 32)
    obj["spec"]["cohort"] = obj["spec"].pop("cohortName")
    validator = jsonschema.Draft202012Validator(crd_schema("kueue.x-k8s.io", "ClusterQueue", "v1beta2"))

    assert any("cohort" in e.message for e in validator.iter_errors(obj))
