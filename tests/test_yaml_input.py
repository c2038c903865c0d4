"""Strict input files: what YAML and JSON would silently accept is refused with the file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpuplane.infra.errors import ConfigError
from tpuplane.infra.yaml_input import MAX_NODES, load_json, load_yaml, read_json_file, read_yaml_file


def alias_bomb() -> str:
    """The classic 'billion laughs': nine levels of nine aliases, a few hundred bytes."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in "bcdefghi":
        previous = chr(ord(level) - 1)
        lines.append(f"{level}: &{level} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "config:\n  kubernetes:bomb:\n" + "\n".join("    " + line for line in lines) + "\n"


def refusal(text: str) -> str:
    with pytest.raises(ConfigError) as raised:
        load_yaml(text, "Pulumi.dev.yaml")
    return str(raised.value)


def test_load_yaml_duplicate_key_names_both_lines():
    message = refusal("config:\n  tpuplane:cluster: a\n  other: 1\n  tpuplane:cluster: b\n")
    assert "Pulumi.dev.yaml:4" in message and "line 2" in message


def test_load_yaml_duplicate_key_in_flow_mapping():
    assert "each key once" in refusal("{slices: 1, slices: 2}\n")


@pytest.mark.parametrize("text", ["1: x\n", "[a, b]: x\n", "? {a: 1}\n: x\n", "null: x\n", "true: x\n"])
def test_load_yaml_non_string_key_is_refused(text):
    assert "string keys" in refusal(text)


@pytest.mark.parametrize("text, value", [
    ("d: 2024-01-01\n", "2024-01-01"), ("t: 2001-12-14t21:59:43.10-05:00\n", "2001-12-14t21:59:43.10-05:00"),
    ("x: yes\n", "yes"), ("x: off\n", "off"), ("x: 1:30\n", "1:30"), ("x: 0b101\n", "0b101"),
])
def test_load_yaml_yaml11_implicit_types_stay_strings(text, value):
    assert load_yaml(text, "f") == {text.split(":")[0]: value}


@pytest.mark.parametrize("text", ["b: !!binary aGVsbG8=\n", "s: !!set {a, b}\n", "o: !!omap [a: 1]\n",
                                  "t: !!timestamp 2024-01-01\n", "p: !!python/name:os.system ''\n",
                                  "c: !custom x\n", "i: !!int abc\n"])
def test_load_yaml_tags_are_refused(text):
    assert "Pulumi.dev.yaml:1" in refusal(text)


@pytest.mark.parametrize("text", ["x: .inf\n", "x: -.Inf\n", "x: .nan\n", "x: 1e400\n"])
def test_load_yaml_non_finite_numbers_are_refused(text):
    assert "a finite number" in refusal(text)


def test_load_yaml_huge_integer_is_refused_without_converting():
    assert "64-bit integer" in refusal("x: " + "9" * 5000 + "\n")


def test_load_yaml_alias_bomb_is_refused():
    assert f"at most {MAX_NODES} values" in refusal(alias_bomb())


def test_load_yaml_recursive_alias_is_refused():
    assert "levels" in refusal("a: &x [*x]\n")


def test_load_yaml_small_aliases_expand():
    assert load_yaml("a: &x {b: 1}\nc: *x\n", "f") == {"a": {"b": 1}, "c": {"b": 1}}


def test_load_yaml_core_scalars():
    assert load_yaml("x: [1, 0x1f, 2.5, true, null, ~, '0.5', !!str 5]\n", "f") == {
        "x": [1, 31, 2.5, True, None, None, "0.5", "5"]}


def test_read_yaml_file_dev_zero_is_refused():
    with pytest.raises(ConfigError, match="at most"):
        read_yaml_file(Path("/dev/zero"), "--config")


def test_read_yaml_file_error_never_quotes_the_file(tmp_path):
    env = tmp_path / ".env"
    env.write_text("AWS_SECRET_ACCESS_KEY=SECRETPART\n: : :\n")
    with pytest.raises(ConfigError) as raised:
        read_yaml_file(env)
    assert "SECRETPART" not in str(raised.value)


@pytest.mark.parametrize("text, expected", [
    ('{"a": NaN}', "NaN"), ('{"a": -Infinity}', "Infinity"), ('{"a": 1, "a": 2}', "duplicate key"),
    ("[" * 100_000 + "]" * 100_000, "nesting"), ("[" * 70 + "]" * 70, "nesting"), ('{"a": ', "invalid JSON"),
])
def test_load_json_refuses(text, expected):
    with pytest.raises(ConfigError, match=expected):
        load_json(text, "plan")


def test_read_json_file_missing_file_names_it(tmp_path):
    with pytest.raises(ConfigError, match="a readable file"):
        read_json_file(tmp_path / "nope.json")
