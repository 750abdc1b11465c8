"""`train --backend tpu-vm`: a MaxText recipe on a TPU VM made for the run (fake cloud)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from conftest import RECIPES, RECIPES_ROOT, cli_env
from tpu_trainer.fakecloud.state import read_state

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
    proc = _train(tmp_path, _v6e_recipe(tmp_path))
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
