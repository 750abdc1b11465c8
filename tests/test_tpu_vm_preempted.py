"""A TPU VM taken back mid-run: the node reads PREEMPTED and MaxText's log stops with its
SIGTERM line. Without --auto-resume the run ends interrupted; with it the VM is deleted, made
again, and the same run_name restores the last durable checkpoint (fake cloud)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env
from tpu_trainer.fakecloud.state import read_state

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "tpu_vm" / "maxtext_preempted.yaml"
STEPS = ("--set", "steps=50", "--set", "checkpoint_period=10", "--set", "enable_checkpointing=true")


def _train(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    recipe = tmp_path / "recipes" / "tinyllama-8b" / "8k-bf16-v6e-2x4" / "xpk"
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], recipe)
    script = recipe / "run_recipe.sh"
    script.write_text(
        script.read_text().replace("--device-type=tpu7x-2x2x1", "--device-type=v6e-2x4")
    )
    argv = [sys.executable, "-m", "tpu_trainer", "train", str(recipe), "--backend", "tpu-vm"]
    return subprocess.run(
        [*argv, "--rehearse", str(SCENARIO), "--poll", "0.01", *STEPS, *extra],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _nothing_left(tmp_path: Path, db: sqlite3.Connection) -> None:
    assert read_state(tmp_path / "rehearsal" / "state.json")["tpu_vm"]["nodes"] == {}
    live = db.execute(
        "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting')"
    ).fetchall()
    assert live == []


def test_a_preempted_tpu_vm_is_made_again_and_the_run_resumes_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, "--auto-resume")  # bare: the default budget
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    run_id, status, error = db.execute("SELECT id, status, error FROM runs").fetchone()
    assert (status, error) == ("succeeded", None)
    segments = db.execute(
        "SELECT n, cause, last_step, durable_step, restored_step, wasted_steps FROM segments "
        "ORDER BY n"
    ).fetchall()
    assert segments == [(1, "preempted", 34, 30, None, None), (2, None, 49, 40, 30, 4)]
    calls = [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]
    creates = [c for c in calls if "tpu-vm create" in c]
    assert len(creates) == 2 and creates[0] == creates[1]  # the same VM, asked the same way
    assert any("tpu-vm describe" in c for c in calls)  # the cloud's word: PREEMPTED
    assert "TPU VM" in out and "is PREEMPTED" in out
    log = (tmp_path / "store" / "runs" / run_id / "worker0.log").read_text(encoding="utf-8")
    assert "completed step: 31," in log.split("restoring from this run's directory step 30")[1]
    assert "1 interruption(s) resumed: 4 step(s) redone" in out
    show = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "show", run_id, "--json"],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    whole = json.loads(show.stdout)
    shown = whole["segments"]
    assert [(g["ended"], g["wasted_steps"]) for g in shown] == [
        ("preempted", None),
        ("finished", 4),
    ]
    assert shown[1]["recovery_s"] is not None and shown[1]["recovery_s"] > 0
    _badput_measured(whole["timeline"])
    _nothing_left(tmp_path, db)


def _badput_measured(timeline: dict[str, Any]) -> None:
    """What the log and the segments measured: steps 31-34 (2.7 s each) were run twice, saves
    at steps 0, 10, 20, 30 and 40 blocked 0.18 s each (Orbax's records), the restore took
    4.21 s; no data-batch retry. Each bucket holds at most what was measured (a rehearsal's
    steps are scaled into its short training stage, so a bucket can be cut to fit)."""
    measured = timeline["log_measured"]
    assert measured["wasted_steps"] == pytest.approx(4 * 2.7)
    assert measured["checkpoint_save"] == pytest.approx(5 * 0.18)
    assert measured["checkpoint_restore"] == pytest.approx(4.21)
    assert measured["data_loading"] is None
    buckets = {name: b["seconds"] for name, b in timeline["badput"].items()}
    assert 0 < buckets["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"] <= 5 * 0.18 + 1e-3
    assert buckets["WASTED_PROGRESS_FROM_DISRUPTION"] <= 4 * 2.7 + 1e-3
    assert buckets["UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME"] <= 4.21 + 1e-3
    assert buckets["DATA_LOADING_SYNC"] == 0


def test_without_auto_resume_a_preempted_tpu_vm_run_ends_interrupted(tmp_path: Path) -> None:
    proc = _train(tmp_path)
    assert proc.returncode != 0
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    status, error = db.execute("SELECT status, error FROM runs").fetchone()
    assert status == "interrupted"
    assert error.startswith("interrupted at step 34 of 50 (preempted: ")
    assert "last durable checkpoint: step 30" in error
    assert db.execute("SELECT n, cause FROM segments").fetchall() == [(1, "preempted")]
    _nothing_left(tmp_path, db)


TRANSIENT = SCENARIO.parent / "transient_reset.yaml"


def test_a_transient_error_is_retried_on_its_own_budget_and_each_segment_says_why(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, "--rehearse", str(TRANSIENT), "--auto-resume", "0")
    assert proc.returncode != 0
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    status, error = db.execute("SELECT status, error FROM runs").fetchone()
    assert status == "failed" and "A TPU worker connection dropped" in error
    why = "transient error: A TPU worker connection dropped (transient)"
    # the default --max-error-retries 1: one retry on a VM made again, then the run fails
    assert db.execute("SELECT n, cause FROM segments ORDER BY n").fetchall() == [
        (1, why),
        (2, why),
    ]
    calls = [" ".join(c) for c in read_state(tmp_path / "rehearsal" / "state.json")["calls"]]
    assert len([c for c in calls if "tpu-vm create" in c]) == 2
    _nothing_left(tmp_path, db)
