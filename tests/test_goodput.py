"""Goodput and badput buckets by ml-goodput-measurement's definitions, from a synthetic
timeline and the seconds a log measured; every number worked out by hand."""

from __future__ import annotations

import pytest

from tpu_trainer.metrics.goodput import Bucket, LogBadput, goodput
from tpu_trainer.metrics.timeline import Phase, PhaseName, Timeline

pytestmark = pytest.mark.unit

# capacity 60, provisioning 300, setup 40, startup 400, compile 400, training 200,
# wind-down 50, teardown 150: 1600 s in all.
_SPANS = (
    (PhaseName.CAPACITY, 60.0),
    (PhaseName.PROVISIONING, 300.0),
    (PhaseName.SETUP, 40.0),
    (PhaseName.STARTUP, 400.0),
    (PhaseName.COMPILE, 400.0),
    (PhaseName.TRAINING, 200.0),
    (PhaseName.WIND_DOWN, 50.0),
    (PhaseName.TEARDOWN, 150.0),
)


def _line(spans: tuple[tuple[PhaseName, float], ...] = _SPANS) -> Timeline:
    phases, start = [], 1000.0
    for name, seconds in spans:
        phases.append(Phase(name, start, start + seconds, 0.0))
        start += seconds
    return Timeline(tuple(phases), 64, None)


def test_without_log_figures_each_phase_lands_in_its_bucket() -> None:
    g = goodput(_line())
    assert g.wall_seconds == 1600
    assert g.productive_seconds == 200
    assert g.goodput == pytest.approx(200 / 1600)  # 12.5 %
    assert g.badput[Bucket.CAPACITY_HUNTING] == 60
    assert g.badput[Bucket.PROVISIONING] == 300
    # setup 40 + the whole 400 s start-up: the log did not say when the program started
    assert g.badput[Bucket.SCHEDULING_AND_IMAGE_PULL] == 440
    assert g.badput[Bucket.TRAINING_PREP] == 0
    assert g.badput[Bucket.PROGRAM_STARTUP] == 400
    assert g.badput[Bucket.OTHER] == 200  # wind-down 50 + teardown 150
    assert g.largest == (Bucket.SCHEDULING_AND_IMAGE_PULL, 440)
    assert g.productive_seconds + sum(g.badput.values()) == pytest.approx(g.wall_seconds)


def test_the_log_s_figures_are_carved_out_of_start_up_and_step_time() -> None:
    log = LogBadput(
        program_startup=250.0,  # of the 400 s start-up: 150 s was scheduling and image pull
        tpu_initialization=30.0,
        checkpoint_restore=20.0,
        data_loading=10.0,
        checkpoint_save=15.0,
        wasted_steps=25.0,
    )
    g = goodput(_line(), log)
    assert g.badput[Bucket.SCHEDULING_AND_IMAGE_PULL] == 40 + 150
    assert g.badput[Bucket.TPU_INITIALIZATION] == 30
    assert g.badput[Bucket.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME] == 20
    assert g.badput[Bucket.TRAINING_PREP] == 250 - 30 - 20
    assert g.badput[Bucket.DATA_LOADING_SYNC] == 10
    assert g.badput[Bucket.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME] == 15
    assert g.badput[Bucket.WASTED_PROGRESS_FROM_DISRUPTION] == 25
    assert g.productive_seconds == 200 - 10 - 15 - 25
    assert g.goodput == pytest.approx(150 / 1600)
    assert g.largest == (Bucket.PROGRAM_STARTUP, 400)
    assert g.share(Bucket.PROVISIONING) == pytest.approx(300 / 1600)
    assert g.productive_seconds + sum(g.badput.values()) == pytest.approx(1600)


def test_log_figures_larger_than_their_phase_are_capped_at_it() -> None:
    g = goodput(_line(), LogBadput(program_startup=9999.0, data_loading=500.0))
    assert g.badput[Bucket.SCHEDULING_AND_IMAGE_PULL] == 40
    assert g.badput[Bucket.TRAINING_PREP] == 400
    assert g.badput[Bucket.DATA_LOADING_SYNC] == 200
    assert g.productive_seconds == 0
    assert g.goodput == 0
    assert g.productive_seconds + sum(g.badput.values()) == pytest.approx(1600)


def test_a_run_with_no_phases_has_no_goodput_and_no_largest_bucket() -> None:
    g = goodput(Timeline((), 0, None))
    assert g.goodput is None
    assert g.largest is None
    assert set(g.badput) == set(Bucket)


def test_a_path_that_schedules_no_pods_counts_its_wait_as_environment_set_up() -> None:
    # a TPU VM or this machine: the same 40 s of setup and 150 s before the program's first
    # line are installs and the interpreter loading the program, not scheduling
    g = goodput(_line(), LogBadput(program_startup=250.0), scheduled=False)
    assert g.badput[Bucket.ENVIRONMENT_SETUP] == 40 + 150
    assert g.badput[Bucket.SCHEDULING_AND_IMAGE_PULL] == 0
    assert g.badput[Bucket.TRAINING_PREP] == 250
    assert g.productive_seconds + sum(g.badput.values()) == pytest.approx(1600)
