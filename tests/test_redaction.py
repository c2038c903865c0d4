"""No secret in any output: the plan (table, json, markdown), the diff (text, json, markdown), policy messages,
error messages and free text all pass through `tpuplane.infra.redaction`."""

from __future__ import annotations

import json

import pytest
from plan_factory import diff_docs, resource

from conftest import REPO
from typer.testing import CliRunner

from tpuplane.cli import plan as plan_cli
from tpuplane.cli.main import app
from tpuplane.infra.review.report_format import DIFF_FORMATS, PLAN_FORMATS
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.diff_report import render
from tpuplane.infra.redaction import PULUMI_SECRET_SIG, REDACTED, redact, redact_text, sensitive_paths
from tpuplane.infra.review.plan import Plan, PlannedResource, parse_plan
from tpuplane.infra.review.policies import check_plan

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SECRET = "kubernetes:core/v1:Secret"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC{s}\n-----END PRIVATE KEY-----\n"


def engine_secret(value):
    return {PULUMI_SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "value": value}


def container(**fields):
    return {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:1", **fields}]}}}}


# Each shape holds the marker `{s}` where its secret goes; the resource type decides the renderer's context.
LEAK_SHAPES = {
    "engine secret": (SECRET, lambda s: {"kind": "Secret", "stringData": engine_secret({"pw": s})}),
    "engine secret nested": (CONFIG_MAP, lambda s: {"data": {"x": engine_secret({"a": {"b": [s]}})}}),
    "env entry": (DEPLOYMENT, lambda s: container(env=[{"name": "DB_PASSWORD", "value": s}])),
    "flag with =": (DEPLOYMENT, lambda s: container(args=[f"--password={s}"])),
    "flag then value": (DEPLOYMENT, lambda s: container(args=["--api-key", s])),
    "url userinfo": (CONFIG_MAP, lambda s: {"data": {"index": f"https://user:p@ss-{s}@host.invalid/simple"}}),
    "url query": (CONFIG_MAP, lambda s: {"data": {"hook": f"https://host.invalid/x?token={s}&a=1"}}),
    "kubeconfig token": (CONFIG_MAP, lambda s: {"data": {"kubeconfig": f"users:\n- name: u\n  user:\n    token: {s}\n"}}),
    "dockerconfigjson": (SECRET, lambda s: {"kind": "Secret", "data": {".dockerconfigjson": f"eyJ{s}"}}),
    "private key": (CONFIG_MAP, lambda s: {"data": {"tls": PEM.format(s=s)}}),
    "service account key": (CONFIG_MAP, lambda s: {"data": {"sa": {"type": "service_account", "private_key": s}}}),
    "github token": (CONFIG_MAP, lambda s: {"data": {"note": f"ghp_{s}abcdefghij0123456789AB"}}),
    "aws key": (CONFIG_MAP, lambda s: {"metadata": {"labels": {"k": "AKIA" + (s + "ABCDEFGHIJKLMNOP")[:16]}}}),
    "slack token": (CONFIG_MAP, lambda s: {"data": {"slack": f"xoxb-1234-{s}"}}),
    # a key property of the diff report (the flavor's node labels)
    "token in flavor labels": (FLAVOR, lambda s: {"spec": {"nodeLabels": {"team": f"ghp_{s}abcdefghij0123456789AB"}}}),
}
SHAPES = sorted(LEAK_SHAPES)


def leaky_resource(shape: str, secret: str) -> dict:
    type_token, inputs = LEAK_SHAPES[shape]
    return resource(type_token, "leaky", {"apiVersion": "v1", "metadata": {"name": "leaky"}, **inputs(secret)})


def offline_plan(res: dict) -> Plan:
    return Plan(project="tpuplane", stack="dev", resources=(PlannedResource(
        urn=res["urn"], type=res["type"], name=res["name"], parent="", inputs=res["inputs"]),))


def plan_doc(*resources: dict) -> dict:
    return {"project": "tpuplane", "stack": "dev", "resources": list(resources)}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fmt", DIFF_FORMATS)
def test_diff_report_never_shows_old_or_new_secret(shape, fmt):
    diff = diff_docs(plan_doc(leaky_resource(shape, "SECRETOLD")), plan_doc(leaky_resource(shape, "SECRETNEW")))
    text = render(diff, fmt)
    assert diff.has_changes
    assert "SECRETOLD" not in text and "SECRETNEW" not in text


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fmt", [f.value for f in PLAN_FORMATS])
def test_plan_command_never_prints_secret(monkeypatch, shape, fmt):
    """Whatever the program registers, `tpuplane plan` redacts it once, before any format renders."""
    monkeypatch.setattr(plan_cli, "make_plan", lambda *args: offline_plan(leaky_resource(shape, "SECRETPART")))
    result = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO), "--format", fmt])
    assert result.exit_code == 0, result.stderr
    assert "SECRETPART" not in result.stdout


@pytest.mark.parametrize("shape", [s for s in SHAPES if not s.startswith("engine")])
def test_sensitive_paths_flags_every_plaintext_shape(shape):
    assert sensitive_paths(leaky_resource(shape, "SECRETPART")["inputs"])


def test_sensitive_paths_engine_secret_is_protected():
    assert sensitive_paths({"data": engine_secret({"token": "x"})}) == []


def test_diff_secret_change_is_reported_without_values():
    base = plan_doc(leaky_resource("engine secret", "SECRETOLD"))
    (change,) = diff_docs(base, plan_doc(leaky_resource("engine secret", "SECRETNEW"))).changes
    (prop,) = change.properties
    assert (prop.path, prop.before, prop.after) == ("stringData", REDACTED, REDACTED)


def test_diff_same_secret_is_no_change():
    base = plan_doc(leaky_resource("engine secret", "SECRETOLD"))
    assert not diff_docs(base, plan_doc(leaky_resource("engine secret", "SECRETOLD"))).has_changes


@pytest.mark.parametrize("text, shown", [
    ("https://user:p@ss-SECRETPART@host/simple", "https://***@host/simple"),
    ("https://host/x?token=SECRETPART&page=2", "https://host/x?token=***&page=2"),
    ("--password=SECRETPART --user bob", "--password=*** --user bob"),
    ("AWS_SECRET_ACCESS_KEY=SECRETPART", "AWS_SECRET_ACCESS_KEY=***"),
    ("token: SECRETPART", "token: ***"),
    # header schemes: the scheme and its credentials go together
    ("Authorization: Bearer SECRETPART", "Authorization: ***"),
    ('curl -H "Authorization: Basic SECRETPART" https://host', 'curl -H "Authorization: ***" https://host'),
    ("curl -H 'Proxy-Authorization: token SECRETPART' x", "curl -H 'Proxy-Authorization: ***' x"),
    ("--header=Bearer SECRETPART next", "--header=Bearer *** next"),
    ("Basic U0VDUkVUUEFSVDpwYXNz", "Basic ***"),
    # multi-word values: to the end of the line, or to the closing quote
    ("passphrase: SECRET PART here\nnext: 1", "passphrase: ***\nnext: 1"),
    ("{'passphrase': 'SECRET PART', 'user': 'bob'}", "{'passphrase': '***', 'user': 'bob'}"),
    ('password="SECRET PART" user=bob', 'password="***" user=bob'),
    # URL userinfo everywhere: protocol-relative, bare before a host name
    ("//user:SECRETPART@host.example/simple", "//***@host.example/simple"),
    ("--index-url user:SECRETPART@pypi.example.com/simple", "--index-url ***@pypi.example.com/simple"),
    ("source: user:SECRETPART@host/p", "source: ***@host/p"),
    ("--proxy user:SECRETPART@proxy:3128", "--proxy ***@proxy:3128"),
    ("admin:SECRETPART@host.com", "***@host.com"),
    # cookies are credentials, whole
    ("Cookie: session=SECRETPART; theme=dark", "Cookie: ***"),
    ("Set-Cookie: session=SECRETPART; Path=/\nnext: 1", "Set-Cookie: ***\nnext: 1"),
    # a YAML value under a secret key that continues below it: a block scalar, or a plain scalar on the next line
    ("secret: |\n  SECRET\n  PART\nnext: 1", "secret: ***\nnext: 1"),
    ("  password: >-\n    SECRET\n\n    PART\n  name: x", "  password: ***\n  name: x"),
    ("token:\n  SECRETPART\nnext: 1", "token:***\nnext: 1"),
    # a secret env entry written out as text (a dict's repr, JSON, YAML)
    ("{'name': 'DB_PASSWORD', 'value': 'SECRET PART'}", "{'name': 'DB_PASSWORD', 'value': '***'}"),
    ("- name: API_TOKEN\n  value: SECRET PART\n- name: A", "- name: API_TOKEN\n  value: ***\n- name: A"),
])
def test_redact_text_masks_only_the_secret_part(text, shown):
    assert redact_text(text) == shown


@pytest.mark.parametrize("text", ["secretName: db-creds", "--token-file=/var/run/token", "numpy<2",
                                  "Basic authentication is off", "img:1@sha256:0a1b", "git@github.com:org/repo",
                                  "serviceAccount:nodes@acme-ml.iam.gserviceaccount.com",
                                  "ssh://git@github.com/org/repo", "us-east5-b", "ct6e-standard-4t",
                                  "alice@example.com", "mailto:alice@example.com", "user:alice@example.com",
                                  "gcr.io/p/image:v1@sha256:" + "0123456789abcdef" * 4,
                                  "deleted:user:alice@example.com?uid=123"])
def test_redact_text_leaves_references_and_plain_values(text):
    assert redact_text(text) == text


def test_redact_secret_named_key_hides_whole_value():
    assert redact({"dbPassword": "SECRETPART", "passwordSecretName": "db"}) == {
        "dbPassword": REDACTED, "passwordSecretName": "db"}


def test_config_error_never_shows_secret_value():
    message = str(ConfigError.at("tpuplane:db.password", "SECRETPART", "a string"))
    assert "SECRETPART" not in message


def test_config_error_at_a_secret_named_path_still_says_what_is_allowed():
    message = str(ConfigError.at("tpuplane:db.password", "SECRET PART", "a string", "set it with --secret"))

    assert message == "tpuplane:db.password: got '[secret]'; allowed: a string. Hint: set it with --secret"


def test_policy_messages_name_token_in_resource_name_without_showing_it():
    token = "ghp_SECRETPARTabcdefghij0123456789AB"
    res = resource(CONFIG_MAP, token, {"apiVersion": "v1", "metadata": {"name": token}})
    violations = check_plan(parse_plan(plan_doc(res)))
    assert any(v.policy == "no-plaintext-secrets" for v in violations)
    assert all("SECRETPART" not in str(v) for v in violations)


def test_diff_never_shows_a_token_in_a_resource_name():
    token = "ghp_SECRETPARTabcdefghij0123456789AB"
    diff = diff_docs(plan_doc(), plan_doc(resource(CONFIG_MAP, token, {"apiVersion": "v1"})))
    assert all("SECRETPART" not in render(diff, fmt) for fmt in DIFF_FORMATS)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("fmt", [f.value for f in DIFF_FORMATS])
def test_diff_command_never_prints_secret_of_a_created_resource(tmp_path, shape, fmt):
    """Created resources show key properties and the fleet summary: those read redacted plans too."""
    base, head = tmp_path / "base.json", tmp_path / "head.json"
    base.write_text(json.dumps(plan_doc()))
    head.write_text(json.dumps(plan_doc(leaky_resource(shape, "SECRETPART"))))
    result = CliRunner().invoke(app, ["diff", str(base), str(head), "--format", fmt])
    assert result.exit_code == 1, result.stderr
    assert "SECRETPART" not in result.stdout


def test_a_stack_files_secure_value_is_hidden_whole_and_counts_as_protected():
    config = {"tpuplane:apiToken": {"secure": "v1:SECRETPART"}, "note": {"secure": "v1:SECRETPART", "x": 1}}

    assert redact(config)["tpuplane:apiToken"] == REDACTED
    assert sensitive_paths({"data": {"token": {"secure": "v1:SECRETPART"}}}) == []


@pytest.mark.parametrize("entry", [
    "tpuplane:apiToken:\n    secure: v1:SECRETPART",  # a key tpuplane does not know
    "tpuplane:dashboard:\n    secure: v1:SECRETPART",  # a known key given the wrong type
])
def test_a_config_error_never_quotes_a_stack_files_secure_value(tmp_path, entry):
    config = tmp_path / "Pulumi.dev.yaml"
    config.write_text((REPO / "stacks" / "Pulumi.dev.yaml").read_text().replace(
        "  tpuplane:dashboard: {}", f"  {entry}"))

    result = CliRunner().invoke(app, ["plan", "--project-dir", str(REPO), "--config", str(config)])

    assert result.exit_code == 2 and "[secret]" in result.stderr
    assert "SECRETPART" not in result.stderr + result.stdout
