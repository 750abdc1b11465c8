"""Reading what is still readable from a damaged run store, into a store in memory.

``tpu-trainer gc`` works from this copy when ``PRAGMA quick_check`` fails: it can still find
and delete the cloud resources the readable rows name. The damaged file is only read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpu_trainer.store.db import RunStore

_TABLES = ("runs", "resources")
_MISSES_BEFORE_GIVING_UP = 500


@dataclass(frozen=True, slots=True)
class Salvaged:
    store: RunStore
    """An in-memory store holding the readable runs and resources."""
    runs: int
    resources: int
    unreadable: list[str]
    """Tables (or row ranges) that could not be read at all."""


def salvage(path: Path) -> Salvaged:
    """Copy the readable rows of ``runs`` and ``resources`` of the store at ``path``."""
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    copy = RunStore(Path(":memory:"))
    copy._db.execute("PRAGMA foreign_keys=OFF")
    counts: dict[str, int] = {}
    unreadable: list[str] = []
    try:
        for table in _TABLES:
            columns, rows, ok = _read_table(source, table)
            counts[table] = len(rows)
            if not ok:
                unreadable.append(table)
            _insert(copy, table, columns, rows)
    finally:
        source.close()
    return Salvaged(copy, counts["runs"], counts["resources"], unreadable)


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    try:
        return [str(r[1]) for r in db.execute(f"PRAGMA table_info({table})").fetchall()]
    except sqlite3.DatabaseError:
        return []


def _read_table(db: sqlite3.Connection, table: str) -> tuple[list[str], list[Sequence[Any]], bool]:
    """All rows at once when that works, else row by row (skipping the damaged ones)."""
    columns = _columns(db, table)
    if not columns:
        return [], [], False
    select = f"SELECT {', '.join(columns)} FROM {table}"  # noqa: S608 (names from the schema)
    try:
        return columns, db.execute(select).fetchall(), True
    except sqlite3.DatabaseError:
        pass
    rows: list[Sequence[Any]] = []
    misses, rowid = 0, 0
    while misses < _MISSES_BEFORE_GIVING_UP:
        rowid += 1
        try:
            row = db.execute(select + " WHERE rowid = ?", (rowid,)).fetchone()
        except sqlite3.DatabaseError:
            row = None
        if row is None:
            misses += 1
            continue
        misses = 0
        rows.append(row)
    return columns, rows, False


def _insert(store: RunStore, table: str, columns: list[str], rows: list[Sequence[Any]]) -> None:
    if not columns:
        return
    known = set(_columns(store._db, table))
    keep = [i for i, c in enumerate(columns) if c in known]
    names = ", ".join(columns[i] for i in keep)
    marks = ", ".join("?" * len(keep))
    insert = f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})"  # noqa: S608
    for row in rows:
        try:
            store._db.execute(insert, [row[i] for i in keep])
        except sqlite3.DatabaseError:
            continue
