"""Strict reading of every input file: stack configs, experiment files, plan files.

YAML's defaults are generous in ways that hide mistakes: a repeated key silently wins, `yes`/`on`/`1:30` and
unquoted dates turn into booleans, sexagesimal integers and datetimes, `!!binary`/`!!set`/`!!python/...` build
objects a config never means, and a few hundred bytes of nested aliases expand into billions of nodes. Here:

- a repeated key is an error naming both lines; keys are strings (`<<` is a plain key, never a merge);
- plain scalars resolve by the YAML 1.2 core schema (`true`/`false`, decimal/0x/0o integers, decimal floats,
  `null`); anything else, dates included, stays a string; explicit tags other than the core ones are refused;
- numbers are finite (no `.inf`/`.nan`) and integers fit in 64 bits (what GCP and Kubernetes APIs take);
- the file size, the nesting depth and the node count *with aliases expanded* are bounded, so an alias bomb
  or `/dev/zero` is refused before anything is built.

JSON plan files get the same treatment: duplicate keys, NaN/Infinity and runaway nesting are refused.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import yaml

from tpuplane.infra.errors import ConfigError

MAX_YAML_BYTES = 1 << 20  # 1 MiB: the largest stack config in use is a few KiB
MAX_JSON_BYTES = 64 << 20  # a plan of thousands of resources
MAX_NODES = 200_000  # values after alias expansion
MAX_DEPTH = 64
INT64 = 1 << 63

_CORE = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (f"{_CORE}{t}" for t in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ = f"{_CORE}map", f"{_CORE}seq"
_SCALAR_TAGS = {_STR, _INT, _FLOAT, _BOOL, _NULL}

# YAML 1.2 core schema: https://yaml.org/spec/1.2.2/#1032-tag-resolution
_CORE_RESOLVERS = (
    (_NULL, re.compile(r"~|null|Null|NULL|")),
    (_BOOL, re.compile(r"true|True|TRUE|false|False|FALSE")),
    (_INT, re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+")),
    (_FLOAT, re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)")),
)


class _CoreResolver(yaml.resolver.BaseResolver):
    def resolve(self, kind, value, implicit):  # noqa: ANN001 (PyYAML's signature)
        if kind is yaml.ScalarNode and implicit[0]:
            for tag, pattern in _CORE_RESOLVERS:
                if pattern.fullmatch(value):
                    return tag
        return super().resolve(kind, value, implicit)


class _Composer(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
                _CoreResolver):
    """Builds the node graph only; values are made by `_Builder`, which checks as it goes."""

    def __init__(self, stream: str):
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _CoreResolver.__init__(self)


def _line(node: yaml.Node) -> int:
    return node.start_mark.line + 1


class _Builder:
    """Node graph -> plain values, refusing what the module docstring lists. Shared (aliased) nodes are built
    once but counted every time they appear, so the bound is on the expanded document."""

    def __init__(self, source: str):
        self.source = source
        self.nodes = 0
        self.built: dict[int, Any] = {}

    def fail(self, node: yaml.Node, given: object, allowed: str, hint: str = "") -> ConfigError:
        return ConfigError.at(f"{self.source}:{_line(node)}", given, allowed, hint)

    def build(self, node: yaml.Node, depth: int = 0) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail(node, f"more than {MAX_NODES} values", f"at most {MAX_NODES} values (aliases expanded)",
                            "is an anchor repeated into itself (an alias bomb)?")
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nesting deeper than {MAX_DEPTH}", f"at most {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node)
        if id(node) in self.built:  # an alias: count its expansion, reuse the value
            self._count(node, depth)
            return self.built[id(node)]
        if isinstance(node, yaml.SequenceNode) and node.tag == _SEQ:
            value = self.built[id(node)] = []
            value.extend(self.build(item, depth + 1) for item in node.value)
            return value
        if isinstance(node, yaml.MappingNode) and node.tag == _MAP:
            return self._mapping(node, depth)
        raise self.fail(node, node.tag, "plain YAML mappings, lists, strings, numbers, booleans and null",
                        "remove the tag (`!!set`, `!!omap`, `!...`) and write the value plainly")

    def _count(self, node: yaml.Node, depth: int) -> None:
        """An alias adds every value below its anchor again."""
        children = node.value if isinstance(node, yaml.SequenceNode) else \
            [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else []
        if depth > MAX_DEPTH:
            raise self.fail(node, f"nesting deeper than {MAX_DEPTH}", f"at most {MAX_DEPTH} levels")
        for child in children:
            self.nodes += 1
            if self.nodes > MAX_NODES:
                raise self.fail(node, f"more than {MAX_NODES} values",
                                f"at most {MAX_NODES} values (aliases expanded)",
                                "is an anchor repeated into itself (an alias bomb)?")
            self._count(child, depth + 1)

    def _mapping(self, node: yaml.MappingNode, depth: int) -> dict[str, Any]:
        value: dict[str, Any] = {}
        self.built[id(node)] = value
        first_line: dict[str, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag != _STR:
                shown = key_node.value if isinstance(key_node, yaml.ScalarNode) else f"<{key_node.id}>"
                raise self.fail(key_node, shown, "string keys", "quote the key")
            key = key_node.value
            if key in first_line:
                raise self.fail(key_node, key, "each key once",
                                f"`{key}` is already set at line {first_line[key]}: keep one of the two")
            first_line[key] = _line(key_node)
            value[key] = self.build(value_node, depth + 1)
        return value

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        text, tag = node.value, node.tag
        if tag not in _SCALAR_TAGS:
            raise self.fail(node, tag, "plain strings, numbers, booleans and null",
                            "remove the tag (`!!binary`, `!!timestamp`, `!...`); quote the value for a string")
        if tag == _STR:
            return text
        if not dict(_CORE_RESOLVERS)[tag].fullmatch(text):
            raise self.fail(node, text, f"a YAML {tag.removeprefix(_CORE)}", "remove the tag")
        if tag == _NULL:
            return None
        if tag == _BOOL:
            return text.lower() == "true"
        if tag == _INT:
            digits = text.lstrip("+-")
            if len(digits) > 20:
                raise self.fail(node, f"{len(digits)}-digit integer", "a 64-bit integer")
            number = int(text, 0) if digits.startswith(("0x", "0o")) else int(text)
            if not -INT64 <= number < INT64:
                raise self.fail(node, text, "a 64-bit integer")
            return number
        number = math.inf if text.lstrip("+-").lower() in (".inf", ".nan") else float(text)
        if not math.isfinite(number):
            raise self.fail(node, text, "a finite number", "`.inf` and `.nan` are not numbers GCP or Kubernetes take")
        return number


def load_yaml(text: str, source: str) -> Any:
    """The one YAML document in `text`, strictly (see the module docstring); ConfigError names `source:line`."""
    return _load(text, source, single=True)[0]


def load_yaml_documents(text: str, source: str) -> list[Any]:
    """Every document of a YAML stream (`---` separated, as `kubectl apply -f` reads it), each as strictly as
    `load_yaml`; empty documents are left out."""
    return [doc for doc in _load(text, source, single=False) if doc is not None]


def _load(text: str, source: str, *, single: bool) -> list[Any]:
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError.at(source, f"{len(text)} characters", f"at most {MAX_YAML_BYTES} bytes",
                             "is it the right file?")
    composer = None
    try:
        composer = _Composer(text)  # the reader refuses control characters at once
        if single:
            nodes = [composer.get_single_node()]
        else:
            nodes = []
            while composer.check_node():
                nodes.append(composer.get_node())
    except yaml.MarkedYAMLError as exc:
        where = f"{source}:{exc.problem_mark.line + 1}" if exc.problem_mark else source
        raise ConfigError.at(where, "invalid YAML", "a YAML document", f"{exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError.at(source, "invalid YAML", "a YAML document", str(exc).splitlines()[0]) from None
    finally:
        if composer is not None:
            composer.dispose()
    return [None if node is None else _Builder(source).build(node) for node in nodes]


def read_text_bounded(path: Path, source: str, limit: int, what: str) -> str:
    """A UTF-8 file's text, refusing files over `limit` bytes without reading more (`/dev/zero` included).
    Errors never quote the file's contents."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise ConfigError.at(source, str(path), f"a readable file ({what})",
                             exc.strerror or type(exc).__name__) from None
    if len(data) > limit:
        raise ConfigError.at(source, f"more than {limit} bytes", f"a {what} of at most {limit} bytes",
                             "is it the right file?")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ConfigError.at(source, str(path), f"a UTF-8 text file ({what})", "is it the right file?") from None


def read_yaml_file(path: Path, source: str | None = None, what: str = "YAML file") -> Any:
    source = source or str(path)
    return load_yaml(read_text_bounded(path, source, MAX_YAML_BYTES, what), source)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    """A JSON number that a float holds: `1e400` would read as infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a number")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # the rare case pays for finding which key
        seen: set[str] = set()
        key = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise ValueError(f"duplicate key {json.dumps(key)[:60]}")
    return out


_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_JSON_BRACKET = re.compile(r"[\[\]{}]")


def _depth_ok(text: str) -> bool:
    """Nesting of at most MAX_DEPTH, counted on the JSON text's brackets outside its strings (a plan file of
    thousands of resources holds far fewer brackets than values)."""
    depth = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub("", text)):
        depth += 1 if bracket in "[{" else -1
        if depth > MAX_DEPTH:
            return False
    return True


def load_json(text: str, source: str, hint: str = "") -> Any:
    """A JSON document: duplicate keys, NaN/Infinity and nesting over MAX_DEPTH are refused."""
    if not _depth_ok(text):
        raise ConfigError.at(source, f"nesting deeper than {MAX_DEPTH}", f"at most {MAX_DEPTH} levels", hint)
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float,
                           object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ConfigError.at(f"{source}:{exc.lineno}", "invalid JSON", "a JSON document", exc.msg) from None
    except ValueError as exc:  # a duplicate key, NaN/Infinity, an integer over Python's digit limit
        raise ConfigError.at(source, str(exc).split(":")[0][:80], "a JSON document of finite numbers, each key once",
                             hint) from None
    except RecursionError:
        raise ConfigError.at(source, f"nesting deeper than {MAX_DEPTH}", f"at most {MAX_DEPTH} levels", hint) from None
    return value


def read_json_file(path: Path, source: str | None = None, what: str = "JSON file", hint: str = "") -> Any:
    source = source or str(path)
    return load_json(read_text_bounded(path, source, MAX_JSON_BYTES, what), source, hint)
