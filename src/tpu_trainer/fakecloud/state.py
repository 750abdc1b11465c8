"""The fake cloud's live state: one JSON file, changed only under an exclusive lock.

``init_state`` writes it from a scenario. Every command of the fake tools runs inside
``transaction``: it takes an exclusive lock on ``<state>.lock``, loads the JSON,
lets the command change it (and appends the command's argv to ``calls``), and writes it back
atomically. Commands may therefore run at the same time from many threads or processes.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.scenario import Scenario
from tpu_trainer.infra.files import atomic_write, file_lock

STATE_ENV = "TPU_TRAINER_FAKE_STATE"
STATE_VERSION = 1
FAKE_NOW = "2026-11-22T06:00:00Z"
"""Timestamp the fake stamps on what it creates (fixed, so outputs are reproducible)."""

State = dict[str, Any]

_POLICY_TOPOLOGY = re.compile(r"-(\d+x\d+(?:x\d+)?)-placement-policy$")


class FakeCloudError(Exception):
    """The fake itself cannot work (no state file): not an answer a real tool would give."""


def state_path(env: Mapping[str, str] | None = None) -> Path:
    """The state file named by ``$TPU_TRAINER_FAKE_STATE``."""
    env = os.environ if env is None else env
    value = env.get(STATE_ENV)
    if not value:
        raise FakeCloudError(
            f"{STATE_ENV} is not set: point it at a state file made by "
            "tpu_trainer.fakecloud.init_state (see docs/fake-cloud.md)"
        )
    path = Path(value)
    if not path.exists():
        raise FakeCloudError(f"{STATE_ENV}={path}: no such state file (run init_state first)")
    return path


def policy_topology(name: str) -> str | None:
    """``4x4x8`` from ``tpu7x-256-4x4x8-placement-policy``."""
    m = _POLICY_TOPOLOGY.search(name)
    return m.group(1) if m else None


def initial_state(scenario: Scenario) -> State:
    """The state a scenario starts in (plain JSON data)."""
    cluster = scenario.cluster
    pools = {
        p.name: new_pool(
            p.name,
            machine_type=p.machine_type,
            node_count=p.node_count,
            zone=p.zone,
            status=p.status,
            version=cluster.node_version,
            tpu_topology=p.tpu_topology,
            placement_policy=p.placement_policy,
            reservation=p.reservation,
        )
        for p in scenario.node_pools
    }
    from tpu_trainer.fakecloud.k8s import initial_objects
    from tpu_trainer.fakecloud.tpu_vm_nodes import initial_tpu_vms

    return {
        "version": STATE_VERSION,
        "project": scenario.project,
        "region": scenario.region,
        "account": scenario.account,
        "cluster": {
            "name": cluster.name,
            "node_version": cluster.node_version,
            "datapath": cluster.datapath,
            "multi_networking": cluster.multi_networking,
            "exists": cluster.exists,
        },
        "node_pools": pools,
        "reservations": {
            r.name: {
                "name": r.name,
                "zone": r.zone,
                "status": r.status,
                "host_count": r.host_count,
                "in_use_hosts": r.in_use_hosts,
                "capacity": r.capacity,
                "machine_type": r.machine_type,
            }
            for r in scenario.reservations
        },
        "resource_policies": {
            p.name: new_policy(p.name, p.accelerator_topology or policy_topology(p.name))
            for p in scenario.resource_policies
        },
        "k8s": initial_objects(scenario),
        "kueue_in_use": dict(scenario.kueue.in_use or {}),
        "workloads": {},
        "behaviours": _plain(scenario.behaviours),
        "workload_defaults": _plain(scenario.workloads),
        "latencies": _plain(scenario.latencies),
        **initial_tpu_vms(scenario),
        "seq": 1000,
        "calls": [],
    }


def _plain(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in obj.__dataclass_fields__:
        value = getattr(obj, name)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


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


def init_state(scenario: Scenario, path: Path | str) -> Path:
    """Write the scenario's starting state to ``path`` (replacing any state there)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        _save(path, initial_state(scenario))
    return path


def next_id(state: State) -> int:
    """A fresh number (resource versions, uids, operation ids)."""
    state["seq"] = int(state.get("seq", 1000)) + 1
    return int(state["seq"])


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with file_lock(path.with_name(path.name + ".lock")):
        yield


def _load(path: Path) -> State:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise FakeCloudError(f"{path} is not a fake-cloud state file (version {STATE_VERSION})")
    return data


def _save(path: Path, state: State) -> None:
    atomic_write(path, json.dumps(state, indent=1, sort_keys=False), mode=0o600, sync=False)


@contextmanager
def transaction(path: Path, call: list[str] | None = None) -> Iterator[State]:
    """Load the state under the lock, let the caller change it, save it (even when the caller
    raises: a failing command still changes state, like a half-done real operation)."""
    with _locked(path):
        state = _load(path)
        if call is not None:
            state.setdefault("calls", []).append(list(call))
        try:
            yield state
        finally:
            _save(path, state)


def read_state(path: Path | str) -> State:
    """A consistent snapshot of the state (for tests and reports)."""
    path = Path(path)
    with _locked(path):
        return _load(path)


def recorded_calls(path: Path | str) -> list[list[str]]:
    """Every command the fake tools received, in order: ``["gcloud", "container", ...]``."""
    calls: list[list[str]] = read_state(path).get("calls", [])
    return calls
