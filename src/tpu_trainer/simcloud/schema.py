"""Checking a JSON value against a discovery document's schema, as the service would.

Types follow the discovery format: 64-bit integers travel as decimal strings, 32-bit ones as
JSON numbers; enums are closed; an object may carry only the properties its schema names (the
real services answer an unknown field with ``Invalid JSON payload received. Unknown name``).
"""

from __future__ import annotations

import re
from typing import Any

from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject

_INT_STRING = re.compile(r"-?\d+")
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})")


def problems(api: DiscoveryApi, ref: str, value: Any) -> list[str]:
    """Every way ``value`` breaks schema ``ref`` of ``api``, as ``path: what`` lines."""
    out: list[str] = []
    _check(api, {"$ref": ref}, value, ref, out)
    return out


def _check(api: DiscoveryApi, schema: JsonObject, value: Any, where: str, out: list[str]) -> None:
    if "$ref" in schema:
        ref = schema["$ref"]
        if ref not in api.schemas:
            out.append(f"{where}: schema {ref} is not in {api.name} {api.version}")
            return
        schema = api.schemas[ref]
    kind = schema.get("type")
    if kind == "any" or (kind is None and "properties" not in schema):
        return
    if kind == "object" or "properties" in schema:
        _check_object(api, schema, value, where, out)
    elif kind == "array":
        if not isinstance(value, list):
            out.append(f"{where}: expected a list, got {type(value).__name__}")
            return
        for i, item in enumerate(value):
            _check(api, schema.get("items", {}), item, f"{where}[{i}]", out)
    elif kind == "string":
        _check_string(schema, value, where, out)
    else:
        _check_scalar(str(kind), value, where, out)


def _check_scalar(kind: str, value: Any, where: str, out: list[str]) -> None:
    if kind == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
        out.append(f"{where}: expected an integer, got {value!r}")
    elif kind == "number" and (isinstance(value, bool) or not isinstance(value, int | float)):
        out.append(f"{where}: expected a number, got {value!r}")
    elif kind == "boolean" and not isinstance(value, bool):
        out.append(f"{where}: expected true or false, got {value!r}")


def _check_object(
    api: DiscoveryApi, schema: JsonObject, value: Any, where: str, out: list[str]
) -> None:
    if not isinstance(value, dict):
        out.append(f"{where}: expected an object, got {type(value).__name__}")
        return
    props: JsonObject = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if key in props:
            _check(api, props[key], item, f"{where}.{key}", out)
        elif extra is not None:
            _check(api, extra, item, f"{where}.{key}", out)
        else:
            out.append(f"{where}: unknown field {key!r}")


def _check_string(schema: JsonObject, value: Any, where: str, out: list[str]) -> None:
    fmt = schema.get("format")
    if fmt in ("int64", "uint64"):
        if isinstance(value, bool) or not (
            isinstance(value, int) or (isinstance(value, str) and _INT_STRING.fullmatch(value))
        ):
            out.append(f"{where}: expected a 64-bit integer (as a string), got {value!r}")
        return
    if not isinstance(value, str):
        out.append(f"{where}: expected a string, got {value!r}")
        return
    enum = schema.get("enum")
    if enum and value not in enum:
        out.append(f"{where}: {value!r} is not one of {', '.join(enum)}")
    if fmt == "google-datetime" and not _DATETIME.fullmatch(value):
        out.append(f"{where}: {value!r} is not an RFC 3339 time")
