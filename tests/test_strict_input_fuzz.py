"""Property tests of the review rules: strict input never crashes and never lets through what it refuses,
redaction never lets a secret through, the control-plane rule counts addresses exactly."""

from __future__ import annotations

import ipaddress
import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from tpuplane.infra.stack import load_stack_config
from tpuplane.infra.errors import ConfigError
from tpuplane.infra.review.policies import control_plane_not_public
from tpuplane.infra.redaction import PULUMI_SECRET_SIG, REDACTED, _redact, redact, redact_text, sensitive_paths
from tpuplane.infra.yaml_input import load_json, load_yaml

MARK = "Zq9SECRETPARTx7"  # a value no rule would print
TOKENS = [
    f"ghp_{MARK}abcdefghij0123456789", f"AKIA{MARK.upper()[:16]:A<16}", f"xoxb-1234-{MARK}", f"glpat-{MARK}abcdef",
    f"https://user:p@ss{MARK}@host.invalid/x", f"https://host.invalid/x?token={MARK}", f"--password={MARK}",
    f"DB_PASSWORD={MARK}", f"token: {MARK}",
]
keys = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=12)
# Text in the Basic Multilingual Plane: PyYAML reads a JSON surrogate-pair escape as two lone surrogates.
bmp_text = st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",)), max_size=20)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), bmp_text)
documents = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                          st.dictionaries(keys, inner, max_size=4)), max_leaves=20)
filler = st.text(st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="@?&=:"), max_size=30)


@settings(max_examples=300)
@given(st.text(max_size=300))
def test_load_yaml_any_text_is_a_value_or_a_config_error(text):
    try:
        load_yaml(text, "f.yaml")
    except ConfigError:
        pass


@settings(max_examples=200)
@given(st.dictionaries(st.from_regex(r"[a-z]{1,8}", fullmatch=True), st.integers(0, 9), min_size=1, max_size=5),
       st.data())
def test_load_yaml_a_repeated_key_is_always_refused(mapping, data):
    key = data.draw(st.sampled_from(sorted(mapping)))
    lines = [f"{k}: {v}" for k, v in mapping.items()] + [f"{key}: 1"]
    try:
        load_yaml("\n".join(lines) + "\n", "f.yaml")
    except ConfigError as exc:
        assert "each key once" in str(exc)
    else:
        raise AssertionError("a repeated key was accepted")


@settings(max_examples=200)
@given(documents)
def test_load_yaml_reads_back_what_json_writes(value):
    """JSON is YAML: every finite JSON document loads to itself (string keys, no coercion)."""
    assert load_yaml(json.dumps(value), "f.yaml") == value


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_load_json_any_text_is_a_value_or_a_config_error(text):
    try:
        load_json(text, "plan.json")
    except ConfigError:
        pass


@settings(max_examples=300)
@given(filler, st.sampled_from(TOKENS), filler)
def test_redact_text_never_lets_a_token_through(before, token, after):
    assert MARK not in redact_text(f"{before} {token} {after}")


@settings(max_examples=200)
@given(documents, st.sampled_from(TOKENS), st.data())
def test_redact_hides_a_token_anywhere_in_a_document(document, token, data):
    path = data.draw(st.lists(keys, min_size=1, max_size=3))
    root: dict = {}
    node = root
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = token
    root["other"] = document
    assert MARK not in json.dumps(redact(root))
    assert sensitive_paths(root)


@settings(max_examples=200)
@given(documents, documents)
def test_redact_an_engine_secret_at_any_depth_is_hidden(outer, secret):
    value = {"a": [outer, {"b": {PULUMI_SECRET_SIG: "1b47061264138c4ac30d75fd1eb44270", "value": MARK}}]}
    redacted = redact(value)
    assert MARK not in json.dumps(redacted) and redacted["a"][1]["b"] == REDACTED


@settings(max_examples=200)
@given(documents)
def test_redact_is_idempotent(document):
    assert redact(redact(document)) == redact(document)


networks = st.builds(lambda address, prefix: ipaddress.IPv4Network((address, prefix), strict=False),
                     st.integers(0, 2**32 - 1), st.integers(0, 32))


@settings(max_examples=300)
@given(st.lists(networks, min_size=1, max_size=6))
def test_control_plane_flagged_exactly_when_networks_cover_more_than_a_slash_8(nets):
    blocks = [{"cidrBlock": str(n)} for n in nets]
    messages = list(control_plane_not_public.__wrapped__(
        "gcp:container/cluster:Cluster", {"masterAuthorizedNetworksConfig": {"cidrBlocks": blocks}}))
    covered = sum(n.num_addresses for n in ipaddress.collapse_addresses(nets))
    assert bool(messages) == (covered > 2**24)


BASE = {"gcp:project": "acme-ml", "gcp:region": "us-east5", "tpuplane:cluster": {"name": "fleet", "zone": "us-east5-b"}}
non_integers = st.one_of(st.booleans(), st.text(max_size=5), st.floats(allow_nan=True, allow_infinity=True)
                         .filter(lambda f: not (math.isfinite(f) and f.is_integer())), st.integers(min_value=15_001))


@settings(max_examples=200)
@given(non_integers)
def test_cpu_pool_max_nodes_refuses_everything_but_a_bounded_integer(value):
    config = {**BASE, "tpuplane:cluster": {**BASE["tpuplane:cluster"], "cpuPool": {"maxNodes": value}}}
    try:
        load_stack_config(config)
    except ConfigError as exc:
        assert [p.path for p in exc.problems] == ["tpuplane:cluster.cpuPool.maxNodes"]
    else:
        raise AssertionError(f"maxNodes {value!r} was accepted")


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=12).filter(lambda s: not s.isascii() or not s.isprintable()))
def test_region_refuses_non_ascii_or_unprintable_text(region):
    try:
        load_stack_config({**BASE, "gcp:region": region})
    except ConfigError as exc:
        assert "gcp:region" in [p.path for p in exc.problems]
    else:
        raise AssertionError(f"region {region!r} was accepted")


secret_shapes = st.sampled_from([*TOKENS, f"Authorization: Bearer {MARK}", f"--auth {MARK}", f"auth={MARK}",
                                 f"//u:{MARK}@host.invalid/x", f"u:{MARK}@host.invalid/x", f"passphrase: a {MARK}",
                                 "-----BEGIN PRIVATE KEY-----\n" + MARK])
secret_keys = st.sampled_from(["password", "auth", "Authorization", "x-api-key", ".dockerconfigjson", "DB_TOKEN"])


@settings(max_examples=300)
@given(documents, st.data())
def test_redact_skips_a_document_only_when_walking_it_would_change_nothing(document, data):
    """`redact` returns plain data as it is when one scan of its JSON finds nothing a rule acts on: planted anywhere,
    as a value, a key, an env entry or a flag, a secret always takes the walk."""
    plant = data.draw(st.sampled_from(["value", "key", "env entry", "flag", "none"]))
    planted = {"value": {"x": data.draw(secret_shapes)}, "key": {data.draw(secret_keys): "v"},
               "env entry": [{"name": data.draw(secret_keys), "value": MARK}],
               "flag": ["--auth", MARK], "none": {}}[plant]
    value = [document, planted]

    assert redact(value) == _redact(value)
