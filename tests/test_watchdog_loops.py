"""The hang watchdog's hooks on a fake clock: the Ray follow loop (KubeRay's and a local Ray
head's) stops a job whose training workers stop printing steps, naming the worker that went
quiet; the GKE follower's looks at the other hosts feed only their new lines, and one more look
comes before the verdict."""

from __future__ import annotations

import threading
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
from tpu_trainer.simcloud.kube.log_stamps import rfc3339_nano

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


def _maxtext_step(step: int, seconds: float) -> str:
    return _step("x", step, seconds).split(") ", 1)[1].rstrip("\n")


def test_other_hosts_new_lines_and_a_fresh_look_before_the_verdict() -> None:
    clock = FakeClock()
    watch = LogWatch(WatchdogSettings(k=5, min_stall_s=60.0), clock=clock, tick_s=5.0)
    tails = {"worker 1": [_maxtext_step(s, 10.0) for s in range(3)]}
    looks: list[float] = []

    def look() -> None:  # what the GKE follower does: one tail per other pod
        looks.append(clock.now())
        watch.feed_tail("worker 1", tails["worker 1"])

    watch.confirm = look
    for step in range(5):
        clock.sleep(10.0)
        watch.feed("worker 0", _maxtext_step(step, 10.0))
        if step == 2:
            watch.feed_tail("worker 1", tails["worker 1"])  # the periodic look
    watch.feed_tail("worker 1", tails["worker 1"])  # unchanged: nothing new is fed
    assert watch.check() is None
    cancel, done = threading.Event(), threading.Event()
    watch.watch(cancel, done)
    assert cancel.is_set() and watch.hang is not None and len(looks) == 1
    # worker 1 stopped at step 2 while worker 0 reached step 4: worker 1 went quiet first
    assert watch.hang.message.startswith("hung after step 4 (worker 1 quiet since step 2, 60 s")


def test_other_hosts_lines_count_from_the_time_their_log_says_they_were_written() -> None:
    """Two hosts that print only start-up lines (no step lines of their own); the tool reads
    both tails late, at the same look. With ``--timestamps`` the host whose last line is the
    older one is named, and its silence is measured from that line, not from the look."""
    clock = FakeClock(at=1_763_785_000.0)
    watch = LogWatch(WatchdogSettings(k=5, min_stall_s=60.0), clock=clock, tick_s=5.0)
    begun = clock.now()
    for step in range(3):
        clock.sleep(10.0)
        watch.feed("worker 0", _maxtext_step(step, 10.0))
    clock.sleep(100.0)  # worker 0 stops too; now the tails are read, long after they were written
    watch.feed_tail("worker 1", [f"{rfc3339_nano(begun + 25.0)} worker 1 still loading shards"])
    watch.feed_tail("worker 2", [f"{rfc3339_nano(begun + 21.0)} worker 2 still loading shards"])
    hang = watch.check()
    assert hang is not None and hang.quiet_host == "worker 2"
    assert watch.dog._last_line["worker 2"] == pytest.approx(begun + 21.0)
    assert watch.dog._last_line["worker 1"] == pytest.approx(begun + 25.0)
    # a line without a time (a log read without --timestamps) counts from when it was read
    watch.feed_tail("worker 3", ["worker 3 up"])
    assert watch.dog._last_line["worker 3"] == clock.now()
