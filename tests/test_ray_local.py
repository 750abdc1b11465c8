"""A recipe as a Ray job on a real Ray 2.60 head on this machine (loopback, token auth on):
the generated JaxTrainer entry script runs real MaxText on CPU workers, and the launcher gets
the job's status, logs and metrics into the store and a README report."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from conftest import CONFIG
from ray_head import RayHead, group_alive, local_ray_head
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.infra.ray_jobs import JobStatus, RayJobsClient, RayJobsError, submit_body
from tpu_trainer.launchers.local.ray_run import LocalRayRun
from tpu_trainer.launchers.ray.entry import JOB_ENV
from tpu_trainer.launchers.ray.follow import Deadlines, JobEnd, JobLogs, RayJobFollower, Waiting
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.store.db import RunStatus, RunStore

pytestmark = pytest.mark.runtime

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "local" / "tiny-llama"


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    with local_ray_head() as head:
        yield head
    assert not group_alive(head.pgid), "Ray processes of the test head are still running"


def test_maxtext_as_a_ray_job_leaves_steps_metrics_and_a_report(
    ray_head: RayHead, tmp_path: Path
) -> None:
    example = tmp_path / "local" / "tiny-llama"
    shutil.copytree(EXAMPLE, example)
    plan = plan_request(
        Request(str(example), config_path=CONFIG),
        PlanOptions(user="t", now=datetime(2026, 11, 22), profiler=None),
    )
    store = RunStore(tmp_path / "store" / "runs.db")
    display = SilentDisplay()
    run = LocalRayRun(
        store,
        display,
        plan,
        str(example),
        ray_head.url,
        ray_head.token,
        ray_head.python,
        run_id="4a7e5c1d",
    )
    outcome = run.start()

    job_log = (run.run_dir / "job.log").read_text()
    assert outcome.status is RunStatus.SUCCEEDED, (outcome.error, job_log[-3000:])
    row = store.run(run.run_id)
    assert row is not None
    assert (row.launcher, row.status) == ("ray", RunStatus.SUCCEEDED)
    steps = store.steps(run.run_id)
    assert [s["step"] for s in steps] == list(range(20))
    metrics = store.metrics(run.run_id) or {}
    assert metrics["steady_steps"] and min(metrics["steady_steps"]) >= 2
    assert metrics["loss"]["last"] < metrics["loss"]["first"]
    assert [name for name, *_ in store.stages(run.run_id)] == [
        "submit",
        "follow",
        "collect",
        "report",
    ]
    # the job's log keeps Ray's prefixes; worker 0's log has MaxText's lines only
    assert "(RayTrainWorker pid=" in job_log and "world_rank=0" in job_log
    worker0 = (run.run_dir / "worker0.log").read_text()
    assert "completed step: 19," in worker0 and "RayTrainWorker" not in worker0
    assert "\x1b[" not in job_log + worker0
    readme = (example / "README.md").read_text()
    assert f"<!-- tpu-trainer run {run.run_id} -->" in readme
    assert outcome.readme == example / "README.md"
    assert any(m.startswith("step 19:") for m in display.messages)
    # the token is nowhere on disk
    for path in [*run.run_dir.rglob("*"), store.path]:
        if path.is_file():
            assert ray_head.token.encode() not in path.read_bytes(), path


def test_a_failed_job_is_failed_although_the_ray_cli_exits_0(
    ray_head: RayHead, tmp_path: Path
) -> None:
    client = RayJobsClient(ray_head.url, ray_head.token)
    entry = f"{ray_head.python} -c 'import sys; print(\"giving up\"); sys.exit(3)'"
    job_id = client.submit(submit_body(entry, "tpu-trainer-fails", {"RAY_DEDUP_LOGS": "0"}))
    display = SilentDisplay()
    with JobLogs(tmp_path / "job.log", tmp_path / "worker0.log", lambda _: None) as logs:
        followed = RayJobFollower(
            client,
            job_id,
            display,
            logs,
            Waiting(shape="1 CPU worker", fix="-"),
            Deadlines(start_s=120, poll_s=0.5),
        ).run()
    assert followed.end is JobEnd.FAILED
    assert followed.info is not None and followed.info.status is JobStatus.FAILED
    assert followed.info.driver_exit_code == 3
    assert "giving up" in (tmp_path / "job.log").read_text()
    cli = subprocess.run(
        [str(ray_head.ray), "job", "status", job_id, f"--address={ray_head.url}"],
        env={"RAY_AUTH_TOKEN": ray_head.token, "RAY_AUTH_MODE": "token", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert cli.returncode == 0, cli.stderr[-2000:]
    assert "failed" in (cli.stdout + cli.stderr).lower()


def test_a_wrong_token_is_refused_with_how_to_get_the_right_one(ray_head: RayHead) -> None:
    with pytest.raises(RayJobsError) as raised:
        RayJobsClient(ray_head.url, "not-the-token").version()
    assert "rejected the token" in raised.value.message
    assert "RAY_AUTH_TOKEN" in raised.value.fix
    with pytest.raises(RayJobsError, match="has no token"):
        RayJobsClient(ray_head.url).version()


def test_the_job_env_turns_rays_log_deduplication_off(ray_head: RayHead) -> None:
    script = ray_head.folder / "same_line.py"
    script.write_text(
        "import ray, time\n"
        "ray.init()\n"
        "@ray.remote(num_cpus=0)\n"
        "class Sayer:\n"
        "    def say(self):\n"
        "        print('the same line from every actor')\n"
        "sayers = [Sayer.remote() for _ in range(3)]  # three processes, one line each\n"
        "ray.get([s.say.remote() for s in sayers])\n"
        "time.sleep(2)  # let the last lines reach the driver\n"
    )
    client = RayJobsClient(ray_head.url, ray_head.token)
    seen = {}
    for job_id, env in (("dedup-default", {}), ("dedup-off", dict(JOB_ENV))):
        client.submit(submit_body(f"{ray_head.python} {script}", job_id, env))
        deadline = time.monotonic() + 120
        while not client.status(job_id).status.terminal and time.monotonic() < deadline:
            time.sleep(0.5)
        assert client.status(job_id).status is JobStatus.SUCCEEDED
        seen[job_id] = client.logs(job_id)
    # Ray's default folds the copies into one line (and a later "[repeated Nx ...]")
    assert seen["dedup-default"].count("the same line from every actor") < 3
    assert seen["dedup-off"].count("the same line from every actor") == 3
    assert "across cluster]" not in seen["dedup-off"]
