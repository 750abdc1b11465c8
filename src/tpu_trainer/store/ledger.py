"""The clock times a run's timeline is drawn from (the ``resources`` and ``capacity_attempts``
tables, read as times: when each resource was asked for and last changed, when each capacity
attempt was made) and what a run was expected to take and cost (the ``estimates`` table,
written before capacity is asked for)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from tpu_trainer.store.file import StoreFile


@dataclass(frozen=True, slots=True)
class ResourceTimes:
    """One resource of a run: its kind, state, when it was recorded (just before its create
    call) and when its state last changed (for a deleted one: when the delete was confirmed)."""

    kind: str
    name: str
    state: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class AttemptTime:
    """One capacity attempt: the reservation, what came of it and when."""

    reservation: str
    outcome: str
    at: float


class LedgerTable(StoreFile):
    """Reads of a run's resource and capacity-attempt times; its estimate."""

    def record_estimate(self, run_id: str, estimate: dict[str, Any]) -> None:
        """Keep what ``run_id`` is expected to take (recorded before the run itself may be)."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO estimates VALUES (?,?,?)",
                (run_id, time.time(), json.dumps(estimate)),
            )

    def estimate_of(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute(
            "SELECT estimate_json FROM estimates WHERE run_id = ?", (run_id,)
        ).fetchone()
        return json.loads(row[0]) if row else None

    def resource_times(self, run_id: str) -> list[ResourceTimes]:
        rows = self._db.execute(
            "SELECT kind, name, state, created_at, updated_at FROM resources "
            "WHERE run_id = ? ORDER BY id",
            (run_id,),
        ).fetchall()
        return [ResourceTimes(r[0], r[1], r[2], float(r[3]), float(r[4])) for r in rows]

    def attempt_times(self, run_id: str) -> list[AttemptTime]:
        rows = self._db.execute(
            "SELECT reservation, outcome, at FROM capacity_attempts WHERE run_id = ? ORDER BY id",
            (run_id,),
        ).fetchall()
        return [AttemptTime(r[0], r[1], float(r[2])) for r in rows]
