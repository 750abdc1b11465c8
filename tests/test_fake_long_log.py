"""A rehearsal's worker-0 log carried on to the command's last step (``steps=N``) is made when
it is read, not kept in the state file that every emulated call reads and parses: a 100 000-step
rehearsal's state stays small."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpu_trainer.fakecloud import maxtext_log as mlog
from tpu_trainer.fakecloud.initial import initial_state
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.fakecloud.workloads import log_of, new_workload
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "failover.yaml"


def test_a_long_default_log_is_made_when_read() -> None:
    state = initial_state(load_scenario(SCENARIO))
    command = "python3 -m maxtext.trainers.pre_train.train base.yml steps=100000 run_name=r"
    wl = new_workload(
        state, "w", Slice.parse("tpu7x-4x4x4"), num_slices=1, zone="us-central1-c", image="i",
        command=command, parallel_flag=False,
    )  # fmt: skip
    assert len(json.dumps(wl)) < 10_000  # the state keeps the scenario's few lines
    text = log_of(wl, 0, 0, wl["containers"][0])
    assert text == mlog.default_log(mlog.DEFAULT_LOG, command)
    assert text.count("completed step: ") == 100_000 and "completed step: 99999," in text
    assert "completed step" not in log_of(wl, 0, 1, wl["containers"][0])  # another host
    wl["hang_after_step"] = 5
    assert "completed step: 5," in log_of(wl, 0, 0, wl["containers"][0])
    assert "completed step: 6," not in log_of(wl, 0, 0, wl["containers"][0])
