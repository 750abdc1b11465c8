"""A slice reclaimed mid-run: MaxText logs SIGTERM and exits 0, and the run is not a success;
with --auto-resume it comes back on the next reservation's capacity and finishes."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env, run_commands
from tpu_trainer.fakecloud.state import read_state

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"


def _train(
    tmp_path: Path, *extra: str, scenario: str = "preempted.yaml"
) -> subprocess.CompletedProcess[str]:
    recipe = tmp_path / "recipes" / "run"
    shutil.copytree(RECIPES_ROOT / RECIPES["tee-upload"], recipe)  # steps=30
    return _rehearse(tmp_path, scenario, "train", str(recipe), *extra)


def _rehearse(tmp_path: Path, scenario: str, *command: str) -> subprocess.CompletedProcess[str]:
    """``tpu-trainer COMMAND ... --rehearse SCENARIO`` with quick polls."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            *command,
            "--rehearse",
            str(SCENARIOS / scenario),
            "--poll",
            "0.05",
            "--wait-timeout",
            "120",
        ],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_a_run_that_exits_0_after_sigterm_at_step_20_of_30_ends_interrupted(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path)
    assert proc.returncode != 0, proc.stdout[-2000:]
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    status, error = db.execute("SELECT status, error FROM runs").fetchone()
    assert status == "interrupted"
    assert error.startswith("interrupted at step 20 of 30 (preempted: ")
    assert "last durable checkpoint: step 10" in error
    assert "succeeded" not in proc.stdout
    readme = next((tmp_path / "store" / "runs").glob("*/README.md")).read_text(encoding="utf-8")
    assert "被中断" in readme  # the README row says so (Chinese report by default)
    _nothing_left(tmp_path, db)


def _nothing_left(tmp_path: Path, db: sqlite3.Connection) -> None:
    state = read_state(tmp_path / "rehearsal" / "state.json")
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["workloads"] == {}
    live = db.execute(
        "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting')"
    ).fetchall()
    assert live == []


def test_a_run_without_checkpoints_is_warned_before_capacity_is_asked(tmp_path: Path) -> None:
    proc = _train(tmp_path, "--set", "enable_checkpointing=false")
    out = proc.stdout + proc.stderr
    warned = out.find("checkpointing is off")
    assert warned >= 0, out[-3000:]
    assert warned < out.find("[provision]")


RECLAIMED = "preempted_resume.yaml"
RESUMED = ("--set", "steps=50", "--set", "checkpoint_period=10")


def test_a_reclaimed_slice_resumes_on_the_next_reservation_and_finishes(tmp_path: Path) -> None:
    proc = _train(tmp_path, *RESUMED, "--auto-resume", "2", scenario=RECLAIMED)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    run_id, status, error, zone = db.execute("SELECT id, status, error, zone FROM runs").fetchone()
    assert (status, error, zone) == ("succeeded", None, "us-central1-b")
    segments = db.execute(
        "SELECT n, zone, cause, last_step, durable_step, restored_step, wasted_steps, "
        "recovery_s FROM segments ORDER BY n"
    ).fetchall()
    assert [s[:7] for s in segments] == [
        (1, "us-central1-c", "preempted", 30, 30, None, None),
        (2, "us-central1-b", None, 49, 40, 30, 0),
    ]
    assert segments[1][7] is not None and segments[1][7] > 0  # the recovery time
    attempts = db.execute("SELECT reservation, outcome FROM capacity_attempts ORDER BY id")
    assert [tuple(a) for a in attempts] == [
        ("res-first", "created"),
        ("res-first", "exhausted"),
        ("res-next", "created"),
    ]
    creates = [c for c in run_commands(tmp_path) if c[0] == "bash"]  # xpk workload create
    names = [r[0] for r in db.execute("SELECT name FROM resources WHERE kind = 'workload'")]
    assert len(creates) == 2 and len(names) == 2 and len(set(names)) == 1  # MaxText restores
    log = next((tmp_path / "store" / "runs").glob("*/worker0.log")).read_text(encoding="utf-8")
    assert "restoring from this run's directory step 30" in log
    assert "completed step: 31," in log.split("restoring from this run's directory")[1]
    said = "1 interruption(s) resumed: 0 step(s) redone"
    assert said in proc.stdout + proc.stderr
    readme = next((tmp_path / "store" / "runs").glob("*/README.md")).read_text(encoding="utf-8")
    assert said in readme  # the README row's note
    show = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "show", run_id, "--json"],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown = json.loads(show.stdout)["segments"]
    assert [(g["ended"], g["wasted_steps"]) for g in shown] == [
        ("preempted", None),
        ("finished", 0),
    ]
    _nothing_left(tmp_path, db)


def test_without_auto_resume_the_reclaimed_run_ends_interrupted_until_resumed(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, *RESUMED, scenario=RECLAIMED)
    assert proc.returncode != 0
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    run_id, status, error = db.execute("SELECT id, status, error FROM runs").fetchone()
    assert status == "interrupted"
    assert error.startswith("interrupted at step 30 of 50 (preempted: ")
    assert "succeeded" not in proc.stdout
    (cause,) = db.execute("SELECT cause FROM segments").fetchone()
    assert cause == "preempted"
    _nothing_left(tmp_path, db)
    # `resume RUN`: a new segment on the next reservation, where MaxText restores step 30
    again = _rehearse(tmp_path, RECLAIMED, "resume", run_id)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert db.execute("SELECT status, zone FROM runs").fetchone() == ("succeeded", "us-central1-b")
    segments = db.execute("SELECT n, cause, restored_step, last_step FROM segments ORDER BY n")
    assert segments.fetchall() == [(1, "preempted", None, 30), (2, None, 30, 49)]
    _nothing_left(tmp_path, db)
