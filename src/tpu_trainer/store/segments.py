"""The segments of a run: each attempt on capacity (the first, then one per automatic resume).

A segment starts when its workload is submitted and ends with the run or with an interruption
(``cause``: preempted, stopped, unfinished). What an interruption cost is kept on the segment
that follows it: the steps its predecessor redid after the last durable checkpoint
(``wasted_steps``) and the seconds from the interruption to its own first step
(``recovery_s``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tpu_trainer.store.file import StoreFile


@dataclass(frozen=True, slots=True)
class SegmentRow:
    run_id: str
    n: int
    zone: str | None
    started_at: float
    first_step_at: float | None
    ended_at: float | None
    cause: str | None
    last_step: int | None
    durable_step: int | None
    restored_step: int | None
    wasted_steps: int | None
    recovery_s: float | None


@dataclass(frozen=True, slots=True)
class SegmentEnd:
    """How a segment ended (``cause`` None: the run finished in it)."""

    cause: str | None
    last_step: int | None
    durable_step: int | None
    restored_step: int | None


class SegmentsTable(StoreFile):
    """The ``segments`` table."""

    def start_segment(self, run_id: str, zone: str | None) -> int:
        """A new segment of ``run_id``; returns its number (1 for the first)."""
        with self._tx() as db:
            (last,) = db.execute(
                "SELECT COALESCE(MAX(n), 0) FROM segments WHERE run_id = ?", (run_id,)
            ).fetchone()
            n = int(last) + 1
            db.execute(
                "INSERT INTO segments (run_id, n, zone, started_at) VALUES (?,?,?,?)",
                (run_id, n, zone, time.time()),
            )
        return n

    def segment_first_step(self, run_id: str, n: int, wasted_steps: int | None) -> None:
        """The segment's first step arrived: the recovery from the interruption before it
        (if any) is over."""
        now = time.time()
        with self._tx() as db:
            before = db.execute(
                "SELECT ended_at FROM segments WHERE run_id = ? AND n = ?", (run_id, n - 1)
            ).fetchone()
            recovery = None if before is None or before[0] is None else now - float(before[0])
            db.execute(
                "UPDATE segments SET first_step_at = ?, recovery_s = ?, wasted_steps = ? "
                "WHERE run_id = ? AND n = ? AND first_step_at IS NULL",
                (now, recovery, wasted_steps if n > 1 else None, run_id, n),
            )

    def end_segment(self, run_id: str, n: int, end: SegmentEnd) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE segments SET ended_at = ?, cause = ?, last_step = ?, durable_step = ?, "
                "restored_step = ? WHERE run_id = ? AND n = ?",
                (
                    time.time(),
                    end.cause,
                    end.last_step,
                    end.durable_step,
                    end.restored_step,
                    run_id,
                    n,
                ),
            )

    def segments(self, run_id: str) -> list[SegmentRow]:
        rows = self._db.execute(
            "SELECT run_id, n, zone, started_at, first_step_at, ended_at, cause, last_step, "
            "durable_step, restored_step, wasted_steps, recovery_s FROM segments "
            "WHERE run_id = ? ORDER BY n",
            (run_id,),
        ).fetchall()
        return [SegmentRow(*r) for r in rows]

    def interruptions(self, run_id: str) -> int:
        """How many of the run's segments an interruption ended."""
        (count,) = self._db.execute(
            "SELECT COUNT(*) FROM segments WHERE run_id = ? AND cause IS NOT NULL", (run_id,)
        ).fetchone()
        return int(count)
