"""The fake cloud's live state: one JSON file, changed only under an exclusive lock.

``initial.init_state`` writes it from a scenario. Every command of the fake tools runs inside
``transaction``: it takes an exclusive lock on ``<state>.lock``, loads the JSON,
lets the command change it (and appends the command's argv to ``calls``), and writes it back
atomically. Commands may therefore run at the same time from many threads or processes.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tpu_trainer.infra.files import atomic_write, file_lock

STATE_ENV = "TPU_TRAINER_FAKE_STATE"
STATE_VERSION = 1
FAKE_NOW = "2026-11-22T06:00:00Z"
"""Timestamp the fake stamps on what it creates (fixed, so outputs are reproducible)."""

FAKE_EPOCH = 1_795_327_200.0
"""``FAKE_NOW`` in seconds: where the scenario's clock starts."""

State = dict[str, Any]


def clock(state: State) -> float:
    """The scenario's clock (seconds since the epoch): it moves only when the emulated APIs
    say so (a fixed tick per call, a wait gcloud would sleep), never with real time."""
    return float(state.get("clock", FAKE_EPOCH))


def advance(state: State, seconds: float) -> float:
    """Move the scenario's clock on by ``seconds``; returns the new time."""
    state["clock"] = clock(state) + seconds
    return float(state["clock"])


def default_project_number(project: str) -> str:
    """A twelve-digit number that stays the same for a project id (a scenario may set its own)."""
    digest = int(hashlib.sha256(project.encode()).hexdigest(), 16)
    return str(100_000_000_000 + digest % 900_000_000_000)


def project_number(state: State) -> str:
    """The scenario project's number (its ``project_number``, else the default for its id)."""
    return str(state.get("project_number") or default_project_number(str(state["project"])))


class FakeCloudError(Exception):
    """The fake itself cannot work (no state file): not an answer a real tool would give."""


def state_path(env: Mapping[str, str] | None = None) -> Path:
    """The state file named by ``$TPU_TRAINER_FAKE_STATE``."""
    env = os.environ if env is None else env
    value = env.get(STATE_ENV)
    if not value:
        raise FakeCloudError(
            f"{STATE_ENV} is not set: point it at a state file made by "
            "tpu_trainer.fakecloud.init_state (see docs/simulated-cloud.md)"
        )
    path = Path(value)
    if not path.exists():
        raise FakeCloudError(f"{STATE_ENV}={path}: no such state file (run init_state first)")
    return path


def new_pool(
    name: str,
    *,
    machine_type: str,
    node_count: int,
    zone: str,
    status: str,
    version: str,
    tpu_topology: str | None = None,
    placement_policy: str | None = None,
    placement_type: str | None = None,
    reservation: str | None = None,
    polls_left: int = 0,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A node pool record (hosts are held against ``reservation`` while it is not ERROR)."""
    return {
        "name": name,
        "machine_type": machine_type,
        "node_count": node_count,
        "zone": zone,
        "status": status,
        "version": version,
        "tpu_topology": tpu_topology,
        "placement_policy": placement_policy,
        "placement_type": placement_type,
        "reservation": reservation,
        "hosts_held": node_count if reservation and status != "ERROR" else 0,
        "polls_left": polls_left,
        "labels": dict(labels or {}),
        "status_message": "",
    }


def new_policy(name: str, topology: str | None) -> dict[str, Any]:
    return {"name": name, "accelerator_topology": topology, "type": "HIGH_THROUGHPUT"}


def write_state(path: Path | str, state: State) -> Path:
    """Write ``state`` to ``path`` under the lock (replacing any state there)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        atomic_write(path, _text(state), mode=0o600, sync=False)
    return path


def next_id(state: State) -> int:
    """A fresh number (resource versions, uids, operation ids)."""
    state["seq"] = int(state.get("seq", 1000)) + 1
    return int(state["seq"])


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with file_lock(path.with_name(path.name + ".lock")):
        yield


def _parse(path: Path, text: str) -> State:
    data = json.loads(text)
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise FakeCloudError(f"{path} is not a fake-cloud state file (version {STATE_VERSION})")
    return data


def _load(path: Path) -> State:
    return _parse(path, path.read_text(encoding="utf-8"))


def _text(state: State) -> str:
    return json.dumps(state, indent=1, sort_keys=False)


@contextmanager
def transaction(path: Path, call: list[str] | None = None) -> Iterator[State]:
    """Load the state under the lock, let the caller change it, save it (even when the caller
    raises: a failing command still changes state, like a half-done real operation). A state
    the caller left as it was is not written again (most reads change nothing)."""
    with _locked(path):
        before = path.read_text(encoding="utf-8")
        state = _parse(path, before)
        if call is not None:
            state.setdefault("calls", []).append(list(call))
        try:
            yield state
        finally:
            after = _text(state)
            if after != before:
                atomic_write(path, after, mode=0o600, sync=False)


def read_state(path: Path | str) -> State:
    """A consistent snapshot of the state (for tests and reports)."""
    path = Path(path)
    with _locked(path):
        return _load(path)


def recorded_calls(path: Path | str) -> list[list[str]]:
    """Every command the fake tools received, in order: ``["gcloud", "container", ...]``."""
    calls: list[list[str]] = read_state(path).get("calls", [])
    return calls
