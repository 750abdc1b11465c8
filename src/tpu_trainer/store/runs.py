"""Runs in the store: a run's row, its stages and the commands it ran."""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.store.file import RunMode, StoreFile

_TAIL = 4000


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    """Ended cleanly before its last step: preempted or stopped by maintenance."""


@dataclass(frozen=True, slots=True)
class RunRow:
    id: str
    model: str
    request: str
    launcher: LaunchPath
    device_type: str
    precision: str
    status: RunStatus
    pid: int | None
    host: str | None
    project: str | None
    cluster: str | None
    region: str | None
    zone: str | None
    created_at: float
    finished_at: float | None
    error: str | None
    pools_before: list[str] | None
    mode: RunMode = RunMode.REAL

    def process_alive(self) -> bool:
        """Whether the process that owns this run is still running (on this host)."""
        if self.pid is None or self.host != socket.gethostname():
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


class RunsTable(StoreFile):
    """The ``runs``, ``stages`` and ``commands`` tables."""

    # ---- runs ---------------------------------------------------------------------------
    def create_run(
        self,
        run_id: str,
        *,
        model: str,
        request: str,
        launcher: LaunchPath,
        device_type: str,
        precision: str,
        project: str | None,
        cluster: str | None,
        region: str | None,
        zone: str | None,
        plan_json: dict[str, Any] | None,
    ) -> None:
        self.require_sound()
        now = time.time()
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs (id, created_at, updated_at, model, request, launcher, "
                "device_type, precision, status, pid, host, project, cluster, region, zone, "
                "plan_json, mode) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    now,
                    now,
                    model,
                    request,
                    launcher,
                    device_type,
                    precision,
                    RunStatus.RUNNING.value,
                    os.getpid(),
                    socket.gethostname(),
                    project,
                    cluster,
                    region,
                    zone,
                    json.dumps(plan_json) if plan_json is not None else None,
                    self.mode.value,
                ),
            )

    def update_run(self, run_id: str, **fields: Any) -> None:
        allowed = {"status", "error", "zone", "pools_before", "finished_at", "pid", "host"}
        unknown = set(fields) - allowed
        if unknown:
            raise ValueError(f"cannot update {sorted(unknown)}")
        values = {
            k: (
                json.dumps(v) if k == "pools_before" else (v.value if isinstance(v, StrEnum) else v)
            )
            for k, v in fields.items()
        }
        sets = ", ".join(f"{k} = ?" for k in values)
        with self._tx() as db:
            db.execute(
                f"UPDATE runs SET {sets}, updated_at = ? WHERE id = ?",  # noqa: S608
                (*values.values(), time.time(), run_id),
            )

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None) -> None:
        self.update_run(run_id, status=status, error=error, finished_at=time.time())

    def run(self, run_id: str) -> RunRow | None:
        row = self._db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?",  # noqa: S608
            (run_id,),
        ).fetchone()
        return _run_row(row) if row else None

    def mark_gone_runs(self) -> list[str]:
        """Runs still "running" whose process on this host has ended: mark them failed (the
        process was killed). Returns their ids."""
        here = socket.gethostname()
        gone = [
            r
            for r in self.runs(limit=100_000)
            if r.status is RunStatus.RUNNING and r.host == here and not r.process_alive()
        ]
        for r in gone:
            self.finish_run(
                r.id, RunStatus.FAILED, f"process {r.pid} on {r.host} ended without finishing"
            )
        return [r.id for r in gone]

    def plan_of(self, run_id: str) -> dict[str, Any] | None:
        """The plan JSON stored when the run started."""
        row = self._db.execute("SELECT plan_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    def runs(self, limit: int = 100) -> list[RunRow]:
        rows = self._db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs ORDER BY created_at DESC LIMIT ?",  # noqa: S608
            (limit,),
        ).fetchall()
        return [_run_row(r) for r in rows]

    # ---- stages ---------------------------------------------------------------------------
    def stage_started(self, run_id: str, name: str) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO stages VALUES (?,?,?,?,?,?)",
                (run_id, name, "running", time.time(), None, None),
            )

    def stage_finished(self, run_id: str, name: str, status: str, detail: str = "") -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE stages SET status = ?, finished_at = ?, detail = ? "
                "WHERE run_id = ? AND name = ?",
                (status, time.time(), detail, run_id, name),
            )

    def stages(self, run_id: str) -> list[tuple[str, str, float, float | None, str | None]]:
        return list(
            self._db.execute(
                "SELECT name, status, started_at, finished_at, detail FROM stages WHERE run_id = ? "
                "ORDER BY started_at",
                (run_id,),
            ).fetchall()
        )

    # ---- commands --------------------------------------------------------------------------
    def record_command(self, run_id: str | None, result: CommandResult) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO commands (run_id, argv, exit_code, ran, started_at, seconds, "
                "stdout_tail, stderr_tail) VALUES (?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    json.dumps(list(result.argv)),
                    result.code,
                    int(result.ran),
                    time.time() - result.seconds,
                    result.seconds,
                    result.stdout[-_TAIL:],
                    result.stderr[-_TAIL:],
                ),
            )

    def commands(self, run_id: str) -> list[tuple[list[str], int, bool]]:
        rows = self._db.execute(
            "SELECT argv, exit_code, ran FROM commands WHERE run_id = ? ORDER BY id", (run_id,)
        ).fetchall()
        return [(json.loads(a), int(c), bool(r)) for a, c, r in rows]


_RUN_COLUMNS = (
    "id, model, request, launcher, device_type, precision, status, pid, host, "
    "project, cluster, region, zone, created_at, finished_at, error, pools_before, mode"
)


def _run_row(r: Sequence[Any]) -> RunRow:
    return RunRow(
        r[0],
        r[1],
        r[2],
        LaunchPath(r[3]),
        r[4],
        r[5],
        RunStatus(r[6]),
        r[7],
        r[8],
        r[9],
        r[10],
        r[11],
        r[12],
        r[13],
        r[14],
        r[15],
        json.loads(r[16]) if r[16] else None,
        RunMode(r[17] or RunMode.REAL.value),
    )
