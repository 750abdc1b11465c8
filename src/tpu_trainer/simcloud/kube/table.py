"""``meta.k8s.io/v1`` Table answers, which ``kubectl get`` asks for (``Accept: ...;as=Table``):
the columns the real server prints for the core kinds, a CRD version's
``additionalPrinterColumns`` (``.a.b`` JSON paths and ``[?(@.k=='v')]`` list filters) for
custom resources."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from tpu_trainer.simcloud.kube.resources import Resource

Obj = dict[str, Any]
_NAME = {
    "name": "Name",
    "type": "string",
    "format": "name",
    "priority": 0,
    "description": "Name must be unique within a namespace.",
}
_AGE = {
    "name": "Age",
    "type": "string",
    "format": "",
    "priority": 0,
    "description": "CreationTimestamp is a timestamp representing the server time.",
}


def _column(name: str, type_: str = "string", priority: int = 0) -> Obj:
    return {"name": name, "type": type_, "format": "", "priority": priority, "description": name}


def _age(obj: Obj, now: float) -> str:
    stamp = (obj.get("metadata") or {}).get("creationTimestamp")
    if not stamp:
        return "<unknown>"
    seconds = max(
        0, int(now - datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp())
    )
    for size, unit in ((86400, "d"), (3600, "h"), (60, "m")):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[\?\(@\.([A-Za-z0-9_-]+)==['\"]([^'\"]*)['\"]\)\]")


def _path(obj: Obj, path: str) -> Any:
    """A printer column's ``jsonPath``: ``.a.b``, and list filters ``.c[?(@.type=='Ready')].d``
    (the first match)."""
    node: Any = obj
    for field, key, value in _STEP.findall(path.strip()):
        if field and isinstance(node, dict):
            node = node.get(field)
        elif key and isinstance(node, list):
            node = next((i for i in node if isinstance(i, dict) and i.get(key) == value), None)
        else:
            return None
    return node


def _node_row(obj: Obj) -> list[Any]:
    ready: dict[str, Any] = next(
        (c for c in obj["status"].get("conditions", []) if c["type"] == "Ready"), {}
    )
    return [
        "Ready" if ready.get("status") == "True" else "NotReady",
        "<none>",
        obj["status"].get("nodeInfo", {}).get("kubeletVersion", ""),
    ]


def _pod_row(obj: Obj) -> list[Any]:
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    return [
        f"{ready}/{len(containers)}",
        (obj.get("status") or {}).get("phase", "Pending"),
        restarts,
    ]


def _service_row(obj: Obj) -> list[Any]:
    spec = obj.get("spec") or {}
    ports = ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or [])
    return [
        spec.get("type", "ClusterIP"),
        spec.get("clusterIP") or "<none>",
        "<none>",
        ports or "<none>",
    ]


def _event_table(objects: list[Obj], now: float) -> tuple[list[Obj], list[list[Any]]]:
    """Events have no Name column: LAST SEEN, TYPE, REASON, OBJECT, MESSAGE."""
    columns = [
        _column("Last Seen"),
        _column("Type"),
        _column("Reason"),
        _column("Object"),
        _column("Message"),
    ]
    rows = []
    for o in objects:
        involved = o.get("involvedObject") or {}
        seen = (
            o.get("lastTimestamp") or o.get("eventTime") or o["metadata"].get("creationTimestamp")
        )
        rows.append(
            [
                _age({"metadata": {"creationTimestamp": seen}}, now),
                o.get("type", "Normal"),
                o.get("reason", ""),
                f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
                o.get("message", ""),
            ]
        )
    return columns, rows


_CORE: dict[str, tuple[list[Obj], Any]] = {
    "services": (
        [_column("Type"), _column("Cluster-IP"), _column("External-IP"), _column("Port(s)")],
        _service_row,
    ),
    "nodes": ([_column("Status"), _column("Roles"), _column("Version")], _node_row),
    "pods": ([_column("Ready"), _column("Status"), _column("Restarts", "string")], _pod_row),
    "namespaces": ([_column("Status")], lambda o: [(o.get("status") or {}).get("phase", "Active")]),
    "secrets": (
        [_column("Type"), _column("Data", "integer")],
        lambda o: [o.get("type", "Opaque"), len(o.get("data") or {})],
    ),
    "configmaps": (
        [_column("Data", "integer")],
        lambda o: [len(o.get("data") or {}) + len(o.get("binaryData") or {})],
    ),
}


def table(resource: Resource, objects: list[Obj], now: float, resource_version: str) -> Obj:
    """The Table of ``objects``; each row carries its object (``kubectl get -L/--show-labels``)."""
    if resource.schema is not None:
        extra = [c for c in resource.columns if str(c.get("name", "")).lower() != "age"]
        columns = (
            [_NAME]
            + [
                {
                    "name": c["name"],
                    "type": c.get("type", "string"),
                    "format": c.get("format", ""),
                    "priority": int(c.get("priority", 0)),
                    "description": c.get("description", ""),
                }
                for c in extra
            ]
            + [_AGE]
        )
        rows = [
            [o["metadata"]["name"], *(_cell(o, c, now) for c in extra), _age(o, now)]
            for o in objects
        ]
    elif resource.plural == "events":
        columns, rows = _event_table(objects, now)
    else:
        core_columns, row = _CORE.get(resource.plural, ([], lambda _: []))
        columns = [_NAME, *core_columns, _AGE]
        rows = [[o["metadata"]["name"], *row(o), _age(o, now)] for o in objects]
        if resource.plural == "nodes":  # the real order: NAME STATUS ROLES AGE VERSION
            columns = [columns[0], columns[1], columns[2], columns[4], columns[3]]
            rows = [[r[0], r[1], r[2], r[4], r[3]] for r in rows]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": [{"cells": cells, "object": obj} for cells, obj in zip(rows, objects, strict=True)],
    }


def _cell(obj: Obj, column: Any, now: float) -> Any:
    value = _path(obj, str(column.get("jsonPath", "")))
    if value is not None and column.get("type") == "date":
        return _age({"metadata": {"creationTimestamp": value}}, now)
    return value
