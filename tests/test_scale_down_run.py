"""Scale-down, for real: TPU recipes (a dense and a mixture-of-experts one, in the tpu-recipes
layout) trained shrunk with real MaxText on this machine's CPU, through the whole pipeline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import TESTS
from tpu_trainer.infra.tool_env import cache_dir
from tpu_trainer.store.db import RunStore

pytestmark = pytest.mark.runtime

IRONWOOD = TESTS / "fixtures" / "scale_down" / "training" / "ironwood"


def _tool(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )


def _train_scaled(tmp_path: Path, model: str, folder: str) -> tuple[str, dict[str, Any], Path]:
    """Copy the fixture model folder, train its recipe scaled down; (run id, show, model dir)."""
    model_dir = tmp_path / "ironwood" / model
    shutil.copytree(IRONWOOD / model, model_dir)
    env = {
        **os.environ,
        "TPU_TRAINER_HOME": str(tmp_path / "store"),
        "TPU_TRAINER_CACHE": str(cache_dir()),
        "TPU_TRAINER_CONFIG": "",
        "COLUMNS": "200",
    }
    proc = _tool(env, "train", str(model_dir / folder), "--backend", "local", "--scale-down")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    run_id = proc.stdout.split()[1].rstrip(":")
    assert f"run {run_id}: succeeded" in proc.stdout
    assert "scaled down from tpu7x-" in proc.stderr
    assert "attention: flash → dot_product" in proc.stderr  # the changes are shown
    assert "step 9:" in proc.stderr
    shown = json.loads(_tool(env, "show", run_id, "--json").stdout)
    return run_id, shown, model_dir


def _stored_scale_down(tmp_path: Path, run_id: str) -> dict[str, Any]:
    store = RunStore(tmp_path / "store" / "runs.db")
    plan = store.plan_of(run_id)
    assert plan is not None
    scale: dict[str, Any] = plan["scale_down"]
    return scale


def _assert_recorded(shown: dict[str, Any], model: str, model_dir: Path, run_id: str) -> None:
    assert shown["status"] == "succeeded"
    assert shown["model"] == model  # the model is the recipe's
    assert shown["device_type"] == "cpu-1"  # where it ran
    assert [s["step"] for s in shown["steps"]] == list(range(10))
    assert shown["steady_steps"] and min(shown["steady_steps"]) >= 2
    assert [s["name"] for s in shown["stages"]][:3] == ["scale-down", "runtime", "train"]
    readme = (model_dir / "README.md").read_text()
    assert f"<!-- tpu-trainer run {run_id} -->" in readme
    assert "scale-down of tpu7x-" in readme
    assert f"{shown['tokens_per_chip']:.1f}" in readme  # the report's numbers are this run's


@pytest.mark.parametrize(
    ("model", "folder", "expect"),
    [
        (
            "llama3.1-70b",
            "8k-bf16-tpu7x-4x4x4",
            {"base_num_query_heads": "8", "base_num_kv_heads": "1", "ici_data_parallelism": "1"},
        ),
        (
            "deepseek3-671b",
            "4k-bf16-tpu7x-4x4x8",
            {"num_experts": "4", "first_num_dense_layers": "1", "use_tokamax_gmm": "false"},
        ),
    ],
)
def test_a_tpu_recipe_trains_scaled_down_on_this_cpu(
    tmp_path: Path, model: str, folder: str, expect: dict[str, str]
) -> None:
    run_id, shown, model_dir = _train_scaled(tmp_path, model, folder)
    _assert_recorded(shown, model, model_dir, run_id)
    scale = _stored_scale_down(tmp_path, run_id)
    assert scale["from_device_type"] == folder.split("-", 2)[2]
    args = dict(a.partition("=")[::2] for a in scale["args"])
    for key, value in expect.items():
        assert args[key] == value, key
    assert all(c["why"] for c in scale["changes"])
    log = (tmp_path / "store" / "runs" / run_id / "worker0.log").read_text()
    assert "override_model_config" in log and "completed step: 9," in log
