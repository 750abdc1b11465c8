"""What the resume tests read back from a run: the tool run as a user runs it, the run's
segments (from the store and from ``show --json``), and what it still holds."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import cli_env

SEGMENT = "n, cause, last_step, durable_step, restored_step, wasted_steps"
"""The columns :func:`segments` reads, in order."""


def tpu_trainer(
    tmp_path: Path, *args: str, timeout: float = 600, check: bool = False
) -> subprocess.CompletedProcess[str]:
    """``tpu-trainer ARGS...`` in the test's own home, store and rehearsal folder."""
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )


def store_db(tmp_path: Path) -> Path:
    """The run store the CLI of a test writes."""
    return tmp_path / "store" / "runs.db"


def segments(db: Path, columns: str = SEGMENT) -> list[tuple[Any, ...]]:
    """The segments of the store's runs, in order (``columns`` of each)."""
    with sqlite3.connect(db) as conn:
        return conn.execute(f"SELECT {columns} FROM segments ORDER BY run_id, n").fetchall()  # noqa: S608 (the tests' own column names)


def the_run(tmp_path: Path, columns: str) -> tuple[Any, ...]:
    """``columns`` of the one run a test's CLI stored."""
    with sqlite3.connect(store_db(tmp_path)) as conn:
        (row,) = conn.execute(f"SELECT {columns} FROM runs").fetchall()  # noqa: S608 (the tests' own column names)
    return tuple(row)


def live_resources(db: Path) -> list[tuple[str, str]]:
    """What the store's runs still hold (created, or being created or deleted)."""
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting')"
        ).fetchall()


def shown_run(tmp_path: Path, run_id: str) -> dict[str, Any]:
    """The run as ``tpu-trainer show RUN --json`` gives it."""
    shown = tpu_trainer(tmp_path, "show", run_id, "--json", timeout=60, check=True)
    found: dict[str, Any] = json.loads(shown.stdout)
    return found


def shown_segments(tmp_path: Path, run_id: str) -> list[dict[str, Any]]:
    """The run's segments as ``tpu-trainer show RUN --json`` gives them."""
    found: list[dict[str, Any]] = shown_run(tmp_path, run_id)["segments"]
    return found


def endings(tmp_path: Path, run_id: str) -> list[tuple[str, int | None, bool]]:
    """Each segment ``show --json`` gives: its ending, the steps it redid, and whether it has a
    recovery time above 0 (the time from the interruption before it to its first step)."""
    return [
        (g["ended"], g["wasted_steps"], (g["recovery_s"] or 0) > 0)
        for g in shown_segments(tmp_path, run_id)
    ]
