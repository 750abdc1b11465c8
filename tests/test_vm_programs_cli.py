"""`tpu-trainer grpo` and `tpu-trainer hf`: Tunix and Transformers on a TPU VM (fake cloud)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_env
from tpu_trainer.fakecloud.state import read_state

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "tpu_vm"
TOKEN = "hf_cli_token_9d8c7b6a5f4e"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**cli_env(tmp_path), "HF_TOKEN": TOKEN}
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args, "--poll", "0.01"],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _check_run(tmp_path: Path, launcher_model: str) -> None:
    db_path = tmp_path / "store" / "runs.db"
    db = sqlite3.connect(db_path)
    model, status, launcher = db.execute("SELECT model, status, launcher FROM runs").fetchone()
    assert (model, status, launcher) == (launcher_model, "succeeded", "tpu-vm")
    assert db.execute("SELECT count(*) FROM steps").fetchone()[0] > 0
    db.close()
    assert read_state(tmp_path / "rehearsal" / "state.json")["tpu_vm"]["nodes"] == {}
    leaks = [
        p
        for p in (tmp_path / "store").rglob("*")
        if p.is_file() and TOKEN.encode() in p.read_bytes()
    ]
    assert leaks == []


def test_grpo_runs_seed_002_on_a_tpu_vm(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        "grpo",
        "--device-type",
        "v6e-16",
        "--profile",
        "small-batch",
        "--rehearse",
        str(SCENARIOS / "tunix_v6e16.yaml"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_run(tmp_path, "qwen3-1.7b")


def test_hf_runs_transformers_on_a_tpu_vm(tmp_path: Path) -> None:
    proc = _run(
        tmp_path,
        "hf",
        "--device-type",
        "v5litepod-8",
        "--rehearse",
        str(SCENARIOS / "hf_v5e8.yaml"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _check_run(tmp_path, "llama-3.2-1b")


def test_an_unknown_memory_profile_names_the_known_ones(tmp_path: Path) -> None:
    proc = _run(tmp_path, "grpo", "--profile", "tiny")
    assert proc.returncode == 2
    assert "no memory profile tiny" in proc.stderr
    assert "small-batch" in proc.stderr
