"""Events the emulated controllers record, as core ``v1`` Events (what ``kubectl get events``
and ``kubectl describe`` show): named ``<object>.<16 hex digits>``, about one object
(``involvedObject``), with a reason, a message, a type (``Normal`` | ``Warning``) and the
component that reported it. An event repeated (same object, reason and message) is counted,
not written again."""

from __future__ import annotations

import hashlib
from typing import Any

from tpu_trainer.fakecloud.state import State
from tpu_trainer.simcloud.kube import store
from tpu_trainer.simcloud.kube.resources import CORE

Obj = dict[str, Any]
EVENTS = next(r for r in CORE if r.plural == "events")


def record(state: State, about: Obj, kind: str, reason: str, message: str, component: str) -> None:
    """Record that ``component`` saw ``reason`` on ``about`` (once per reason and message)."""
    meta = about["metadata"]
    namespace = str(meta.get("namespace") or "default")
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
            "involvedObject": {
                "apiVersion": about.get("apiVersion", "v1"),
                "kind": about.get("kind", ""),
                "name": meta["name"],
                "namespace": namespace,
                "uid": meta.get("uid", ""),
            },
            "reason": reason,
            "message": message,
            "type": kind,
            "source": {"component": component},
            "reportingComponent": component,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        },
    )
