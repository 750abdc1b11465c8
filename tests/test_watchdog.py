"""The hang watchdog on synthetic timelines: steady step time, the k × step limit and its
floor, the start-up deadline (configured, from history, default), the quiet host, and the
ticker that stops a follow loop."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from conftest import new_run
from tpu_trainer.app.watchdog import (
    DEFAULT_FIRST_STEP_DEADLINE_S,
    HangKind,
    Watchdog,
    WatchdogSettings,
)
from tpu_trainer.app.watchdog_run import COMPILE_FACTOR, LogWatch, watchdog_settings
from tpu_trainer.infra.poll import FakeClock
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.store.db import RunStore

pytestmark = pytest.mark.unit


def _steps(dog: Watchdog, times: list[float], start: float = 0.0, host: str = "worker 0") -> float:
    """Steps 0.. reported with the given step times; returns when the last one came."""
    now = start
    for step, seconds in enumerate(times):
        now += seconds
        dog.step(now, host, step, seconds)
    return now


def test_no_new_step_for_k_steady_step_times_is_a_hang_after_the_last_step() -> None:
    dog = Watchdog(WatchdogSettings(k=5, min_stall_s=10), started=0.0)
    last = _steps(dog, [300.0, 20.0, 21.0, 19.0, 20.0, 20.0])
    assert dog.steady_step_s == 20.0  # the compile step is left out
    assert dog.check(last + 99.0) is None
    hang = dog.check(last + 100.0)
    assert hang is not None
    assert hang.kind is HangKind.STALLED
    assert (hang.last_step, hang.quiet_host, hang.since) == (5, "worker 0", last)
    assert hang.quiet_s == 100.0
    assert hang.message.startswith("hung after step 5 (worker 0 quiet since step 5, 100 s")
    assert "limit 5 × steady step 20.0 s" in hang.message


def test_the_steady_step_time_is_the_median_so_one_slow_step_does_not_stretch_the_limit() -> None:
    dog = Watchdog(WatchdogSettings(k=3, min_stall_s=1), started=0.0)
    last = _steps(dog, [100.0, 10.0, 10.0, 400.0, 10.0, 10.0])
    assert dog.steady_step_s == 10.0
    assert dog.check(last + 31.0) is not None


def test_a_fast_run_gets_at_least_the_floor_so_a_checkpoint_pause_is_not_a_hang() -> None:
    dog = Watchdog(WatchdogSettings(k=5, min_stall_s=60), started=0.0)
    last = _steps(dog, [30.0, 0.5, 0.5, 0.5])
    assert dog.check(last + 59.0) is None
    hang = dog.check(last + 60.0)
    assert hang is not None and "at least 60 s" in hang.message


def test_without_reported_step_times_the_gaps_between_step_lines_are_used() -> None:
    dog = Watchdog(WatchdogSettings(k=2, min_stall_s=1), started=0.0)
    for step, at in enumerate([50.0, 58.0, 66.0, 74.0]):
        dog.step(at, "worker 0", step)
    assert dog.steady_step_s == 8.0
    assert dog.check(74.0 + 15.0) is None
    assert dog.check(74.0 + 16.0) is not None


def test_no_first_step_within_the_start_up_deadline_is_a_hang_naming_the_deadline() -> None:
    dog = Watchdog(WatchdogSettings(first_step_deadline_s=600, deadline_source="configured"), 10.0)
    dog.line(20.0, "worker 0")
    assert dog.check(609.0) is None
    hang = dog.check(610.0)
    assert hang is not None and hang.kind is HangKind.NO_FIRST_STEP
    assert hang.last_step is None
    assert hang.message.startswith("no first step within 600 s (start-up deadline: configured")


def test_after_only_the_compile_step_the_start_up_deadline_applies_again() -> None:
    dog = Watchdog(WatchdogSettings(first_step_deadline_s=900, min_stall_s=1), 0.0)
    dog.step(400.0, "worker 0", 0, 400.0)
    assert dog.steady_step_s is None
    assert dog.check(400.0 + 899.0) is None
    hang = dog.check(400.0 + 900.0)
    assert hang is not None and hang.message.startswith("hung after step 0")


def test_the_quiet_host_is_the_one_whose_last_line_is_the_oldest() -> None:
    dog = Watchdog(WatchdogSettings(k=2, min_stall_s=1), 0.0)
    last = _steps(dog, [10.0, 5.0, 5.0, 5.0])
    dog.line(last - 12.0, "worker 3")  # went quiet during training, before worker 0
    dog.line(last + 4.0, "worker 1")
    hang = dog.check(last + 10.0)
    assert hang is not None and hang.quiet_host == "worker 3"


def test_a_host_that_only_logged_at_start_up_is_not_the_quiet_one() -> None:
    dog = Watchdog(WatchdogSettings(k=2, min_stall_s=1), 0.0)
    dog.line(1.0, "worker 1")  # "metrics are logged by worker 0"
    last = _steps(dog, [10.0, 5.0, 5.0], start=2.0)
    hang = dog.check(last + 10.0)
    assert hang is not None and hang.quiet_host == "worker 0"


def test_a_repeated_or_older_step_line_is_not_progress() -> None:
    dog = Watchdog(WatchdogSettings(k=2, min_stall_s=1), 0.0)
    last = _steps(dog, [10.0, 5.0, 5.0])
    dog.step(last + 9.0, "worker 0", 2, 5.0)
    hang = dog.check(last + 10.0)
    assert hang is not None and hang.last_step == 2


def test_log_watch_reads_step_lines_and_its_ticker_cancels_on_a_hang() -> None:
    clock = FakeClock()
    watch = LogWatch(WatchdogSettings(k=2, min_stall_s=1), clock=clock, tick_s=5.0)
    for step in range(4):
        clock.advance(10.0)
        watch.feed("worker 0", f"completed step: {step}, seconds: 10.000, loss: 9.5")
    watch.feed("worker 0", "I1122 06:00:00.000000 1 train.py:1] saving checkpoint")
    cancel, done = threading.Event(), threading.Event()
    watch.watch(cancel, done)  # the fake clock's sleeps take no time
    assert cancel.is_set()
    assert watch.hang is not None and watch.hang.last_step == 3
    assert clock.slept == [5.0] * 4  # decided on the first tick past 2 × 10 s


def test_log_watch_stops_when_the_follow_is_done() -> None:
    watch = LogWatch(WatchdogSettings(), clock=FakeClock())
    cancel, done = threading.Event(), threading.Event()
    done.set()
    watch.watch(cancel, done)
    assert not cancel.is_set() and watch.hang is None


def _store_with_first_steps(tmp_path: Path, firsts: list[float]) -> RunStore:
    store = RunStore(tmp_path / "runs.db")
    for n, seconds in enumerate(firsts):
        run_id = f"r{n}"
        new_run(store, run_id, LaunchPath.XPK, "v6e-16", model="llama3-8b", project="p")
        store.record_steps(
            run_id,
            [{"step": 0, "seconds": seconds}, {"step": 1, "seconds": 2.0}],
        )
    return store


def test_the_start_up_deadline_comes_from_the_longest_compile_seen_for_the_model(
    tmp_path: Path,
) -> None:
    store = _store_with_first_steps(tmp_path, [200.0, 400.0])
    settings = watchdog_settings(store, "llama3-8b", "v6e-16", k=4)
    assert settings.k == 4
    assert settings.first_step_deadline_s == 400.0 * COMPILE_FACTOR
    assert "first step 400 s seen for llama3-8b on v6e-16" in settings.deadline_source
    other = watchdog_settings(store, "llama3-8b", "v6e-32")
    assert other.first_step_deadline_s == DEFAULT_FIRST_STEP_DEADLINE_S
    configured = watchdog_settings(store, "llama3-8b", "v6e-16", first_step_deadline_s=60)
    assert (configured.first_step_deadline_s, configured.deadline_source) == (60, "configured")


def test_on_a_tpu_vm_every_workers_lines_feed_it_and_the_quiet_worker_is_named(
    tmp_path: Path,
) -> None:
    from tpu_trainer.app.display import SilentDisplay
    from tpu_trainer.frameworks.vm_program import LogFormat
    from tpu_trainer.launchers.tpu_vm.follow import STEP_PARSERS, TrainFollower

    clock = FakeClock()
    cancel, done = threading.Event(), threading.Event()
    watch = LogWatch(
        WatchdogSettings(k=2, min_stall_s=1),
        clock=clock,
        parse=STEP_PARSERS[LogFormat.MAXTEXT],
    )
    follower = TrainFollower(
        SilentDisplay(), LogFormat.MAXTEXT, tmp_path / "w0.log", str, cancel, watch=watch
    )
    for step in range(4):
        clock.advance(10.0)
        follower(0, f"completed step: {step}, seconds: 10.000, loss: 9.5")
        if step < 2:
            follower(1, f"worker 1 finished step {step}")  # then worker 1 goes quiet
    follower.start_watchdog(done)
    for _ in range(200):
        if cancel.wait(0.01):
            break
    follower.close()
    assert cancel.is_set() and watch.hang is not None
    assert watch.hang.quiet_host == "worker 1"
    assert watch.hang.message.startswith("hung after step 3 (worker 1 quiet since step 1, ")


def test_a_hang_after_step_workload_prints_up_to_that_step_and_never_finishes() -> None:
    from tpu_trainer.fakecloud import workloads

    log = "".join(f"completed step: {n}, seconds: 20.0, loss: 9.0\n" for n in range(10))
    wl = {
        "log": "start\n" + log,
        "containers": ["jax-tpu"],
        "hang": False,
        "hang_after_step": 5,
        "reads": workloads.FINISHED_READS,
        "pending_polls": 1,
        "running_polls": 1,
        "exit_code": 0,
    }
    text = workloads.log_of(wl, 0, 0, "jax-tpu")
    assert text.splitlines()[-1].startswith("completed step: 5,")
    assert len(text.splitlines()) == 7
    assert workloads.phase(wl) == "Running"
    assert workloads.log_of(wl, 0, 1, "jax-tpu").startswith("I1122")  # other hosts unchanged
