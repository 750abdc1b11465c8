"""`train --backend tpu-vm`: a MaxText recipe on a TPU VM made for the run (fake cloud)."""

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

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "tpu_vm"


def _v6e_recipe(tmp_path: Path) -> Path:
    target = tmp_path / "recipes" / "tinyllama-8b" / "8k-bf16-v6e-2x4" / "xpk"
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], target)
    script = target / "run_recipe.sh"
    script.write_text(
        script.read_text().replace("--device-type=tpu7x-2x2x1", "--device-type=v6e-2x4")
    )
    return target


def _train(tmp_path: Path, recipe: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            "train",
            str(recipe),
            "--backend",
            "tpu-vm",
            "--rehearse",
            str(SCENARIOS / "maxtext_v6e8.yaml"),
            "--poll",
            "0.01",
            *extra,
        ],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_a_recipe_trains_on_a_tpu_vm_and_the_vm_is_deleted(tmp_path: Path) -> None:
    # the scenario's log reaches step 4: a run that asks for 5 steps finished (one that asks
    # for the recipe's 20 ended interrupted, see test_tpu_vm_preempted.py)
    proc = _train(tmp_path, _v6e_recipe(tmp_path), "--set", "steps=5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "succeeded" in proc.stdout
    state = read_state(tmp_path / "rehearsal" / "state.json")
    calls = [" ".join(c) for c in state["calls"]]
    assert any("tpu-vm create" in c for c in calls), calls
    assert any("tpu-vm delete" in c for c in calls), calls
    assert state["tpu_vm"]["nodes"] == {}
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    launcher, status, device = db.execute(
        "SELECT launcher, status, device_type FROM runs"
    ).fetchone()
    assert (launcher, status, device) == ("tpu-vm", "succeeded", "v6e-2x4")
    assert db.execute("SELECT count(*) FROM steps").fetchone()[0] > 0


def test_tpu_v7_has_no_tpu_vm_runtime(tmp_path: Path) -> None:
    recipe = tmp_path / "recipes" / RECIPES["classic"]
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], recipe)
    proc = _train(tmp_path, recipe)
    assert proc.returncode != 0
    assert "TPU v7 (Ironwood) is not offered as a TPU VM" in proc.stderr
    assert "next: run it on GKE" in proc.stderr


def test_a_killed_tpu_vm_run_is_cleaned_up_by_cleanup(tmp_path: Path) -> None:
    import signal
    import time

    recipe = _v6e_recipe(tmp_path)
    env = cli_env(tmp_path)
    scenario = str(SCENARIOS / "hang.yaml")
    argv = [sys.executable, "-m", "tpu_trainer", "train", str(recipe), "--backend", "tpu-vm"]
    proc = subprocess.Popen(
        [*argv, "--rehearse", scenario, "--poll", "0.01"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    db_path = tmp_path / "store" / "runs.db"
    deadline = time.monotonic() + 120
    run_id = None
    while time.monotonic() < deadline and run_id is None:
        time.sleep(0.2)
        if db_path.exists():
            try:
                row = (
                    sqlite3.connect(db_path)
                    .execute(
                        "SELECT r.id FROM runs r JOIN stages s ON s.run_id = r.id "
                        "WHERE s.name = 'train' AND s.status = 'running'"
                    )
                    .fetchone()
                )
            except sqlite3.OperationalError:  # the store is still being created
                continue
            run_id = row[0] if row else None
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert run_id is not None, "the run never reached its training stage"
    state = read_state(tmp_path / "rehearsal" / "state.json")
    assert state["tpu_vm"]["nodes"], "the VM should still be there after SIGKILL"
    cleanup = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "cleanup", run_id, "--rehearse", scenario],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cleanup.returncode == 0, cleanup.stdout + cleanup.stderr
    assert "deleted 1" in cleanup.stdout
    assert read_state(tmp_path / "rehearsal" / "state.json")["tpu_vm"]["nodes"] == {}


def test_kuberay_needs_an_image(tmp_path: Path) -> None:
    recipe = _v6e_recipe(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "train", str(recipe), "--backend", "kuberay"],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "--backend kuberay needs --ray-image" in proc.stderr
    assert "next: add --ray-image IMAGE" in proc.stderr
