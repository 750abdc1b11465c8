"""The run store: SQLite (WAL), one file, passed around as an object.

It keeps every run, its stages, every command run (secrets already redacted), every cloud
resource the tool created (written *before* the create call is made, so a killed process never
loses track of what it may have created), and every attempt to find capacity.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.store.damage import StoreDamagedError, recovery_fix
from tpu_trainer.store.migrations import MIGRATIONS

_TAIL = 4000


class ResourceState(StrEnum):
    CREATING = "creating"
    """Recorded before the create call: it may or may not exist."""
    CREATED = "created"
    DELETING = "deleting"
    DELETED = "deleted"
    ABSENT = "absent"
    """The create call failed and nothing was made."""
    MAYBE = "maybe"
    """The create call failed, but may have made it: teardown asks the cloud."""
    LEFT = "left"
    """Deliberately left in place (in use by something tpu-trainer did not make)."""


class RunStatus(StrEnum):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class RunMode(StrEnum):
    REAL = "real"
    REHEARSAL = "rehearsal"
    """On the fake cloud (``--rehearse``): its numbers are not a measurement."""


LIVE_STATES = (
    ResourceState.CREATING,
    ResourceState.CREATED,
    ResourceState.DELETING,
    ResourceState.MAYBE,
)


@dataclass(frozen=True, slots=True)
class Resource:
    id: int
    run_id: str
    kind: str
    """nodepool, workload, workload-policy, tpu-vm, raycluster..."""
    name: str
    project: str
    location: str
    cluster: str | None
    state: ResourceState
    detail: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunRow:
    id: str
    model: str
    request: str
    launcher: str
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


def default_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("TPU_TRAINER_HOME"):
        return Path(env["TPU_TRAINER_HOME"]).expanduser() / "runs.db"
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "tpu-trainer" / "runs.db"


class RunStore:
    def __init__(self, path: Path, mode: RunMode = RunMode.REAL) -> None:
        self.path = path
        self.mode = mode
        """The mode of the runs this store object creates."""
        self._lock = threading.RLock()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = sqlite3.connect(
                path, timeout=30, isolation_level=None, check_same_thread=False
            )
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA busy_timeout=30000")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise StoreDamagedError(
                f"run store {path} cannot be opened: {e}", fix=recovery_fix(path)
            ) from None

    def close(self) -> None:
        self._db.close()

    def integrity_problems(self) -> list[str]:
        """What ``PRAGMA quick_check`` finds wrong with the file ([] when it is sound)."""
        try:
            with self._lock:
                rows = self._db.execute("PRAGMA quick_check").fetchall()
        except sqlite3.DatabaseError as e:
            return [str(e)]
        return [str(r[0]) for r in rows if str(r[0]) != "ok"]

    def require_sound(self) -> None:
        """Refuse to go on (before anything is created) when the file is damaged."""
        problems = self.integrity_problems()
        if problems:
            raise StoreDamagedError(
                f"run store {self.path} is damaged ({'; '.join(problems[:3])}); "
                "nothing was created",
                fix=recovery_fix(self.path),
            )

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; threads of this process take turns on the connection."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _migrate(self) -> None:
        self._db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        current = row[0] or 0
        if current > len(MIGRATIONS):
            raise TpuTrainerError(
                f"run store {self.path} is schema {current}, newer than this tpu-trainer "
                f"({len(MIGRATIONS)})",
                fix="upgrade tpu-trainer; the store was left as it is",
            )
        for version in range(current + 1, len(MIGRATIONS) + 1):
            with self._tx() as db:
                for statement in _statements(MIGRATIONS[version - 1]):
                    db.execute(statement)
                db.execute("INSERT INTO schema_version VALUES (?)", (version,))

    @property
    def schema_version(self) -> int:
        row = self._db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    # ---- runs ---------------------------------------------------------------------------
    def create_run(
        self,
        run_id: str,
        *,
        model: str,
        request: str,
        launcher: str,
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

    # ---- resources -------------------------------------------------------------------------
    def resource_intent(
        self,
        run_id: str,
        *,
        kind: str,
        name: str,
        project: str,
        location: str,
        cluster: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> int:
        """Record a resource *before* asking the cloud to create it."""
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO resources (run_id, kind, name, project, location, cluster, state, "
                "created_at, updated_at, detail) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    kind,
                    name,
                    project,
                    location,
                    cluster,
                    ResourceState.CREATING.value,
                    now,
                    now,
                    json.dumps(detail or {}),
                ),
            )
            return int(cur.lastrowid or 0)

    def resource_state(self, resource_id: int, state: ResourceState, **detail: Any) -> None:
        with self._tx() as db:
            row = db.execute("SELECT detail FROM resources WHERE id = ?", (resource_id,)).fetchone()
            merged = {**json.loads(row[0] or "{}"), **detail} if row else detail
            db.execute(
                "UPDATE resources SET state = ?, updated_at = ?, detail = ? WHERE id = ?",
                (state.value, time.time(), json.dumps(merged), resource_id),
            )

    def hand_over(self, resource_id: int, run_id: str) -> None:
        """Make ``run_id`` the owner of a resource (its teardown deletes it)."""
        with self._tx() as db:
            db.execute(
                "UPDATE resources SET run_id = ?, updated_at = ? WHERE id = ?",
                (run_id, time.time(), resource_id),
            )

    def rename_resource(self, resource_id: int, name: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE resources SET name = ?, updated_at = ? WHERE id = ?",
                (name, time.time(), resource_id),
            )

    def resources(
        self, run_id: str | None = None, *, states: Sequence[ResourceState] | None = None
    ) -> list[Resource]:
        query = f"SELECT {_RESOURCE_COLUMNS} FROM resources WHERE 1=1"  # noqa: S608
        params: list[Any] = []
        if run_id is not None:
            query += " AND run_id = ?"
            params.append(run_id)
        if states is not None:
            query += f" AND state IN ({','.join('?' * len(states))})"
            params += [s.value for s in states]
        rows = self._db.execute(query + " ORDER BY id", params).fetchall()
        return [
            Resource(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                ResourceState(r[7]),
                json.loads(r[8] or "{}"),
            )
            for r in rows
        ]

    # ---- steps and metrics ------------------------------------------------------------------
    def record_steps(self, run_id: str, steps: Sequence[dict[str, Any]]) -> None:
        """Store step records (``step``, ``seconds``, ``tflops_device``, ``tokens_device``,
        ``total_weights``, ``loss``, anything else into ``extra``); a step seen again replaces
        the earlier record."""
        known = ("step", "seconds", "tflops_device", "tokens_device", "total_weights", "loss")
        with self._tx() as db:
            for rec in steps:
                extra = {k: v for k, v in rec.items() if k not in known}
                db.execute(
                    "INSERT OR REPLACE INTO steps VALUES (?,?,?,?,?,?,?,?)",
                    (run_id, *(rec.get(k) for k in known), json.dumps(extra)),
                )

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT step, seconds, tflops_device, tokens_device, total_weights, loss, extra "
            "FROM steps WHERE run_id = ? ORDER BY step",
            (run_id,),
        ).fetchall()
        keys = ("step", "seconds", "tflops_device", "tokens_device", "total_weights", "loss")
        return [{**dict(zip(keys, r[:6], strict=True)), **json.loads(r[6] or "{}")} for r in rows]

    def set_metrics(self, run_id: str, metrics: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET metrics_json = ?, updated_at = ? WHERE id = ?",
                (json.dumps(metrics), time.time(), run_id),
            )

    def metrics(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT metrics_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None

    # ---- capacity attempts -----------------------------------------------------------------
    def record_attempt(
        self,
        run_id: str,
        *,
        reservation: str,
        zone: str | None,
        status: str | None,
        free_hosts: int | None,
        needed_hosts: int,
        outcome: str,
        message: str = "",
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO capacity_attempts (run_id, at, reservation, zone, status, "
                "free_hosts, needed_hosts, outcome, message) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    time.time(),
                    reservation,
                    zone,
                    status,
                    free_hosts,
                    needed_hosts,
                    outcome,
                    message,
                ),
            )

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT reservation, zone, status, free_hosts, needed_hosts, outcome, message "
            "FROM capacity_attempts WHERE run_id = ? ORDER BY id",
            (run_id,),
        ).fetchall()
        keys = ("reservation", "zone", "status", "free_hosts", "needed_hosts", "outcome", "message")
        return [dict(zip(keys, r, strict=True)) for r in rows]


_RUN_COLUMNS = (
    "id, model, request, launcher, device_type, precision, status, pid, host, "
    "project, cluster, region, zone, created_at, finished_at, error, pools_before, mode"
)
_RESOURCE_COLUMNS = "id, run_id, kind, name, project, location, cluster, state, detail"


def _run_row(r: Sequence[Any]) -> RunRow:
    return RunRow(
        r[0],
        r[1],
        r[2],
        r[3],
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


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
