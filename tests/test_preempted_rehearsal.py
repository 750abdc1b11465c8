"""A slice reclaimed mid-run: MaxText logs SIGTERM and exits 0, and the run is not a success;
with --auto-resume it comes back on the next reservation's capacity and finishes."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT, run_commands
from resume_checks import endings, live_resources, segments, store_db, the_run, tpu_trainer
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
    rehearse = ("--rehearse", str(SCENARIOS / scenario), "--poll", "0.05", "--wait-timeout", "120")
    return tpu_trainer(tmp_path, *command, *rehearse)


def test_a_run_that_exits_0_after_sigterm_at_step_20_of_30_ends_interrupted(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path)
    assert proc.returncode != 0, proc.stdout[-2000:]
    status, error = the_run(tmp_path, "status, error")
    assert status == "interrupted"
    assert error.startswith("interrupted at step 20 of 30 (preempted: ")
    assert "last durable checkpoint: step 10" in error
    assert "succeeded" not in proc.stdout
    readme = next((tmp_path / "store" / "runs").glob("*/README.md")).read_text(encoding="utf-8")
    assert "被中断" in readme  # the README row says so (Chinese report by default)
    _nothing_left(tmp_path)


def _nothing_left(tmp_path: Path) -> None:
    state = read_state(tmp_path / "rehearsal" / "state.json")
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["workloads"] == {}
    assert live_resources(store_db(tmp_path)) == []


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
    run_id, status, error, zone = the_run(tmp_path, "id, status, error, zone")
    assert (status, error, zone) == ("succeeded", None, "us-central1-b")
    assert segments(store_db(tmp_path), "n, zone, cause, last_step, durable_step") == [
        (1, "us-central1-c", "preempted", 30, 30),
        (2, "us-central1-b", None, 49, 40),
    ]
    with sqlite3.connect(store_db(tmp_path)) as db:
        attempts = db.execute("SELECT reservation, outcome FROM capacity_attempts ORDER BY id")
        tried = [tuple(a) for a in attempts]
    assert tried == [
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
    assert endings(tmp_path, run_id) == [("preempted", None, False), ("finished", 0, True)]
    _nothing_left(tmp_path)


def test_without_auto_resume_the_reclaimed_run_ends_interrupted_until_resumed(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, *RESUMED, scenario=RECLAIMED)
    assert proc.returncode != 0
    run_id, status, error = the_run(tmp_path, "id, status, error")
    assert status == "interrupted"
    assert error.startswith("interrupted at step 30 of 50 (preempted: ")
    assert "succeeded" not in proc.stdout
    assert segments(store_db(tmp_path), "n, cause") == [(1, "preempted")]
    _nothing_left(tmp_path)
    path = next((tmp_path / "store" / "runs").glob("*/README.md"))
    before = path.read_text(encoding="utf-8")
    assert "被中断" in before and before.count(f"run {run_id} -->") == 2  # its row and section
    # `resume RUN`: a new segment on the next reservation, where MaxText restores step 30
    again = _rehearse(tmp_path, RECLAIMED, "resume", run_id)
    assert again.returncode == 0, (again.stdout + again.stderr)[-4000:]
    assert the_run(tmp_path, "status, zone") == ("succeeded", "us-central1-b")
    assert segments(store_db(tmp_path)) == [
        (1, "preempted", 30, 30, None, None),
        (2, None, 49, 40, 30, 0),
    ]
    # the README's row and section are now the whole run's, in place of the interrupted ones
    after = path.read_text(encoding="utf-8")
    assert "already has this run" not in again.stdout
    assert after.count(f"run {run_id} -->") == 2 and "被中断" not in after
    assert "| 49 | " in after and "10.000 → 9.510" in after and "10.000 → 9.700" not in after
    assert "1 interruption(s) resumed" in after
    _nothing_left(tmp_path)


def test_a_transient_error_on_gke_is_retried_on_its_own_budget_on_new_capacity(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, "--auto-resume", "3", scenario="transient_reset.yaml")
    assert proc.returncode != 0
    status, error = the_run(tmp_path, "status, error")
    assert status == "failed" and "A TPU worker connection dropped" in error
    why = "transient error: A TPU worker connection dropped (transient)"
    # the default --max-error-retries 1, whatever the preemption budget: one retry, then it fails
    assert segments(store_db(tmp_path), "n, cause") == [(1, why), (2, why)]
    creates = [c for c in run_commands(tmp_path) if c[0] == "bash"]  # xpk workload create
    assert len(creates) == 2
    _nothing_left(tmp_path)
