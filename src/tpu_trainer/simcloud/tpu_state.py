"""Where the emulated Cloud TPU keeps its resources, and the clock they age by.

Everything lives in one JSON-shaped mapping, under ``tpu_vm`` (a rehearsal's state file, so a
later ``cleanup`` or ``gc`` in another process, and the local ``tpu-vm ssh`` stand-in, see the
same VMs):

- ``behaviour``: what the scenario says (``zones`` offered, ``capacity``, ``creating_polls``,
  ``queued_polls``); missing keys mean every zone, capacity, one call CREATING.
- ``nodes``: node id -> record (``name``, ``zone``, ``project``, ``accelerator_type``,
  ``runtime_version``, ``state``, ``workers`` (their internal IPs), ``scheduling``,
  ``queued_resource``, and the emulator's own ``ready_at``/``gone_at``/``operation``).
- ``queued``: queued resource id -> record; ``operations``: name -> long-running operation.
- ``clock``: the scenario's clock (``fakecloud.state.clock``, shared with the other emulated
  APIs) as seconds since its start, as this service last saw it. Each Cloud TPU call moves
  the shared clock by :data:`TICK_SECONDS`; nothing ever sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from tpu_trainer.catalog.data_file import mapping, parse_mapping, read_packaged, strings
from tpu_trainer.errors import TopologyError
from tpu_trainer.fakecloud.state import FAKE_EPOCH, transaction
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.server import ApiError, utc_timestamp

TICK_SECONDS = 10.0
"""How far the scenario clock moves with each API call."""
START = FAKE_EPOCH
"""The scenario clock's zero: 2026-11-22T06:00:00Z (the fake cloud's fixed "now")."""

Record = dict[str, Any]
StateAccess = Callable[[], AbstractContextManager[dict[str, Any]]]
"""Opens the state for one call: the mapping, changed in place, saved when the block ends."""


class MemoryState:
    """State kept in this process only (tests of the service on its own)."""

    def __init__(self, data: dict[str, Any] | None = None) -> None:
        self.data: dict[str, Any] = data if data is not None else {}
        self._lock = threading.RLock()

    @contextmanager
    def _open(self) -> Iterator[dict[str, Any]]:
        with self._lock:
            yield self.data

    def __call__(self) -> AbstractContextManager[dict[str, Any]]:
        return self._open()


def file_state(path: Path) -> StateAccess:
    """The state file of a rehearsal, opened under its lock for each call."""
    return lambda: transaction(path)


def tpu_section(state: dict[str, Any]) -> Record:
    """``state["tpu_vm"]`` with every part the service uses present."""
    tv: Record = state.setdefault("tpu_vm", {})
    for key in ("behaviour", "nodes", "queued", "operations"):
        tv.setdefault(key, {})
    tv.setdefault("clock", 0.0)
    tv.setdefault("seq", 0)
    return tv


def stamp(seconds: float) -> str:
    """A scenario time as the API writes it."""
    return utc_timestamp(START + seconds)


def next_seq(tv: Record) -> int:
    tv["seq"] = int(tv["seq"]) + 1
    return int(tv["seq"])


def accelerator_slice(accelerator_type: str) -> Slice | None:
    try:
        return Slice.parse(accelerator_type)
    except TopologyError:
        return None


@cache
def _offer() -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    name = "tpu_offer.yaml"
    raw = parse_mapping(read_packaged("tpu_trainer.simcloud", name), name)
    versions = mapping(name, raw, "runtime_versions")
    table = {k: strings(f"{name}: runtime_versions", versions, k) for k in versions}
    return table, strings(name, raw, "base_images")


def _bad_request(detail: str) -> ApiError:
    return ApiError(400, f"Cloud TPU received a bad request. {detail}")


def check_offer(behaviour: Record, zone: str, accelerator_type: str, version: str) -> Slice:
    """The slice a create asks for, or the API's INVALID_ARGUMENT: a zone the scenario does
    not offer, an unknown accelerator type, a runtime version the family cannot run."""
    zones = behaviour.get("zones")
    found = accelerator_slice(accelerator_type)
    if (zones and zone not in zones) or found is None or found.accelerator.tpu_vm_runtime is None:
        acc = accelerator_type or "v2-8"
        raise _bad_request(
            f'The requested accelerator configuration for accelerator type, "{acc}", could not '
            f'be found in the zonal accelerator configurations for "{zone}".; the accelerator '
            f"{acc} was not found in zone {zone}"
        )
    table, base = _offer()
    if version not in (*table.get(found.accelerator.xpk_prefix, ()), *base):
        raise _bad_request(
            f'Runtime version "{version}" is not supported for accelerator type '
            f'"{accelerator_type}" in zone "{zone}".'
        )
    return found


def worker_ips(seq: int, hosts: int) -> list[str]:
    """One internal IP per worker (host) of a node."""
    return [f"10.130.{seq % 250}.{w + 2}" for w in range(hosts)]
