"""Pod logs: ``GET /api/v1/namespaces/<ns>/pods/<pod>/log?container=C&follow=true``.

A pod of the workload model (``views.py``) prints the model's log for it
(``fakecloud.workloads.log_of``: worker 0 the scenario's log), refused as the kubelet refuses
while its workload is held by Kueue or its pod waits to start; followed, the log of a worker that stopped
logging (``hang_after_step``) stays open and silent until the workload is deleted, as the
scenario's hung host does; ``tailLines`` keeps its last lines; ``timestamps=true`` puts each
line's write time in front of it, as the kubelet does (``log_stamps.py``).

Another pod's lines are kept in the state (``state["kube_api"]["logs"]["<ns>/<pod>/<container>"]``;
``append_log`` adds them). Without ``follow`` the lines so far are answered; with it they are
streamed as they are appended, until the pod has Succeeded or Failed (or is deleted).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud import workloads as wls
from tpu_trainer.fakecloud.state import State, read_state, transaction
from tpu_trainer.simcloud.kube import store, views
from tpu_trainer.simcloud.kube.log_stamps import stamp, with_timestamps
from tpu_trainer.simcloud.kube.resources import CORE
from tpu_trainer.simcloud.kube.status import KubeError, bad_request

PODS = next(r for r in CORE if r.plural == "pods")
FOLLOW_POLL_SECONDS = 0.1
_DONE = ("Succeeded", "Failed")


def append_log(
    state_path: Path,
    namespace: str,
    pod: str,
    container: str,
    lines: Sequence[str],
    *,
    phase: str = "",
) -> None:
    """Add ``lines`` to a container's log (and, with ``phase``, set the pod's phase)."""
    with transaction(state_path) as state:
        key = f"{namespace}/{pod}/{container}"
        kept = store.section(state)["logs"].setdefault(key, [])
        kept.extend(lines)
        stamp(state, key, len(kept))
        if phase:
            obj = store.stored(state, PODS, namespace, pod)
            obj.setdefault("status", {})["phase"] = phase
            store.replace(state, PODS, namespace, pod, obj, status=True)


def _container(pod: dict[str, Any], wanted: str) -> str:
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    name = pod["metadata"]["name"]
    if wanted:
        if wanted not in names:
            raise bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    if len(names) == 1:
        return names[0]
    raise bad_request(
        f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]"
    )


def _snapshot(
    state_path: Path, namespace: str, pod: str, container: str, timestamps: bool
) -> tuple[list[str], bool]:
    state = read_state(state_path)
    try:
        obj = store.stored(state, PODS, namespace, pod)
    except KubeError:
        return [], True
    key = f"{namespace}/{pod}/{container}"
    lines = list(store.section(state)["logs"].get(key, []))
    if timestamps:
        lines = with_timestamps(lines, stamp(state, key, len(lines)))
    return lines, (obj.get("status") or {}).get("phase") in _DONE


def log_lines(
    state_path: Path, namespace: str, pod: str, query: dict[str, str], alive: Any
) -> Iterator[str]:
    """The container's lines; with ``follow=true`` new ones as they come. The first call checks
    the pod and container (raising the real errors) before anything is streamed."""
    follow = query.get("follow") in ("true", "1")
    with transaction(state_path) as state:
        model = views.pod(state, pod) if namespace == "default" else None
        if model is not None:
            container = _container(model, query.get("container", ""))
            return _model_log(state, state_path, pod, container, follow, alive, query)
        container = _container(
            store.stored(state, PODS, namespace, pod), query.get("container", "")
        )
    timestamps = query.get("timestamps") in ("true", "1")
    tail = int(query["tailLines"]) if query.get("tailLines") else None
    return _stream(state_path, namespace, pod, container, follow, alive, timestamps, tail)


def _model_log(
    state: State,
    state_path: Path,
    pod: str,
    container: str,
    follow: bool,
    alive: Any,
    query: dict[str, str],
) -> Iterator[str]:
    found = views.pod_of(state, pod)
    assert found is not None  # noqa: S101 - views.pod found it
    wl, j, i = found
    if views.peek(state, wl) in ("Unschedulable", "Pending"):
        raise bad_request(
            f'container "{container}" in pod "{pod}" is waiting to start: ContainerCreating'
        )
    lines = wls.log_of(wl, j, i, container).splitlines()
    if query.get("timestamps") in ("true", "1"):
        lines = with_timestamps(lines, stamp(state, f"default/{pod}/{container}", len(lines)))
    if query.get("tailLines"):
        count = int(query["tailLines"])
        lines = lines[-count:] if count > 0 else []
    silent = follow and wl.get("hang_after_step") is not None and (j, i) == (0, 0)
    return _then_silent(state_path, wl["name"], lines, alive) if silent else iter(lines)


def _then_silent(state_path: Path, workload: str, lines: list[str], alive: Any) -> Iterator[str]:
    """The lines, then nothing until the workload is deleted (a host that stopped logging)."""
    yield from lines
    while alive() and workload in read_state(state_path)["workloads"]:
        time.sleep(FOLLOW_POLL_SECONDS)


def _stream(
    state_path: Path,
    namespace: str,
    pod: str,
    container: str,
    follow: bool,
    alive: Any,
    timestamps: bool,
    tail: int | None,
) -> Iterator[str]:
    sent: int | None = None
    while True:
        lines, done = _snapshot(state_path, namespace, pod, container, timestamps)
        if sent is None:  # the first answer: only its last ``tailLines`` lines, when asked
            sent = 0 if tail is None or tail < 0 else max(0, len(lines) - tail)
        yield from lines[sent:]
        sent = len(lines)
        if not follow or done or not alive():
            return
        time.sleep(FOLLOW_POLL_SECONDS)
