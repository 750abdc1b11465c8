"""OpenAPI v3 documents, as much of them as kubectl reads.

kubectl 1.32 asks ``/openapi/v3`` whether the server validates fields itself (a PATCH operation
of the kind with a ``fieldValidation`` query parameter); when it does, ``kubectl apply`` sends
``fieldValidation=Strict`` and leaves validation to the server instead of downloading schemas.
Each group version's document lists its paths with those operations; component schemas are
left out (kubectl then builds patches from its own types: strategic merge for core kinds, JSON
merge patch for custom resources, as against a real server).
"""

from __future__ import annotations

import hashlib
from typing import Any

from tpu_trainer.simcloud.kube.resources import Resource, registry

Obj = dict[str, Any]
_PATCH_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
)


def _gv_path(r: Resource) -> str:
    return f"apis/{r.group}/{r.version}" if r.group else "api/v1"


def _hash(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()[:32].upper()


def _operation(r: Resource, action: str, *, writes: bool, body_types: tuple[str, ...] = ()) -> Obj:
    params: list[Obj] = [{"name": "dryRun", "in": "query", "schema": {"type": "string"}}]
    if writes:
        params += [
            {"name": "fieldManager", "in": "query", "schema": {"type": "string"}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string"}},
        ]
    op: Obj = {
        "operationId": f"{action}{r.kind}",
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
    }
    if body_types:
        op["requestBody"] = {"content": {t: {"schema": {"type": "object"}} for t in body_types}}
    return op


def _paths(r: Resource) -> Obj:
    base = f"/{_gv_path(r)}/" + ("namespaces/{namespace}/" if r.namespaced else "")
    collection = f"{base}{r.plural}"
    item: Obj = {"get": _operation(r, "get", writes=False)}
    paths: Obj = {collection: {"get": _operation(r, "list", writes=False)}}
    if "create" in r.verbs:
        paths[collection]["post"] = _operation(r, "post", writes=True, body_types=("*/*",))
        item["put"] = _operation(r, "put", writes=True, body_types=("*/*",))
        item["patch"] = _operation(r, "patch", writes=True, body_types=_PATCH_TYPES)
        item["delete"] = _operation(r, "delete", writes=False)
    paths[collection + "/{name}"] = item
    return paths


def openapi_v3(parts: list[str]) -> Obj | None:
    """``/openapi/v3`` (parts empty): the index; ``/openapi/v3/apis/<g>/<v>``: that document."""
    gvs: dict[str, list[Resource]] = {}
    for r in registry():
        gvs.setdefault(_gv_path(r), []).append(r)
    if not parts:
        return {
            "paths": {p: {"serverRelativeURL": f"/openapi/v3/{p}?hash={_hash(p)}"} for p in gvs}
        }
    found = gvs.get("/".join(parts))
    if found is None:
        return None
    paths: Obj = {}
    for r in found:
        paths.update(_paths(r))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.4"},
        "paths": paths,
        "components": {"schemas": {}},
    }
