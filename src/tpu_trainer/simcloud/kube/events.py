"""Events the emulated controllers record, as core ``v1`` Events (what ``kubectl get events``
and ``kubectl describe`` show): named ``<object>.<16 hex digits>``, about one object
(``involvedObject``, and the container a kubelet event is about), with a reason, a message, a
type (``Normal`` | ``Warning``) and the component that reported it (and the node, for the
kubelet's). An event about a cluster-scoped object (a Node) is kept in ``default``. An event
repeated (same object, reason and message) is counted, not written again."""

from __future__ import annotations

import hashlib
from typing import Any

from tpu_trainer.fakecloud.state import State
from tpu_trainer.simcloud.kube import store
from tpu_trainer.simcloud.kube.resources import CORE

Obj = dict[str, Any]
EVENTS = next(r for r in CORE if r.plural == "events")


def record(
    state: State,
    about: Obj,
    kind: str,
    reason: str,
    message: str,
    component: str,
    *,
    host: str = "",
    field_path: str = "",
) -> None:
    """Record that ``component`` (on node ``host``) saw ``reason`` on ``about`` (on its part
    ``field_path``, such as ``spec.containers{ray-worker}``), once per reason and message."""
    meta = about["metadata"]
    namespace = str(meta.get("namespace") or "default")
    involved = {
        "apiVersion": about.get("apiVersion", "v1"),
        "kind": about.get("kind", ""),
        "name": meta["name"],
        "namespace": str(meta.get("namespace") or ""),
        "uid": meta.get("uid", ""),
    }
    if field_path:
        involved["fieldPath"] = field_path
    seed = f"{meta.get('uid')}/{reason}/{message}"
    name = f"{meta['name']}.{hashlib.sha256(seed.encode()).hexdigest()[:16]}"
    if any(e["metadata"]["name"] == name for e in store.kept_objects(state, EVENTS)):
        return
    now = store.now(state)
    store.create(
        state,
        EVENTS,
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component, **({"host": host} if host else {})},
            "reportingComponent": component,
            "reportingInstance": host,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        },
    )
