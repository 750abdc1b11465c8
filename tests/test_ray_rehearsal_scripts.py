"""The Ray jobs a KubeRay rehearsal plays, from the scenario's ``ray:`` part, and that part's
checks."""

from __future__ import annotations

import pytest

from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud import parse_scenario
from tpu_trainer.fakecloud.ray_scenario import RayScenario
from tpu_trainer.simcloud.ray_rehearsal import job_scripts

pytestmark = pytest.mark.unit

COMMAND = "python3 -m MaxText.train steps=20 checkpoint_period=5 run_name=r1"
BASE = {"project": "p", "region": "us-central1", "cluster": {"name": "c"}}


def _never() -> None:
    raise AssertionError("no slice is reclaimed")


def test_a_succeeding_job_logs_to_the_runs_last_step_and_succeeds() -> None:
    (job,) = job_scripts(RayScenario(), COMMAND, _never)
    log = "".join(job.chunks)
    assert job.statuses[-1] == "SUCCEEDED" and job.driver_exit_code is None
    assert "completed step: 19," in log and "completed step: 20," not in log


def test_a_failing_job_fails_with_exit_code_1_after_its_log() -> None:
    (job,) = job_scripts(RayScenario(ends="failed", log="boom\n"), COMMAND, _never)
    assert job.statuses[-1] == "FAILED" and job.driver_exit_code == 1
    assert "application error" in job.message and "boom" in "".join(job.chunks)


def test_a_preempted_job_reclaims_the_slice_and_the_next_restores_its_checkpoint() -> None:
    taken: list[bool] = []
    first, again = job_scripts(
        RayScenario(ends="preempted", after_step=12), COMMAND, lambda: taken.append(True)
    )
    assert first.statuses[-1] == "FAILED" and first.on_end is not None
    first.on_end()
    assert taken == [True]
    assert "completed step: 12," in "".join(first.chunks)
    assert "completed step: 13," not in "".join(first.chunks)
    assert again.statuses[-1] == "SUCCEEDED" and "step 10" in "".join(again.chunks)


@pytest.mark.parametrize(
    ("ray", "said"),
    [
        ({"ends": "done"}, r"ray\.ends: 'done' is not one of succeeded, failed, preempted"),
        ({"ends": "preempted"}, r"ray\.after_step: `ends: preempted` needs the step"),
        ({"ends": "failed", "after_step": 2}, r"ray\.after_step: only with `ends: preempted`"),
        ({"head_ready": "maybe"}, r"ray\.head_ready"),
        ({"log": "a", "log_file": "b.log"}, r"ray\.log_file: give either log or log_file"),
    ],
)
def test_a_bad_ray_part_names_the_key(ray: dict[str, object], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        parse_scenario({**BASE, "ray": ray}, "s.yaml")
