"""The run store: migrations, WAL, resources recorded before creation, concurrent writers."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.store.db import (
    LIVE_STATES,
    ResourceState,
    RunMode,
    RunStatus,
    RunStore,
    StepRow,
)
from tpu_trainer.store.migrations import MIGRATIONS

pytestmark = pytest.mark.unit


def _store(tmp_path: Path) -> RunStore:
    return RunStore(tmp_path / "runs.db")


def _run(store: RunStore, run_id: str = "a1b2c3d4") -> None:
    store.create_run(
        run_id,
        model="m",
        request="r",
        launcher=LaunchPath.XPK,
        device_type="tpu7x-4x4x8",
        precision="bf16",
        project="p",
        cluster="c",
        region="us-central1",
        zone="us-central1-a",
        plan_json={"k": 1},
    )


def test_store_uses_wal_and_latest_schema(tmp_path: Path) -> None:
    store = _store(tmp_path)
    mode = sqlite3.connect(tmp_path / "runs.db").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    assert store.schema_version == len(MIGRATIONS)


def test_store_reopen_keeps_data_and_does_not_migrate_twice(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(store)
    store.close()
    again = _store(tmp_path)
    assert again.run("a1b2c3d4") is not None
    assert again.schema_version == len(MIGRATIONS)


def test_store_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    _store(tmp_path).close()
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("INSERT INTO schema_version VALUES (99)")
    db.commit()
    db.close()
    with pytest.raises(TpuTrainerError) as info:
        _store(tmp_path)
    assert "newer than this tpu-trainer" in info.value.message
    assert (tmp_path / "runs.db").exists()


def test_store_resource_lifecycle(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(store)
    rid = store.resource_intent(
        "a1b2c3d4",
        kind="nodepool",
        name="c-np-0",
        project="p",
        location="us-central1",
        cluster="c",
        detail={"zone": "z"},
    )
    assert [r.state for r in store.resources("a1b2c3d4")] == [ResourceState.CREATING]
    store.resource_state(rid, ResourceState.CREATED, status="RUNNING")
    live = store.resources(states=LIVE_STATES)
    assert [(r.name, r.detail) for r in live] == [("c-np-0", {"zone": "z", "status": "RUNNING"})]
    store.resource_state(rid, ResourceState.DELETED)
    assert store.resources(states=LIVE_STATES) == []


def test_store_records_commands_and_attempts(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(store)
    store.record_command("a1b2c3d4", CommandResult(("gcloud", "x"), 1, "out", "err", 0.5))
    assert store.commands("a1b2c3d4") == [(["gcloud", "x"], 1, True)]
    store.record_attempt(
        "a1b2c3d4",
        reservation="r1",
        zone="z",
        status="READY",
        free_hosts=0,
        needed_hosts=32,
        outcome="exhausted",
        message="RESOURCE_EXHAUSTED",
    )
    assert store.attempts("a1b2c3d4")[0]["outcome"] == "exhausted"


def test_store_finish_run_and_process_liveness(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(store)
    row = store.run("a1b2c3d4")
    assert row is not None and row.process_alive()
    store.update_run("a1b2c3d4", pid=2**22 + 12345)
    row = store.run("a1b2c3d4")
    assert row is not None and not row.process_alive()
    store.finish_run("a1b2c3d4", RunStatus.FAILED, "boom")
    row = store.run("a1b2c3d4")
    assert row is not None and row.status is RunStatus.FAILED and row.error == "boom"


def test_store_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(store)

    def write(n: int) -> None:
        own = RunStore(tmp_path / "runs.db")
        for i in range(20):
            own.record_command("a1b2c3d4", CommandResult((f"w{n}", str(i)), 0, "", "", 0.0))
        own.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.commands("a1b2c3d4")) == 160


def test_store_migrates_an_old_schema_in_place(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "runs.db")
    db.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    for statement in MIGRATIONS[0].split(";"):
        if statement.strip():
            db.execute(statement)
    db.execute("INSERT INTO schema_version VALUES (1)")
    db.execute(
        "INSERT INTO runs (id, created_at, updated_at, model, request, launcher, device_type, "
        "precision, status) VALUES ('old', 0, 0, 'm', 'r', 'xpk', 'tpu7x-8', 'bf16', 'succeeded')"
    )
    db.commit()
    db.close()
    store = _store(tmp_path)
    assert store.schema_version == len(MIGRATIONS)
    assert store.run("old") is not None
    store.record_steps("old", [{"step": 0, "seconds": 1.5, "loss": 10.9, "perplexity": 5.0}])
    assert store.steps("old") == [
        {
            "step": 0,
            "seconds": 1.5,
            "tflops_device": None,
            "tokens_device": None,
            "total_weights": None,
            "loss": 10.9,
            "perplexity": 5.0,
        }
    ]
    store.set_metrics("old", {"steady_step_seconds": 1.5})
    assert store.metrics("old") == {"steady_step_seconds": 1.5}
    old = store.run("old")
    assert old is not None and old.mode is RunMode.REAL


def test_a_rehearsal_store_records_its_runs_as_rehearsals(tmp_path: Path) -> None:
    _run(RunStore(tmp_path / "runs.db", RunMode.REHEARSAL), "rehearsed")
    _run(_store(tmp_path), "real")
    store = _store(tmp_path)
    modes = {r.id: r.mode for r in store.runs()}
    assert modes == {"rehearsed": RunMode.REHEARSAL, "real": RunMode.REAL}


def test_step_rows_are_stored_in_their_columns_and_read_back_whole(tmp_path: Path) -> None:
    store = _store(tmp_path)
    _run(store)
    rows = [
        StepRow(
            step=0,
            seconds=9.5,
            tflops_per_device=None,
            tflops_per_chip=None,
            tokens_per_device=None,
            tokens_per_chip=None,
            total_weights=None,
            loss=10.9,
            excluded="step 0: JIT compilation",
        ),
        StepRow(
            step=2,
            seconds=1.5,
            tflops_per_device=100.0,
            tflops_per_chip=200.0,
            tokens_per_device=600.0,
            tokens_per_chip=1200.0,
            total_weights=4096.0,
            loss=9.5,
        ),
    ]
    store.record_steps("a1b2c3d4", rows)
    assert store.steps("a1b2c3d4")[1] == {
        "step": 2,
        "seconds": 1.5,
        "tflops_device": 100.0,
        "tokens_device": 600.0,
        "total_weights": 4096.0,
        "loss": 9.5,
        "excluded": None,
    }
    store.set_metrics("a1b2c3d4", {"jax_devices_per_chip": 2})
    assert store.step_rows("a1b2c3d4") == rows
