"""The three patch types kubectl sends: JSON merge patch (RFC 7386, custom resources),
JSON patch (RFC 6902) and strategic merge patch (core kinds: lists of named objects such as
containers, ports and env merge by ``name``; the ``$patch``, ``$retainKeys``,
``$setElementOrder`` and ``$deleteFromPrimitiveList`` directives are honoured)."""

from __future__ import annotations

import copy
from typing import Any

from tpu_trainer.simcloud.kube.status import KubeError

MERGE = "application/merge-patch+json"
JSON = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def _merge_key(items: list[Any]) -> str | None:
    for key in ("name", "containerPort", "mountPath", "type", "key", "ip"):
        if items and all(isinstance(i, dict) and key in i for i in items):
            return key
    return None


def _strategic_list(current: list[Any], patch: list[Any]) -> list[Any]:
    key = _merge_key(patch) or _merge_key(current)
    if key is None or not all(isinstance(i, dict) for i in current):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    out = [copy.deepcopy(i) for i in current]
    for item in patch:
        found = next((i for i, c in enumerate(out) if c.get(key) == item.get(key)), None)
        if item.get("$patch") == "delete":
            if found is not None:
                del out[found]
        elif found is None:
            out.append(strategic_merge(None, item))
        else:
            out[found] = strategic_merge(out[found], item)
    return out


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    out = dict(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            out[field] = [v for v in out.get(field) or [] if v not in value]
        elif value is None:
            out.pop(key, None)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _strategic_list(out[key], value)
        else:
            out[key] = strategic_merge(out.get(key), value)
    if isinstance(retain, list):
        out = {k: v for k, v in out.items() if k in retain}
    return out


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise KubeError(422, "Invalid", f"the json patch path {path!r} does not start with /")
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node, parts[-1]


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise KubeError(400, "BadRequest", "json patch must be a list of operations")
    doc = copy.deepcopy(target)
    for op in ops:
        try:
            doc = _json_op(doc, op)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise KubeError(
                422,
                "Invalid",
                f"the server rejected our request due to an error in our "
                f"request: {op.get('op')} operation does not apply: {e}",
            ) from None
    return doc


def _json_op(doc: Any, op: dict[str, Any]) -> Any:  # noqa: PLR0912 - one branch per operation
    name, parts = op["op"], _pointer(op["path"])
    if name in ("move", "copy"):
        source, key = _parent(doc, _pointer(op["from"]))
        value = source[int(key)] if isinstance(source, list) else source[key]
        if name == "move":
            _json_op(doc, {"op": "remove", "path": op["from"]})
        return _json_op(doc, {"op": "add", "path": op["path"], "value": copy.deepcopy(value)})
    if not parts:
        return copy.deepcopy(op.get("value"))
    parent, key = _parent(doc, parts)
    if name == "test":
        current = parent[int(key)] if isinstance(parent, list) else parent[key]
        if current != op.get("value"):
            raise ValueError(f"test failed at {op['path']}")
    elif name == "remove":
        del parent[int(key) if isinstance(parent, list) else key]
    elif name in ("add", "replace"):
        if isinstance(parent, list):
            index = len(parent) if key == "-" else int(key)
            if name == "add":
                parent.insert(index, copy.deepcopy(op["value"]))
            else:
                parent[index] = copy.deepcopy(op["value"])
        else:
            if name == "replace" and key not in parent:
                raise KeyError(key)
            parent[key] = copy.deepcopy(op["value"])
    else:
        raise ValueError(f"unknown operation {name!r}")
    return doc


def apply_patch(content_type: str, target: Any, patch: Any) -> Any:
    kind = content_type.split(";", maxsplit=1)[0].strip()
    if kind == MERGE:
        return merge_patch(target, patch)
    if kind == JSON:
        return json_patch(target, patch)
    if kind == STRATEGIC:
        return strategic_merge(target, patch)
    raise KubeError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - "
        f"accepted media types include: {JSON}, {MERGE}, {STRATEGIC}",
    )
