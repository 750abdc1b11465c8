"""`tpu-trainer estimate`: with an empty store the published step time (cited) and the default
overheads (said to be defaults); with runs recorded, their steady step time and the overheads
measured on the cluster."""

from __future__ import annotations

import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import RECIPES, RECIPES_ROOT
from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.cli.main import app
from tpu_trainer.config.prices import ChipPrice
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.metrics.estimate import Target, estimate
from tpu_trainer.store.db import ResourceState, RunStatus, RunStore

pytestmark = pytest.mark.unit

PUBLISHED = "https://github.com/AI-Hypercomputer/tpu-recipes/blob/"
TARGET = Target(
    model="llama3.1-70b",
    device_type="tpu7x-4x4x4",
    precision="fp8",
    family=Family.V7,
    chips=64,
    steps=101,
    seq=8192,
    region="us-central1",
    cluster="demo-cluster",
)
T0 = 1_700_000_000.0


def _record_run(store: RunStore, run_id: str, step_seconds: float, offset: float) -> None:
    """A finished GKE run of TARGET on demo-cluster: ready at +300 s, follow +320..+1320 with
    10 steps of ``step_seconds`` (the first 100 s), torn down at +1400."""
    store.create_run(
        run_id,
        model=TARGET.model,
        request="r",
        launcher=LaunchPath.XPK,
        device_type=TARGET.device_type,
        precision=TARGET.precision,
        project="p",
        cluster="demo-cluster",
        region="us-central1",
        zone="us-central1-c",
        plan_json={"slice": {"family": "v7", "chips": 64, "num_slices": 1, "jax_devices": 128}},
    )
    rid = store.resource_intent(run_id, kind="nodepool", name="np", project="p", location="z")
    store.resource_state(rid, ResourceState.DELETED)
    for name in ("provision", "follow"):
        store.stage_started(run_id, name)
        store.stage_finished(run_id, name, "ok")
    store.record_steps(
        run_id,
        [{"step": 0, "seconds": 100.0}]
        + [{"step": i, "seconds": step_seconds} for i in range(1, 10)],
    )
    store.set_metrics(run_id, {"step_seconds": step_seconds})
    store.finish_run(run_id, RunStatus.SUCCEEDED)
    db = sqlite3.connect(store.path)
    with db:
        t = T0 + offset
        db.execute(
            "UPDATE runs SET created_at = ?, finished_at = ? WHERE id = ?", (t, t + 1400, run_id)
        )
        db.execute(
            "UPDATE resources SET created_at = ?, updated_at = ? WHERE id = ?",
            (t + 60, t + 1400, rid),
        )
        for name, start, end in (("provision", 60, 300), ("follow", 320, 1320)):
            db.execute(
                "UPDATE stages SET started_at = ?, finished_at = ? WHERE run_id = ? AND name = ?",
                (t + start, t + end, run_id, name),
            )
    db.close()


def test_an_empty_store_uses_the_published_step_time_and_says_the_overheads_are_defaults(
    tmp_path: Path,
) -> None:
    found = estimate(RunStore(tmp_path / "runs.db"), TARGET, {"tpu7x": ChipPrice(4.0)})
    assert found.step.seconds == 7.93
    assert found.step.source.startswith("published: llama3.1-70b, 64 chips, seq 8192, fp8")
    assert PUBLISHED in found.step.source
    assert {f.source for f in found.overheads.values()} == {"default (no run measured yet)"}
    overheads = sum(f.seconds or 0 for f in found.overheads.values())
    assert found.wall_seconds == pytest.approx(100 * 7.93 + overheads)
    assert found.wall_seconds is not None
    assert found.chip_hours is not None
    held = found.wall_seconds - (found.overheads["provisioning"].seconds or 0)
    assert found.chip_hours == pytest.approx(64 * held / 3600)
    assert found.cost == pytest.approx(found.chip_hours * 4.0)
    assert found.price_source == "configuration prices.tpu7x"


def test_without_history_or_a_published_row_the_step_time_is_unknown(tmp_path: Path) -> None:
    found = estimate(
        RunStore(tmp_path / "runs.db"),
        replace(TARGET, model="mixtral-moe", steps=30, seq=4096, region=None, cluster=None),
        {},
    )
    assert found.step.seconds is None
    assert found.step.source.startswith("unknown: no run of mixtral-moe")
    assert found.wall_seconds is None
    assert found.cost is None
    assert found.price_source == "price unknown — set prices.tpu7x in the configuration"


def test_two_recorded_runs_give_the_step_time_and_the_cluster_overheads(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    _record_run(store, "aaaa0001", 6.0, offset=0)
    _record_run(store, "aaaa0002", 8.0, offset=5000)
    found = estimate(store, TARGET, {"tpu7x": ChipPrice(4.0)})
    assert found.step.seconds == pytest.approx(7.0)
    assert found.step.source == ("history: steady-state step time of 2 run(s) (aaaa0002, aaaa0001)")
    provisioning = found.overheads["provisioning"]
    assert provisioning.source == "median of 2 run(s) on demo-cluster"
    assert provisioning.seconds == pytest.approx(300)
    assert found.overheads["scheduling"].seconds is not None
    assert found.overheads["compile"].source == "median of 2 run(s) on demo-cluster"
    elsewhere = estimate(store, replace(TARGET, cluster="other"), {})
    assert elsewhere.overheads["provisioning"].source == "default (no run measured yet)"


def test_the_estimate_command_cites_the_published_table_with_an_empty_store(
    tmp_path: Path,
) -> None:
    recipe = tmp_path / "training" / "ironwood" / "llama3.1-70b" / "8k-fp8-tpu7x-4x4x4"
    shutil.copytree(RECIPES_ROOT / RECIPES["tee-upload"], recipe)
    env = {"TPU_TRAINER_HOME": str(tmp_path / "store"), "TPU_TRAINER_CONFIG": ""}
    result = CliRunner().invoke(app, ["estimate", str(recipe), "--json"], env=env)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["step_seconds"] == 7.93
    assert PUBLISHED in shown["step_source"]
    assert shown["steps"] == 30
    assert shown["overheads"]["compile"]["source"] == "default (no run measured yet)"
    human = CliRunner().invoke(app, ["estimate", str(recipe)], env=env).output
    assert "step time: 7.93 s — published" in human
    assert "set prices.tpu7x in the configuration" in human
