"""A full rehearsed run leaves a README section, plots and a stored run; two runs compare."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import RECIPES, RECIPES_ROOT, cli_env

pytestmark = pytest.mark.e2e

RECIPE = RECIPES["tee-upload"]  # mixtral-moe, 4k-fp8-tpu7x-4x4x4


STEPS = ("--set", "steps=10")  # the scenario logs below reach step 9, the run's last step


def _log(step_seconds: float, tflops: float, steps: int = 10) -> str:
    lines = ["I1122 04:27:31.120000 139872 max_utils.py:273] Num_devices: 128"]
    for n in range(steps):
        seconds = 120.0 if n == 0 else step_seconds
        tokens = 4096 * 4 / seconds
        loss = 10.9 - 0.5 * n
        lines.append(
            f"I1122 04:{29 + n // 60:02d}:{n % 60:02d}.380500 139872 metric_logger.py:265] "
            f"completed step: {n}, seconds: {seconds:.3f}, TFLOP/s/device: "
            f"{(tflops if n else tflops / 40):.3f}, Tokens/s/device: {tokens:.3f}, "
            f"total_weights: {(4096 * 4 * 128)}, loss: {loss:.3f}, lm_loss: {loss:.3f}, "
            f"perplexity: 100.0"
        )
    return "\n".join(lines) + "\n"


def _scenario(tmp_path: Path, name: str, log: str) -> Path:
    data: dict[str, Any] = {
        "project": "demo-project",
        "region": "us-central1",
        "cluster": {"name": "demo-cluster"},
        "node_pools": [
            {
                "name": "default-pool",
                "machine_type": "e2-standard-8",
                "node_count": 3,
                "zone": "us-central1-ai1a",
            }
        ],
        "reservations": [{"name": "res-a", "zone": "us-central1-ai1a", "host_count": 32}],
        "workloads": {"log": log},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path)


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _run_id(stdout: str) -> str:
    return next(
        line.split()[1].rstrip(":") for line in stdout.splitlines() if line.startswith("run ")
    )


def test_two_rehearsed_runs_report_and_compare(tmp_path: Path) -> None:
    env = _env(tmp_path)
    fp8 = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, fp8)
    bf16 = fp8.parent / "4k-bf16-tpu7x-4x4x4"
    shutil.copytree(fp8, bf16)
    script = bf16 / "run_recipe.sh"
    fp8_only = ("quantization=", "use_qwix_quantization=", "_calibration_method=")
    script.write_text(
        "".join(
            line
            for line in script.read_text().splitlines(keepends=True)
            if not any(key in line for key in fp8_only)
        )
    )
    model_dir = fp8.parent
    readme = model_dir / "README.md"
    readme.write_text("# mixtral-moe 训练测试记录\n\nNotes written by hand stay here.\n")

    first = _cli(
        env,
        "train",
        str(fp8),
        "--rehearse",
        str(_scenario(tmp_path, "fp8", _log(2.2, 730.0))),
        *STEPS,
        "--poll",
        "0.05",
        "--report-to-recipe",
    )
    assert first.returncode == 0, first.stderr[-3000:]
    second = _cli(
        env,
        "train",
        str(bf16),
        "--rehearse",
        str(_scenario(tmp_path, "bf16", _log(2.75, 600.0))),
        *STEPS,
        "--poll",
        "0.05",
    )
    assert second.returncode == 0, second.stderr[-3000:]
    a, b = _run_id(first.stdout), _run_id(second.stdout)
    # the pace comes from the step times in the log, not from how fast its lines arrive
    assert "step 9: 2.20 s, loss 6.400, 0.45 steps/s" in first.stderr
    assert "pods ready" in first.stderr
    assert "reservations from the scenario, in its order: res-a" in first.stderr

    # asked (--report-to-recipe): the rehearsal is in the model's README, marked as one
    text = readme.read_text()
    assert text.startswith("# mixtral-moe 训练测试记录\n\nNotes written by hand stay here.\n")
    (row,) = [line for line in text.splitlines() if line.startswith("|") and f"run {a} " in line]
    assert "**演练（假云，非实测）**" in row
    assert "| 730.0 | 1460.0 |" in text  # TFLOP/s per device, and x 2 per chip on TPU v7
    assert len(list(model_dir.glob(f"mixtral-moe-{a}-*.png"))) == 3
    # not asked: the rehearsal's report stays beside the run store
    assert f"tpu-trainer run {b}" not in text
    assert not list(model_dir.glob(f"*{b}*"))
    beside = tmp_path / "store" / "runs" / b / "README.md"
    assert f"<!-- tpu-trainer run {b} -->" in beside.read_text()
    assert len(list(beside.parent.glob(f"mixtral-moe-{b}-*.png"))) == 3
    assert not list(tmp_path.joinpath("recipes").rglob("*.lock"))

    shown = json.loads(_cli(env, "show", a, "--json").stdout)
    assert shown["precision"] == "fp8"
    assert shown["mode"] == "rehearsal"
    assert "a rehearsal on the fake cloud" in _cli(env, "show", a).stdout
    assert shown["steady_steps"] == [2, 3, 4, 8, 9]  # step 0-1 warm-up, 5-7 profiler window
    assert abs(shown["tflops_per_chip"] - 1460.0) < 1e-6
    assert len(shown["steps"]) == 10

    compared = json.loads(_cli(env, "compare", a, b, "--json").stdout)
    assert abs(compared["step_time_ratio"] - 2.2 / 2.75) < 1e-6
    assert abs(compared["speedup_percent"] - 25.0) < 1e-6
    human = _cli(env, "compare", a, b).stdout
    assert "25.000 % faster" in human

    again = _cli(env, "report", a, "--to-recipe")
    assert again.returncode == 0
    assert "already has this run" in again.stdout
    assert readme.read_text() == text

    exported = _cli(env, "export", "--format", "csv").stdout.splitlines()
    assert exported[0].startswith("id,model,device_type")
    assert len(exported) == 3
    mode_column = exported[0].split(",").index("mode")
    assert [line.split(",")[mode_column] for line in exported[1:]] == ["rehearsal"] * 2
    as_json = json.loads(_cli(env, "export", "--format", "json").stdout)
    assert {r["mode"] for r in as_json} == {"rehearsal"}
    listed = _cli(env, "runs")
    assert listed.stdout.count("rehearsal") == 2


def test_resume_follows_a_crashed_run_to_the_end(tmp_path: Path) -> None:
    import signal
    import sqlite3
    import time

    env = _env(tmp_path)
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    data = yaml.safe_load(_scenario(tmp_path, "s", _log(2.2, 730.0)).read_text())
    data["workloads"]["pending_polls"] = 25
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(yaml.safe_dump(data))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            "train",
            str(recipe),
            "--rehearse",
            str(scenario),
            *STEPS,
            "--poll",
            "0.05",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    db = tmp_path / "store" / "runs.db"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if db.exists():
            try:
                if (
                    sqlite3.connect(db)
                    .execute("SELECT 1 FROM stages WHERE name='follow'")
                    .fetchone()
                ):
                    break
            except sqlite3.OperationalError:
                pass
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    run_id = sqlite3.connect(db).execute("SELECT id FROM runs").fetchone()[0]

    resumed = _cli(env, "resume", run_id, "--rehearse", str(scenario), "--poll", "0.05")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"run {run_id}: succeeded" in resumed.stdout
    beside = tmp_path / "store" / "runs" / run_id / "README.md"
    assert f"<!-- tpu-trainer run {run_id} -->" in beside.read_text()
    assert not (recipe.parent / "README.md").exists()
    shown = json.loads(_cli(env, "show", run_id, "--json").stdout)
    assert shown["status"] == "succeeded"
    assert {r["state"] for r in shown["resources"]} <= {"deleted", "absent"}
    # the segment the killed process started is the one followed again, and it ended
    assert [(g["n"], g["ended"]) for g in shown["segments"]] == [(1, "finished")]
    again = _cli(env, "resume", run_id, "--rehearse", str(scenario))
    assert again.returncode == 2
    assert "nothing to follow" in again.stderr


def test_a_rehearsed_run_that_ran_out_of_memory_is_marked_failed(tmp_path: Path) -> None:
    env = _env(tmp_path)
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    oom = "E1122 04:30:01.000000 139872 pjit.py:1] Ran out of memory in memory space hbm. "
    log = _log(2.2, 730.0, steps=4) + oom + "Used 120.5G of 95.74G hbm.\n"
    scenario = _scenario(tmp_path, "oom", log)
    data = yaml.safe_load(scenario.read_text())
    data["workloads"]["exit_code"] = 1
    scenario.write_text(yaml.safe_dump(data))
    proc = _cli(
        env,
        "train",
        str(recipe),
        "--rehearse",
        str(scenario),
        "--poll",
        "0.05",
        "--report-to-recipe",
        "--lang",
        "en",
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    run_id = _run_id(proc.stdout)
    assert f"run {run_id}: failed" in proc.stdout
    text = (recipe.parent / "README.md").read_text()
    (row,) = [line for line in text.splitlines() if line.startswith("|") and run_id in line]
    assert "**FAILED · REHEARSAL (fake cloud, not a measurement)**" in row
    assert "— FAILED · REHEARSAL (fake cloud, not a measurement)" in text
    beside = tmp_path / "store" / "runs" / run_id / "README.md"
    assert "**FAILED · REHEARSAL" in beside.read_text()
