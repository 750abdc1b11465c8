"""The hang watchdog in the Ray follow loop (KubeRay's and a local Ray head's): a job whose
training workers stop printing steps is stopped as hung, naming the worker that went quiet."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.watchdog import WatchdogSettings
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.fakecloud.ray_dashboard import FakeRayDashboard, JobScript
from tpu_trainer.infra.poll import FakeClock
from tpu_trainer.infra.ray_jobs import RayJobsClient, submit_body
from tpu_trainer.launchers.ray.follow import (
    Deadlines,
    JobEnd,
    JobLogs,
    RayJobFollower,
    Waiting,
)

pytestmark = pytest.mark.unit

TOKEN = "a-test-token-0123456789"


def _step(worker: str, step: int, seconds: float) -> str:
    return (
        f"({worker}) completed step: {step}, seconds: {seconds:.3f}, TFLOP/s/device: 1.0, "
        f"Tokens/s/device: 100.0, total_weights: 1024, loss: {9.0 - step * 0.1:.3f}\n"
    )


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        (
            (
                "(TrainController pid=9) Started training worker group of size 2: \n",
                _step("RayTrainWorker pid=5, ip=10.0.0.2", 0, 30.0)
                + _step("RayTrainWorker pid=6, ip=10.0.0.3", 0, 30.0),
                _step("RayTrainWorker pid=5, ip=10.0.0.2", 1, 10.0)
                + _step("RayTrainWorker pid=6, ip=10.0.0.3", 1, 10.0),
                _step("RayTrainWorker pid=5, ip=10.0.0.2", 2, 10.0),
            ),
            "hung after step 2 (worker 10.0.0.3, pid 6 quiet since step 1",
        ),
        (
            ("(TrainController pid=9) Started training worker group of size 1: \n",),
            "no first step within 100 s",
        ),
    ],
)
def test_a_ray_job_that_stops_making_progress_is_stopped_as_hung(
    tmp_path: Path, chunks: tuple[str, ...], expected: str
) -> None:
    clock = FakeClock()
    settings = WatchdogSettings(k=5, first_step_deadline_s=100.0, min_stall_s=60.0)
    deadlines = Deadlines(start_s=1000.0, finish_s=10_000.0, poll_s=10.0)
    waiting = Waiting(shape="1 x v6e-8", fix="add a node pool")
    with FakeRayDashboard(TOKEN, JobScript(statuses=("RUNNING",), chunks=chunks)) as dash:
        client = RayJobsClient(dash.url, TOKEN)
        job = client.submit(submit_body("python /train_entry.py", "tpu-trainer-h", {}))
        watch = LogWatch(settings, clock=clock)
        with JobLogs(tmp_path / "job.log", tmp_path / "w0.log", print, watch=watch) as logs:
            followed = RayJobFollower(
                client, job, SilentDisplay(), logs, waiting, deadlines, clock=clock
            ).run()
        assert followed.end is JobEnd.HUNG and not followed.ok
        assert followed.message.startswith(expected), followed.message
        assert dash.jobs["tpu-trainer-h"].status == "STOPPED"
    # decided within one poll of the limit: 60 s after the last step, 100 s without a first
    assert clock.now() <= (100.0 if "first" in expected else 40.0 + 60.0) + deadlines.poll_s
