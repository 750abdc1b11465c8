"""The scenario's clock a rehearsal's watchdog reads: the state file's clock, read again at most
every ``fresh_s`` real seconds, and set at once by the clock's own ``sleep``."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tpu_trainer.fakecloud.scenario_clock import ScenarioClock
from tpu_trainer.fakecloud.state import STATE_VERSION, transaction, write_state

pytestmark = pytest.mark.unit


def _state(tmp_path: Path, at: float) -> Path:
    return write_state(tmp_path / "state.json", {"version": STATE_VERSION, "clock": at})


def test_a_clock_read_is_answered_again_for_a_moment(tmp_path: Path) -> None:
    path = _state(tmp_path, 1000.0)
    clock = ScenarioClock(path, real_sleep_s=0.0, fresh_s=60.0)
    assert clock.now() == 1000.0
    with transaction(path) as state:  # an emulated API moves the clock on
        state["clock"] = 1003.0
    assert clock.now() == 1000.0  # within fresh_s: the read before
    clock.sleep(5.0)
    assert clock.now() == 1008.0  # its own move: known at once
    every_time = ScenarioClock(path, real_sleep_s=0.0, fresh_s=0.0)
    with transaction(path) as state:
        state["clock"] = 2000.0
    assert every_time.now() == 2000.0


def test_a_stale_read_is_read_again(tmp_path: Path) -> None:
    path = _state(tmp_path, 10.0)
    clock = ScenarioClock(path, real_sleep_s=0.0, fresh_s=0.05)
    assert clock.now() == 10.0
    with transaction(path) as state:
        state["clock"] = 20.0
    time.sleep(0.06)
    assert clock.now() == 20.0
