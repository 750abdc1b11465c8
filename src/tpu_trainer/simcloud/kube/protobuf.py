"""Request bodies kubectl sends as Kubernetes protobuf (``kubectl create configmap`` and
``create namespace`` do): the ``k8s\\x00`` envelope, a ``runtime.Unknown`` holding the type
and the object's bytes, decoded for the kinds whose fields are mapped here (ObjectMeta's
common fields, ConfigMap, Namespace). Anything else is refused with a 415 naming ``-f``."""

from __future__ import annotations

import base64
from typing import Any

from tpu_trainer.simcloud.kube.status import KubeError

MAGIC = b"k8s\x00"
Schema = dict[int, tuple[str, Any]]

_STRING_MAP = "map"
_OBJECT_META: Schema = {
    1: ("name", "string"),
    2: ("generateName", "string"),
    3: ("namespace", "string"),
    5: ("uid", "string"),
    6: ("resourceVersion", "string"),
    7: ("generation", "int"),
    11: ("labels", _STRING_MAP),
    12: ("annotations", _STRING_MAP),
    14: ("finalizers", "strings"),
}
_KINDS: dict[str, Schema] = {
    "ConfigMap": {
        1: ("metadata", _OBJECT_META),
        2: ("data", _STRING_MAP),
        3: ("binaryData", "bytes_map"),
        4: ("immutable", "bool"),
    },
    "Namespace": {1: ("metadata", _OBJECT_META), 2: ("spec", {1: ("finalizers", "strings")})},
}
_TYPE_META: Schema = {1: ("apiVersion", "string"), 2: ("kind", "string")}
_UNKNOWN: Schema = {1: ("typeMeta", _TYPE_META), 2: ("raw", "raw")}


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(data, pos)
            out.append((number, data[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError(f"wire type {wire}")
    return out


def _entry(raw: bytes) -> tuple[str, bytes]:
    parts = dict(_fields(raw))
    key, value = parts.get(1, b""), parts.get(2, b"")
    return (key.decode() if isinstance(key, bytes) else ""), (
        value if isinstance(value, bytes) else b""
    )


def _message(data: bytes, schema: Schema) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, value in _fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if isinstance(kind, dict) and isinstance(value, bytes):
            out[name] = _message(value, kind)
        elif kind == "string" and isinstance(value, bytes):
            out[name] = value.decode()
        elif kind == "raw":
            out[name] = value
        elif kind in ("int", "bool") and isinstance(value, int):
            out[name] = bool(value) if kind == "bool" else value
        elif kind == "strings" and isinstance(value, bytes):
            out.setdefault(name, []).append(value.decode())
        elif kind in (_STRING_MAP, "bytes_map") and isinstance(value, bytes):
            key, item = _entry(value)
            text = item.decode() if kind == _STRING_MAP else base64.b64encode(item).decode()
            out.setdefault(name, {})[key] = text
    return out


def decode(raw: bytes, content_type: str) -> dict[str, Any]:
    """The object in a protobuf body, as the JSON kubectl would have sent."""
    if not raw.startswith(MAGIC):
        raise _unsupported(content_type, "the body has no k8s protobuf envelope")
    try:
        unknown = _message(raw[len(MAGIC) :], _UNKNOWN)
        type_meta = unknown.get("typeMeta") or {}
        schema = _KINDS.get(str(type_meta.get("kind")))
        if schema is None:
            raise _unsupported(
                content_type, f"{type_meta.get('kind')} is not decoded from protobuf"
            )
        obj = _message(bytes(unknown.get("raw") or b""), schema)
    except (IndexError, ValueError, UnicodeDecodeError) as e:
        raise _unsupported(content_type, f"the body is not valid protobuf ({e})") from None
    return {"apiVersion": type_meta.get("apiVersion"), "kind": type_meta.get("kind"), **obj}


def _unsupported(content_type: str, why: str) -> KubeError:
    return KubeError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"application/json, application/yaml ({content_type}: {why}; write the object to a "
        "file and use kubectl create -f / apply -f)",
    )
