"""Check a request body against a Google API's published schema: the discovery document that
google-api-python-client ships (`googleapiclient/discovery_cache/documents/<api>.<version>.json`).

Discovery schemas are not JSON Schema: objects list `properties` (or `additionalProperties` for maps), `$ref` names
another schema, scalars carry a `type`, an optional `format` (an int64 travels as a decimal string, or a number) and `enum`. Every
field the body carries must be one the API declares, of its type, with one of its values: what the API would refuse,
found before anything is sent.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

_INT64 = re.compile(r"-?[0-9]{1,19}")


@cache
def discovery_document(api: str, version: str) -> dict[str, Any]:
    """The discovery document google-api-python-client ships for `api` `version`."""
    path = resources.files("googleapiclient.discovery_cache") / "documents" / f"{api}.{version}.json"
    return json.loads(path.read_text())


def _errors(value: Any, schema: dict[str, Any], schemas: dict[str, Any], where: str) -> list[str]:
    if "$ref" in schema:
        return _errors(value, schemas[schema["$ref"]], schemas, where)
    kind = schema.get("type")
    if kind == "object":
        if not isinstance(value, dict):
            return [f"{where}: {value!r} is not an object"]
        errors = []
        for key, item in value.items():
            if key in schema.get("properties", {}):
                errors += _errors(item, schema["properties"][key], schemas, f"{where}.{key}")
            elif "additionalProperties" in schema:
                errors += _errors(item, schema["additionalProperties"], schemas, f"{where}.{key}")
            else:
                errors.append(f"{where}: unknown field {key!r}")
        return errors
    if kind == "array":
        if not isinstance(value, list):
            return [f"{where}: {value!r} is not a list"]
        return [e for i, item in enumerate(value) for e in _errors(item, schema["items"], schemas, f"{where}[{i}]")]
    if kind == "string":
        if schema.get("format") in ("int64", "uint64") and isinstance(value, int) and not isinstance(value, bool):
            return []  # proto3 JSON takes a 64-bit integer as a number or as a decimal string
        if not isinstance(value, str):
            return [f"{where}: {value!r} is not a string"]
        if schema.get("format") in ("int64", "uint64") and not _INT64.fullmatch(value):
            return [f"{where}: {value!r} is not a 64-bit integer in decimal"]
        if "enum" in schema and value not in schema["enum"]:
            return [f"{where}: {value!r} is not one of {', '.join(schema['enum'])}"]
        return []
    if kind == "integer":
        return [] if isinstance(value, int) and not isinstance(value, bool) and -2**31 <= value < 2**31 \
            else [f"{where}: {value!r} is not a 32-bit integer"]
    if kind == "number":
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{where}: not a number"]
    if kind == "boolean":
        return [] if isinstance(value, bool) else [f"{where}: {value!r} is not true or false"]
    return []  # `any`: the API takes any JSON value


def body_errors(body: Any, *, api: str, version: str, schema: str) -> list[str]:
    """Every field of `body` that the `schema` of `api` `version` does not declare, or declares otherwise."""
    schemas = discovery_document(api, version)["schemas"]
    return _errors(body, schemas[schema], schemas, schema)
