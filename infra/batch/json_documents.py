"""What every `-f json` document of the live commands shares: its apiVersion, and the JSON Schema (2020-12)
building blocks their schemas are written with. Each schema sits next to the code that writes its document, and
docs/generate.py publishes them (docs/reference/day-two.md)."""

from __future__ import annotations

from typing import Any

JSON_API_VERSION = "tpuplane.dev/v1"  # of every `-f json` document of the live commands
JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
NULLABLE_STRING: dict[str, Any] = {"type": ["string", "null"]}


def closed_object(properties: dict[str, Any], description: str = "") -> dict[str, Any]:
    """A JSON object with exactly these keys, every one always present (unknown values are null)."""
    return {"type": "object", "additionalProperties": False, "required": list(properties), "properties": properties,
            **({"description": description} if description else {})}


def document_schema(command: str, kind: str, properties: dict[str, Any]) -> dict[str, Any]:
    """The schema of one command's `-f json` document: apiVersion, kind, then its own keys."""
    return {"$schema": JSON_SCHEMA_DIALECT, "title": f"tpuplane {command} -f json",
            **closed_object({"apiVersion": {"const": JSON_API_VERSION}, "kind": {"const": kind}, **properties})}
