"""``?watch=true`` on a list (``kubectl get -w``): the changes after ``resourceVersion`` as
watch events (ADDED, MODIFIED, DELETED), one JSON object a line, found by reading the state
every ``POLL_SECONDS``, until ``timeoutSeconds`` pass or the server stops."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.state import clock, read_state
from tpu_trainer.simcloud.kube import store
from tpu_trainer.simcloud.kube.api import Target
from tpu_trainer.simcloud.kube.selectors import field_selector, label_selector
from tpu_trainer.simcloud.kube.table import table

POLL_SECONDS = 0.2
Obj = dict[str, Any]


def _version(obj: Obj) -> int:
    try:
        return int(obj["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


def _key(obj: Obj) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


def watch_events(
    state_path: Path, t: Target, query: dict[str, str], as_table: bool, alive: Callable[[], bool]
) -> Iterator[str]:
    """The event lines; the first read happens before anything is sent (errors raise)."""
    matches = [
        *([label_selector(query["labelSelector"])] if query.get("labelSelector") else []),
        *(
            [field_selector(query["fieldSelector"], t.resource.plural)]
            if query.get("fieldSelector")
            else []
        ),
    ]
    since = int(query.get("resourceVersion") or 0)
    deadline = time.monotonic() + float(query.get("timeoutSeconds") or 1800)

    def read() -> tuple[dict[str, Obj], float, str]:
        state = read_state(state_path)
        items = store.listing(state, t.resource, t.namespace)
        found = {_key(o): o for o in items if all(m(o) for m in matches)}
        return found, clock(state), store.resource_version(state)

    def line(kind: str, obj: Obj, now: float, rv: str) -> str:
        shown = table(t.resource, [obj], now, rv) if as_table else obj
        return json.dumps({"type": kind, "object": shown})

    first = read()

    def events() -> Iterator[str]:
        seen, now, rv = first
        for obj in seen.values():
            if _version(obj) > since or not since:
                yield line("ADDED", obj, now, rv)
        while alive() and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            current, now, rv = read()
            for key, obj in current.items():
                old = seen.get(key)
                if old is None:
                    yield line("ADDED", obj, now, rv)
                elif _version(obj) != _version(old):
                    yield line("MODIFIED", obj, now, rv)
            for key in seen.keys() - current.keys():
                yield line("DELETED", seen[key], now, rv)
            seen = current

    return events()
