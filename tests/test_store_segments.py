"""A run's segments: one per attempt on capacity, each interruption's cost on the next one."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import new_run
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.store.db import RunStore, SegmentEnd

pytestmark = pytest.mark.unit


def test_an_interruption_ends_a_segment_and_its_cost_is_kept_on_the_next(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.db")
    new_run(
        store,
        "r1",
        LaunchPath.XPK,
        "tpu7x-8",
        request="req",
        project="p",
        cluster="c",
        region="us-central1",
    )
    first = store.start_segment("r1", "us-central1-c")
    store.segment_first_step("r1", first, wasted_steps=5)  # a first segment redoes nothing
    store.end_segment("r1", first, SegmentEnd("preempted", 34, 30, None))
    second = store.start_segment("r1", "us-central1-b")
    store.segment_first_step("r1", second, wasted_steps=4)
    store.segment_first_step("r1", second, wasted_steps=99)  # only the first step counts
    store.end_segment("r1", second, SegmentEnd(None, 49, 40, 30))
    one, two = store.segments("r1")
    assert (one.n, one.cause, one.last_step, one.wasted_steps, one.recovery_s) == (
        1,
        "preempted",
        34,
        None,
        None,
    )
    assert (two.n, two.zone, two.cause, two.restored_step, two.wasted_steps) == (
        2,
        "us-central1-b",
        None,
        30,
        4,
    )
    assert two.recovery_s is not None and two.recovery_s >= 0
    assert store.interruptions("r1") == 1
    assert store.segments("other") == []
