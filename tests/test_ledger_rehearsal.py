"""A rehearsed GKE run's ledger: phases with chip-hours and cost in `show --json` (priced by a
test table given through the configuration), the same in `export`, the Gantt chart beside the
run, and `runs` with a cost column."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
RECIPE = RECIPES["tee-upload"]  # tpu7x-4x4x4: 64 chips


def _tool(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def test_a_rehearsed_run_shows_its_phases_chip_hours_and_cost(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    args = ("--poll", "0.05", "--wait-timeout", "120")
    rehearse = ("--rehearse", str(SCENARIOS / "failover.yaml"))
    proc = _tool(env, "train", str(recipe), *rehearse, *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id = json.loads(_tool(env, "runs", "--json").stdout)[0]["id"]
    assert "estimate for mixtral-moe on tpu7x-4x4x4 x1 (fp8), 30 steps:" in proc.stdout
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    (estimated,) = db.execute("SELECT at FROM estimates WHERE run_id = ?", (run_id,)).fetchone()
    (asked,) = db.execute("SELECT MIN(at) FROM capacity_attempts").fetchone()
    db.close()
    assert estimated < asked  # printed and recorded before capacity was asked for

    unpriced = json.loads(_tool(env, "show", run_id, "--json").stdout)["timeline"]
    assert unpriced["cost"] is None
    assert unpriced["price"]["source"] == "price unknown — set prices.tpu7x in the configuration"

    prices = tmp_path / "prices.yaml"
    prices.write_text("prices: {tpu7x: 4.20}\n", encoding="utf-8")
    priced_env = {**env, "TPU_TRAINER_CONFIG": str(prices)}
    full = json.loads(_tool(priced_env, "show", run_id, "--json").stdout)
    shown = full["timeline"]
    side = full["estimate"]
    assert side["estimate"]["step_source"].startswith("unknown: no run of mixtral-moe")
    assert side["estimate"]["overheads"]["compile"]["source"] == "default (no run measured yet)"
    assert side["actual"]["wall_seconds"] == shown["wall_seconds"]
    assert side["actual"]["cost"] == pytest.approx(shown["cost"], abs=0.01)
    assert shown["chips"] == 64
    names = [p["name"] for p in shown["phases"]]
    for expected in ("capacity", "provisioning", "setup", "compile", "training", "teardown"):
        assert expected in names
    assert names.index("capacity") < names.index("provisioning") < names.index("training")
    assert shown["price"] == {
        "usd_per_chip_hour": 4.2,
        "spot_usd_per_chip_hour": None,
        "basis": "on-demand",
        "source": "configuration prices.tpu7x",
    }
    held = [p for p in shown["phases"] if p["chip_hours"] > 0]
    assert held
    assert {p["name"] for p in held} >= {"training", "teardown"}
    for phase in shown["phases"]:
        assert phase["cost"] == pytest.approx(phase["chip_hours"] * 4.2, abs=1e-3)
        assert phase["start"] <= phase["end"]
    assert shown["cost"] == pytest.approx(sum(p["cost"] for p in shown["phases"]), abs=1e-3)
    assert shown["cost"] > 0
    assert shown["tokens"] > 0
    assert shown["cost_per_million_tokens"] == pytest.approx(
        shown["cost"] / (shown["tokens"] / 1e6), rel=1e-3
    )
    assert 0 < shown["goodput"] < 1
    buckets = shown["badput"]
    assert set(buckets) >= {
        "CAPACITY_HUNTING",
        "PROVISIONING",
        "SCHEDULING_AND_IMAGE_PULL",
        "TPU_INITIALIZATION",
        "TRAINING_PREP",
        "PROGRAM_STARTUP",
        "DATA_LOADING_SYNC",
        "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME",
        "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME",
        "WASTED_PROGRESS_FROM_DISRUPTION",
        "OTHER",
    }
    productive = shown["productive_seconds"]
    lost = sum(b["seconds"] for b in buckets.values())
    assert productive + lost == pytest.approx(shown["wall_seconds"], abs=0.01)
    assert shown["goodput"] == pytest.approx(productive / shown["wall_seconds"], abs=1e-3)
    worst = shown["largest_badput"]
    assert worst["seconds"] == max(b["seconds"] for b in buckets.values())
    assert buckets[worst["bucket"]]["seconds"] == worst["seconds"]
    assert buckets["PROVISIONING"]["seconds"] > 0

    human = _tool(priced_env, "show", run_id).stdout
    assert "timeline (64 chips)" in human
    assert f"largest badput: {worst['bucket']}" in human
    assert "configuration prices.tpu7x" in human
    assert "estimate and actual" in human

    readme = (tmp_path / "store" / "runs" / run_id / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.splitlines() if f"tpu-trainer run {run_id} -->" in line)
    assert "| price unknown — set prices.tpu7x |" in row  # written before prices were set
    goodput_cell = row.split(" | ")[8]
    assert goodput_cell.endswith("%")
    assert 0 < float(goodput_cell.rstrip("%")) < 100

    chart = tmp_path / "store" / "runs" / run_id / "timeline.png"
    assert chart.read_bytes().startswith(b"\x89PNG")

    exported = json.loads(_tool(priced_env, "export", "--format", "json").stdout)[0]
    assert exported["cost_usd"] == pytest.approx(shown["cost"], abs=0.01)
    assert [p["name"] for p in exported["timeline"]["phases"]] == names
    csv_head = _tool(priced_env, "export", "--format", "csv").stdout.splitlines()[0]
    assert "chip_hours" in csv_head.split(",")
    listed = _tool(priced_env, "runs").stdout
    assert "cost (USD)" in listed
    assert f"{exported['cost_usd']:.2f}" in listed
