"""The embedded default: real MaxText on this machine's CPU, through the whole pipeline."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from conftest import CONFIG, RECIPES, plan_for
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.infra.tool_env import cache_dir
from tpu_trainer.launchers.local.run import base_config, local_args
from tpu_trainer.plan.plan import PlanOptions

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "local" / "tiny-llama"


def _example_and_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of the example, and an environment with its own store and the shared runtime."""
    example = tmp_path / "local" / "tiny-llama"
    shutil.copytree(EXAMPLE, example)
    env = {
        **os.environ,
        "TPU_TRAINER_HOME": str(tmp_path / "store"),
        "TPU_TRAINER_CACHE": str(cache_dir()),
        "TPU_TRAINER_CONFIG": "",
        "COLUMNS": "200",
    }
    return example, env


@pytest.mark.unit
def test_local_args_replace_what_only_makes_sense_on_tpus(tmp_path: Path) -> None:
    plan = plan_for(RECIPES["classic"])
    args = local_args(plan, tmp_path, "abcd1234")
    assert "model_name=llama3.1-8b" in args
    assert not any(a.startswith(("profiler=", "profiler_steps=")) for a in args)
    assert args[-4:] == [
        "run_name=tpt-abcd1234",
        f"base_output_directory={tmp_path / 'output'}",
        "hardware=cpu",
        "skip_jax_distributed_system=true",
    ]
    assert [a for a in args if a.startswith("run_name=")] == ["run_name=tpt-abcd1234"]


@pytest.mark.unit
def test_a_run_id_that_looks_like_a_number_stays_a_name(tmp_path: Path) -> None:
    # MaxText types command-line values like YAML: a bare 662482e3 would be 662482000.0.
    from tpu_trainer.checks.pyconfig import cli_value as parse_value

    assert parse_value("662482e3") == 662482000.0
    args = local_args(plan_for(RECIPES["classic"]), tmp_path, "662482e3")
    name = next(a for a in args if a.startswith("run_name=")).partition("=")[2]
    assert parse_value(name) == "tpt-662482e3"


@pytest.mark.unit
def test_base_config_is_found_inside_the_installed_package(tmp_path: Path) -> None:
    assert base_config(tmp_path, "maxtext/configs/base.yml") == tmp_path / "configs" / "base.yml"
    assert (
        base_config(tmp_path, "MaxText/configs/models/x.yml") == tmp_path / "configs/models/x.yml"
    )


@pytest.mark.unit
def test_the_example_is_a_cpu_recipe_without_cloud_warnings() -> None:
    plan = plan_request(
        Request(str(EXAMPLE), config_path=CONFIG),
        PlanOptions(user="t", now=datetime(2026, 11, 22), profiler=None),
    )
    assert plan.slice.device_type == "cpu-1"
    assert [f for f in plan.findings if f.status.value != "pass"] == []


@pytest.mark.runtime
def test_train_the_example_with_real_maxtext_leaves_a_report(tmp_path: Path) -> None:
    example, env = _example_and_env(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "train", str(example)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    run_id = proc.stdout.split()[1].rstrip(":")
    assert f"run {run_id}: succeeded" in proc.stdout
    assert "step 19:" in proc.stderr
    shown = json.loads(
        subprocess.run(
            [sys.executable, "-m", "tpu_trainer", "show", run_id, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )
    assert len(shown["steps"]) == 20
    # steps 0 and 1 (compile, warm-up) never count; later ones may drop out as outliers
    assert shown["steady_steps"]
    assert min(shown["steady_steps"]) >= 2
    assert shown["loss_last"] < shown["loss_first"]
    readme = (example / "README.md").read_text()
    assert f"<!-- tpu-trainer run {run_id} -->" in readme
    tokens = f"{shown['tokens_per_chip']:.1f}"
    assert tokens in readme  # the report's numbers are this run's
    assert "| MaxText |" in readme or "MaxText 0.2.5" in readme
    assert len(list(example.glob(f"tiny-llama-{run_id}-*.png"))) == 3


@pytest.mark.runtime
def test_real_maxtext_with_checkpoints_fills_the_tpu_init_and_checkpoint_save_buckets(
    tmp_path: Path,
) -> None:
    example, env = _example_and_env(tmp_path)
    ckpt = ("--set", "enable_checkpointing=true", "--set", "async_checkpointing=true")
    argv = [sys.executable, "-m", "tpu_trainer", "train", str(example), *ckpt]
    proc = subprocess.run(
        [*argv, "--set", "checkpoint_period=5"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    run_id = proc.stdout.split()[1].rstrip(":")
    shown = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "show", run_id, "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    timeline = json.loads(shown.stdout)["timeline"]
    measured, buckets = timeline["log_measured"], timeline["badput"]
    # MaxText's mesh line to its checkpoint-manager line; Orbax's records of the saves at
    # steps 0, 5, 10, 15 and the last, 19; no restore (a new run), no data retry, nothing redone
    assert measured["tpu_initialization"] > 0 and measured["checkpoint_save"] > 0
    assert measured["checkpoint_restore"] is None and measured["data_loading"] is None
    assert measured["wasted_steps"] is None
    assert buckets["TPU_INITIALIZATION"]["seconds"] == pytest.approx(
        measured["tpu_initialization"], abs=1e-3
    )
    assert (
        0
        < buckets["UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"]["seconds"]
        <= measured["checkpoint_save"] + 1e-3
    )
    for bucket in ("UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME", "DATA_LOADING_SYNC"):
        assert buckets[bucket]["seconds"] == 0
    log = (tmp_path / "store" / "runs" / run_id / "worker0.log").read_text(encoding="utf-8")
    assert log.count("'event_type': 'save'") == 5


@pytest.mark.runtime
def test_ctrl_c_stops_maxtext_and_records_the_run_as_cancelled(tmp_path: Path) -> None:
    import signal
    import sqlite3
    import time

    example, env = _example_and_env(tmp_path)
    proc = subprocess.Popen(
        # Many steps: the Ctrl-C after step 2 must land while MaxText still trains.
        [sys.executable, "-m", "tpu_trainer", "train", str(example), "--set", "steps=2000"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a shell that started the tests in the background hands its
        # children an ignored SIGINT, and Python keeps it ignored.
        preexec_fn=_default_sigint,  # noqa: PLW1509 (one signal call, no locks)
    )
    log = tmp_path / "store" / "runs"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        logs = list(log.glob("*/worker0.log")) if log.exists() else []
        if logs and "completed step: 2," in logs[0].read_text():
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=120)
    assert proc.returncode != 0
    status = (
        sqlite3.connect(tmp_path / "store" / "runs.db")
        .execute("SELECT status FROM runs")
        .fetchone()[0]
    )
    assert status == "cancelled"
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert str(tmp_path / "store" / "runs") not in ps  # no MaxText of this run left running


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
