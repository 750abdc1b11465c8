"""The cluster's objects in the rehearsal's state file (``state["kube_api"]``), changed as the
real API server changes them: uid, resourceVersion, generation (bumped only when ``spec`` or
other non-metadata, non-status content changes), creationTimestamp from the scenario's clock.

Nodes are not stored: they are the state's node pools (``nodes.py``); JobSets, their pods and
Kueue's Workloads for them are the scenario's workload model (``views.py``). The kinds the
xpk stand-in also writes (Kueue's queues and flavors, ConfigMaps, PriorityClasses) are kept
where it and the workload model read them (``state["k8s"]``, ``fakecloud.k8s``): a ClusterQueue
applied through the API is the quota Kueue's admission reads. The four namespaces a new
cluster has always exist. A custom resource is kept in its storage version and served in the
version asked for (``conversion.py``).
"""

from __future__ import annotations

import base64
import copy
import uuid
from typing import Any, cast

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.state import State, clock, next_id
from tpu_trainer.simcloud.kube import views
from tpu_trainer.simcloud.kube.addons import NAMESPACES as ADDON_NAMESPACES
from tpu_trainer.simcloud.kube.addons import addon_objects
from tpu_trainer.simcloud.kube.conversion import served, to_storage
from tpu_trainer.simcloud.kube.nodes import nodes
from tpu_trainer.simcloud.kube.resources import Resource
from tpu_trainer.simcloud.kube.status import KubeError, already_exists, conflict, not_found
from tpu_trainer.simcloud.server import utc_timestamp

Obj = dict[str, Any]
BUILTIN_NAMESPACES = ("default", "kube-node-lease", "kube-public", "kube-system")
_UID_SPACE = uuid.UUID("6f1c2f9e-0d7a-4a43-9b0e-5d3f0c1e2a10")


def section(state: State) -> dict[str, Any]:
    kube = state.setdefault("kube_api", {})
    kube.setdefault("objects", {})
    kube.setdefault("logs", {})
    return cast(dict[str, Any], kube)


def _key(resource: Resource, namespace: str, name: str) -> str:
    return f"{resource.group}/{resource.plural}/{namespace if resource.namespaced else ''}/{name}"


def _shared(resource: Resource) -> k8s.Kind | None:
    """The stand-in's kind for ``resource`` when the two keep it in ``state["k8s"]``."""
    kind = k8s.kind_of({"kind": resource.kind})
    if kind is None or kind.virtual or kind.group != resource.group:
        return None
    return kind


def _place(state: State, resource: Resource, namespace: str, name: str) -> tuple[Obj, str]:
    """The dict that keeps ``resource`` objects, and the key of ``name`` in it."""
    kind = _shared(resource)
    if kind is not None:
        return state.setdefault("k8s", {}), k8s.key(kind, name, namespace)
    return section(state)["objects"], _key(resource, namespace, name)


def kept_objects(state: State, resource: Resource) -> list[Obj]:
    """The stored objects of ``resource``."""
    kind = _shared(resource)
    if kind is not None:
        state.setdefault("k8s", {})
        return k8s.listed(state, kind, None)
    prefix = f"{resource.group}/{resource.plural}/"
    return [o for k, o in section(state)["objects"].items() if k.startswith(prefix)]


def now(state: State) -> str:
    return utc_timestamp(clock(state)).split(".")[0] + "Z"


def _served(resource: Resource, obj: Obj) -> Obj:
    return served(resource, obj) if resource.schema is not None else copy.deepcopy(obj)


def _namespace(name: str, created: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid5(_UID_SPACE, "ns/" + name)),
            "resourceVersion": "1",
            "creationTimestamp": created,
            "labels": {"kubernetes.io/metadata.name": name},
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def _all(state: State, resource: Resource, jobset: str | None = None) -> list[Obj]:
    """Every object of ``resource`` (of the model: a read of each workload, or of the JobSet
    ``jobset``'s pods only)."""
    if resource.plural == "nodes" and not resource.group:
        return nodes(state, now(state))
    found = kept_objects(state, resource)
    model = views.kind_of(resource)
    if model == "JobSet":
        kept = {o["metadata"]["name"]: o for o in found}
        return [views.jobset(state, wl, kept.get(n)) for n, wl in state["workloads"].items()]
    if model == "Pod":
        found += views.pods(state, jobset)
    elif model == "Workload":
        found += [views.workload(state, wl) for wl in state["workloads"].values()]
    if resource.plural == "namespaces" and not resource.group:
        names = {o["metadata"]["name"] for o in found}
        created = now(state)
        always = (*BUILTIN_NAMESPACES, *ADDON_NAMESPACES)
        found += [_namespace(n, created) for n in always if n not in names]
        found.sort(key=lambda o: str(o["metadata"]["name"]))
    stored = {(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in found}
    addons = addon_objects(resource, now(state))
    return found + [
        a for a in addons if (a["metadata"]["namespace"], a["metadata"]["name"]) not in stored
    ]


def _addon(state: State, resource: Resource, namespace: str, name: str) -> Obj | None:
    """The controller Deployment ``namespace/name`` as the cluster started with it, if it is
    one (``addons.py``): stored on its first change, like any object."""
    for obj in addon_objects(resource, now(state)):
        if (obj["metadata"]["namespace"], obj["metadata"]["name"]) == (namespace, name):
            return obj
    return None


def get(state: State, resource: Resource, namespace: str, name: str) -> Obj:
    model = views.kind_of(resource)
    if model == "Pod" and namespace == "default":
        pod = views.pod(state, name)
        if pod is not None:
            return pod
    if model == "JobSet" and namespace == "default" and name in state["workloads"]:
        kept = [o for o in kept_objects(state, resource) if o["metadata"]["name"] == name]
        wl = state["workloads"][name]
        return _served(resource, views.jobset(state, wl, kept[0] if kept else None))
    for obj in _all(state, resource):
        meta = obj["metadata"]
        if meta["name"] == name and (not resource.namespaced or meta.get("namespace") == namespace):
            return _served(resource, obj)
    raise not_found(resource, name)


def listing(
    state: State, resource: Resource, namespace: str | None, jobset: str | None = None
) -> list[Obj]:
    """Objects of ``resource`` in ``namespace`` (None: every namespace), sorted by name
    (``jobset``: of the model's pods, only that JobSet's)."""
    out = [
        _served(resource, o)
        for o in _all(state, resource, jobset)
        if namespace is None
        or not resource.namespaced
        or o["metadata"].get("namespace") == namespace
    ]
    return sorted(out, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))


def resource_version(state: State) -> str:
    return str(int(state.get("seq", 1000)))


def _check_namespace(state: State, resource: Resource, namespace: str) -> None:
    if not resource.namespaced:
        return
    names = {o["metadata"]["name"] for o in _all(state, _NAMESPACES)}
    if namespace not in names:
        raise KubeError(
            404,
            "NotFound",
            f'namespaces "{namespace}" not found',
            {"name": namespace, "kind": "namespaces"},
        )


def create(state: State, resource: Resource, namespace: str, obj: Obj) -> Obj:
    meta = obj.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta['generateName'][:58]}{_suffix(next_id(state))}"
    name = str(meta.get("name") or "")
    if not name:
        raise KubeError(
            422,
            "Invalid",
            f'{resource.kind} "" is invalid: metadata.name: '
            "Required value: name or generateName is required",
        )
    if resource.plural == "nodes" and not resource.group:
        raise KubeError(
            405, "MethodNotAllowed", "nodes are the node pools' VMs: create a node pool"
        )
    _check_namespace(state, resource, namespace)
    objects, key = _place(state, resource, namespace, name)
    model = views.kind_of(resource)
    if (
        key in objects
        or (resource.plural == "namespaces" and name in BUILTIN_NAMESPACES)
        or (model == "JobSet" and name in state["workloads"])
    ):
        raise already_exists(resource, name)
    if resource.namespaced:
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    seq = next_id(state)
    meta["uid"] = str(uuid.uuid5(_UID_SPACE, f"{key}/{seq}"))
    meta["resourceVersion"] = str(seq)
    meta["creationTimestamp"] = now(state)
    if resource.schema is not None:
        meta["generation"] = 1
    for drop in ("deletionTimestamp", "selfLink"):
        meta.pop(drop, None)
    if model == "JobSet":
        views.register(state, obj)
    if resource.kind == "Secret" and not resource.group:
        _secret_data(obj)
    if resource.kind == "Pod" and not resource.group:  # the pod strategy's PrepareForCreate
        obj["status"] = {"phase": "Pending", **(obj.get("status") or {})}
    if resource.schema is not None:
        obj = to_storage(resource, obj)
    objects[key] = obj
    return _served(resource, obj)


def _suffix(seq: int) -> str:
    """The 5 characters the API server appends to a ``generateName`` (from its alphabet)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    digest = uuid.uuid5(_UID_SPACE, f"generated/{seq}").bytes
    return "".join(alphabet[b % len(alphabet)] for b in digest[:5])


def _secret_data(obj: Obj) -> None:
    """A Secret's ``stringData`` written into ``data`` (base64), as the API server keeps it."""
    plain = obj.pop("stringData", None)
    if isinstance(plain, dict):
        data = obj.setdefault("data", {})
        for key, value in plain.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
    obj.setdefault("type", "Opaque")


def _content(obj: Obj) -> Obj:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion")}


def replace(
    state: State, resource: Resource, namespace: str, name: str, new: Obj, *, status: bool = False
) -> Obj:
    """An update (PUT, or the result of a patch): what changes and what the server keeps."""
    objects, key = _place(state, resource, namespace, name)
    old = objects.get(key) or _addon(state, resource, namespace, name)
    if old is None:
        raise not_found(resource, name)
    if resource.schema is not None:
        new = to_storage(resource, new)
    if resource.kind == "Secret" and not resource.group:
        _secret_data(new)
    meta = new.setdefault("metadata", {})
    wanted = meta.get("resourceVersion")
    if wanted and wanted != old["metadata"]["resourceVersion"]:
        raise conflict(resource, name)
    kept = old["metadata"]
    for field in ("uid", "creationTimestamp", "namespace", "name", "generation"):
        if field in kept:
            meta[field] = kept[field]
        else:
            meta.pop(field, None)
    if status:  # the status subresource changes status only
        new = {**copy.deepcopy(old), "status": new.get("status")}
        meta = new["metadata"]
    elif resource.status_subresource and resource.schema is not None:
        new["status"] = copy.deepcopy(old.get("status"))
        if new["status"] is None:
            del new["status"]
    meta["resourceVersion"] = kept["resourceVersion"]
    new["apiVersion"] = old["apiVersion"]
    if new == old:
        return _served(resource, old)
    if "generation" in meta and _content(new) != _content(old):
        meta["generation"] = int(meta["generation"]) + 1
    meta["resourceVersion"] = str(next_id(state))
    objects[key] = new
    return _served(resource, new)


def stored(state: State, resource: Resource, namespace: str, name: str) -> Obj:
    objects, key = _place(state, resource, namespace, name)
    obj = objects.get(key) or _addon(state, resource, namespace, name)
    if obj is None:
        raise not_found(resource, name)
    return _served(resource, obj)


def delete(
    state: State, resource: Resource, namespace: str, name: str, *, orphan: bool = False
) -> Obj:
    """Remove the object (and, for a namespace, everything in it; for an owner, what it owns
    unless ``orphan``: the propagation policy Orphan)."""
    objects, key = _place(state, resource, namespace, name)
    obj = objects.pop(key, None)
    if views.kind_of(resource) == "Pod" and namespace == "default" and obj is None:
        pod = views.pod(state, name)  # its JobSet's controller would make it again
        if pod is not None:
            return pod
    if views.kind_of(resource) == "JobSet" and namespace == "default":
        model = state["workloads"].get(name)
        if model is not None:
            obj = views.jobset(state, model, obj)
            views.forget(state, name)
    if obj is None:
        raise not_found(resource, name)
    uid = obj["metadata"].get("uid")
    for bucket in (section(state)["objects"], state.setdefault("k8s", {})):
        for other_key, other in list(bucket.items()):
            meta = other["metadata"]
            owned = not orphan and any(
                ref.get("uid") == uid for ref in meta.get("ownerReferences") or ()
            )
            inside = (
                resource.plural == "namespaces"
                and not resource.group
                and meta.get("namespace") == name
            )
            if owned or inside:
                del bucket[other_key]
    if not resource.group and resource.plural == "pods":
        logs = section(state)["logs"]
        for log_key in [k for k in logs if k.startswith(f"{namespace}/{name}/")]:
            del logs[log_key]
    return _served(resource, obj)


_NAMESPACES = Resource("", "v1", "namespaces", "Namespace", False)
