"""The run store's file: where it lives, opening it (SQLite, WAL), its schema, soundness
checks, and one write transaction at a time.

The tables are read and written by :mod:`~tpu_trainer.store.runs` (runs, stages, commands),
:mod:`~tpu_trainer.store.resources` (cloud resources, capacity attempts) and
:mod:`~tpu_trainer.store.steps` (per-step metrics, a run's figures); :class:`~tpu_trainer.store.db.RunStore`
is all of them on one file.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.store.damage import StoreDamagedError, recovery_fix
from tpu_trainer.store.migrations import MIGRATIONS


class RunMode(StrEnum):
    REAL = "real"
    REHEARSAL = "rehearsal"
    """On the fake cloud (``--rehearse``): its numbers are not a measurement."""


def default_path(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("TPU_TRAINER_HOME"):
        return Path(env["TPU_TRAINER_HOME"]).expanduser() / "runs.db"
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "tpu-trainer" / "runs.db"


def locks_dir(store_path: Path) -> Path:
    """Where locks are taken for the store at ``store_path``: its folder's ``locks/``, never
    the recipes tree."""
    return store_path.parent / "locks"


class StoreFile:
    """The store's SQLite file: opened (WAL), migrated to the current schema, checked, and
    written one transaction at a time."""

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


def _statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
