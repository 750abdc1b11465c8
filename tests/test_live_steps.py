"""Steps reach the store while a run streams its log, in batches, and are replaced at the end."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conftest import new_run
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.live_steps import LiveSteps
from tpu_trainer.frameworks.vm_program import LogFormat
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.tpu_vm.follow import TrainFollower
from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.store.db import RunMode, RunStore

pytestmark = pytest.mark.unit


def _store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "runs.db", RunMode.REHEARSAL)
    new_run(store, "r1", LaunchPath.TPU_VM, "v6e-8")
    return store


def _line(n: int, loss: float = 2.5) -> str:
    return (
        f"completed step: {n}, seconds: 7.4, TFLOP/s/device: 31.5, Tokens/s/device: 550.0, "
        f"total_weights: 262144, loss: {loss}"
    )


def _record(n: int) -> StepRecord:
    return StepRecord(
        step=n,
        seconds=7.4,
        tflops_per_device=1.0,
        tokens_per_device=2.0,
        total_weights=8.0,
        loss=3.0,
    )


def test_steps_are_written_every_n_steps_and_every_t_seconds(tmp_path: Path) -> None:
    store = _store(tmp_path)
    now = [0.0]
    live = LiveSteps(store, "r1", every_steps=100, every_seconds=30.0, clock=lambda: now[0])
    for n in range(250):
        live.add(_record(n))
    assert store.step_count("r1") == 200 and live.written == 200  # two full batches
    now[0] = 29.0
    live.add(_record(250))
    assert store.step_count("r1") == 200  # not yet: 29 s since the last write
    now[0] = 31.0
    live.add(_record(251))
    assert store.step_count("r1") == 252
    live.flush()
    live.flush()  # nothing held: nothing written
    assert live.written == 252 and store.steps("r1")[251]["loss"] == 3.0


def test_a_crash_keeps_the_steps_written_and_the_end_replaces_them(tmp_path: Path) -> None:
    store = _store(tmp_path)
    live = LiveSteps(store, "r1", every_steps=10)
    for n in range(25):
        live.add(_record(n))
    del live  # the process dies here: the 5 steps held are lost, the 20 written are not
    reopened = RunStore(tmp_path / "runs.db", RunMode.REHEARSAL)
    assert reopened.step_count("r1") == 20
    reopened.record_steps("r1", [{"step": n, "seconds": 7.0, "excluded": None} for n in range(25)])
    assert reopened.step_count("r1") == 25  # the collect stage replaces, never doubles


def test_the_tpu_vm_follower_writes_worker_0_steps_while_it_streams(tmp_path: Path) -> None:
    store = _store(tmp_path)
    follower = TrainFollower(
        SilentDisplay(),
        LogFormat.MAXTEXT,
        tmp_path / "worker0.log",
        lambda line: line,
        threading.Event(),
        live=LiveSteps(store, "r1", every_steps=50),
    )
    for n in range(120):
        follower(0, "I1122 04:29:46.380500 1 input.py:1] data loader: batch")
        follower(0, _line(n))
        follower(1, _line(n, loss=9.0))  # other workers' lines are not worker 0's steps
    assert store.step_count("r1") == 100  # written during the run, before it ends
    follower.close()
    steps = store.steps("r1")
    assert len(steps) == 120 and {s["loss"] for s in steps} == {2.5}
    assert len(follower._times) <= 6  # the pace keeps only the last few step times
