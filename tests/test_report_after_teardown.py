"""A rehearsed run's README figures (goodput, cost) are the whole run's, teardown included:
the same as ``show --json`` gives once the run is over, in the README and the stored report;
the cost comes from a test price table given through the configuration."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from conftest import RECIPES_ROOT
from test_gke_report import RECIPE, STEPS, _cli, _env, _log, _run_id, _scenario
from tpu_trainer.report.sections import marker

pytestmark = pytest.mark.e2e


def test_the_readme_row_counts_the_teardown(tmp_path: Path) -> None:
    prices = tmp_path / "prices.yaml"  # a test price table: TPU v7 has no shipped price
    prices.write_text("prices: {tpu7x: 4.20}\n", encoding="utf-8")
    env = {**_env(tmp_path), "TPU_TRAINER_CONFIG": str(prices)}
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    scenario = _scenario(tmp_path, "run", _log(2.2, 730.0))
    done = _cli(env, "train", str(recipe), "--rehearse", str(scenario), *STEPS, "--poll", "0.05")
    assert done.returncode == 0, done.stderr[-3000:]
    run = _run_id(done.stdout)
    shown = json.loads(_cli(env, "show", run, "--json").stdout)
    timeline = shown["timeline"]
    teardown = [p for p in timeline["phases"] if p["name"] == "teardown"]
    assert teardown and teardown[0]["seconds"] > 0, timeline["phases"]
    readme = (tmp_path / "store" / "runs" / run / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("|") and marker(run) in line)
    # the row shows the figures rounded (0.1 %, cents); show --json to 4 decimals: compare the
    # numbers, not their texts, so a figure on a rounding boundary cannot tell them apart
    cells = row.split(" | ")
    goodput = cells[8]
    assert float(goodput.rstrip("%")) == pytest.approx(100 * timeline["goodput"], abs=0.06), row
    assert timeline["price"]["source"] == "configuration prices.tpu7x"
    assert timeline["cost"] is not None and timeline["cost"] > 0
    assert cells[10].startswith("$"), row
    cost = float(cells[10][1:].split(" ")[0].replace(",", ""))
    assert cost == pytest.approx(timeline["cost"], abs=0.006), row
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    (stored,) = db.execute("SELECT metrics_json FROM runs WHERE id = ?", (run,)).fetchone()
    report = json.loads(stored)["report"]
    assert report["goodput"] == pytest.approx(timeline["goodput"], abs=1e-4)
    assert f"**Goodput**: {goodput}" in readme or f"**Goodput**：{goodput}" in readme
    assert "teardown included" in readme or "含拆除阶段" in readme
