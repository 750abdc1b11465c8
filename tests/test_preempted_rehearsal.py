"""A slice reclaimed mid-run: MaxText logs SIGTERM and exits 0, and the run is not a success."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env
from tpu_trainer.fakecloud.state import read_state

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"


def _train(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    recipe = tmp_path / "recipes" / "run"
    shutil.copytree(RECIPES_ROOT / RECIPES["tee-upload"], recipe)  # steps=30
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            "train",
            str(recipe),
            "--rehearse",
            str(SCENARIOS / "preempted.yaml"),
            "--poll",
            "0.05",
            "--wait-timeout",
            "120",
            *extra,
        ],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
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
    state = read_state(tmp_path / "rehearsal" / "state.json")
    assert sorted(state["node_pools"]) == ["default-pool"]
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
