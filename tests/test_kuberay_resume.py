"""`resume RUN` for a KubeRay run whose process died: while its RayCluster's head is ready and
Ray still has the job of the segment the dead process left open, the job is followed again from
the first line of its log (Ray keeps it whole), in the same segment, passing over the lines the
run already holds; with the RayCluster gone, the open segment ends as crashed and a new one runs
on a RayCluster made again. The dead process's leftovers are made with the launcher's own parts
(the RayCluster, the open segment, the submitted job, the lines it had followed, a last line cut
short); the real kubectl, the Kubernetes API emulator and a fake Ray dashboard play the rest."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import new_run
from kuberay_setup import (
    CPU_ONLY,
    TOKEN,
    Cloud,
    kinds_left,
    kuberay_cloud,
    kuberay_run,
    ray_job_chunks,
)
from resume_checks import segments
from tpu_trainer.fakecloud import parse_scenario
from tpu_trainer.fakecloud.ray_dashboard import FakeRayDashboard, JobScript
from tpu_trainer.infra.ray_jobs import RayJobsClient, submit_body
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.kuberay.run import KubeRayRun
from tpu_trainer.launchers.ray.follow import Deadlines, JobLogs
from tpu_trainer.launchers.ray.job import job_logs
from tpu_trainer.simcloud.kube.raycluster import configure_ray
from tpu_trainer.store.db import RunStatus

pytestmark = pytest.mark.e2e

RUN_ID = "dead0bee"
CUT = "\x1b[36m(RayTrainWorker pid=4411, ip=10.12.3.6)\x1b[0m I1122 completed st"


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[Cloud]:
    with kuberay_cloud(tmp_path, parse_scenario(CPU_ONLY), RUN_ID, (("steps", "12"),)) as made:
        yield made


def _run(cloud: Cloud) -> KubeRayRun:
    return kuberay_run(cloud, RUN_ID, deadlines=Deadlines(start_s=60, finish_s=60, poll_s=0.05))


def _killed_while_following(cloud: Cloud) -> KubeRayRun:
    """What a process that died while following its job leaves: the run recorded as running,
    its RayCluster, segment 1 open, the job submitted and running, the job's first chunks in
    job.log and worker0.log, and a line of job.log cut short."""
    new_run(cloud.store, RUN_ID, LaunchPath.KUBERAY, "tpu7x-4x4x4", project="demo-project")
    dead = _run(cloud)
    kplan = dead.kplan
    dead._write_manifests(kplan)
    dead._provision(kplan)
    dead.book.begin(None)
    job_log, worker0_log = job_logs(dead.run_dir)
    with dead._cluster.dashboard(kplan) as address:
        client = RayJobsClient(address, TOKEN)
        body = submit_body(kplan.entrypoint, kplan.submission_id, kplan.job_env, {})
        submitted = client.submit(body)
        for _ in range(2):  # the job runs: its first two chunks are out
            client.status(submitted)
        with JobLogs(job_log, worker0_log, dead.book.on_line) as logs:
            for raw in client.logs(submitted).splitlines():
                logs.feed(raw)
    with job_log.open("a", encoding="utf-8") as f:
        f.write(CUT)  # the process died in the middle of a line
    cloud.store.update_run(RUN_ID, host="a-host-that-is-gone")  # its process is no more
    return dead


def test_resume_follows_again_the_ray_job_a_dead_process_left_and_keeps_each_line_once(
    cloud: Cloud,
) -> None:
    statuses = ("RUNNING", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED")
    with FakeRayDashboard(TOKEN, JobScript(statuses=statuses, chunks=ray_job_chunks())) as dash:
        configure_ray(cloud.state, dashboard_port=dash.port, token=TOKEN)
        dead = _killed_while_following(cloud)
        held = (dead.run_dir / "worker0.log").read_text().count("completed step: ")
        assert 0 < held < 12
        outcome = _run(cloud).resume()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    assert list(dash.jobs) == [f"tpu-trainer-{RUN_ID}"]  # followed again, never submitted again
    job_log, worker0_log = job_logs(dead.run_dir)
    worker0 = worker0_log.read_text()
    assert [worker0.count(f"completed step: {n},") for n in range(12)] == [1] * 12
    assert [s["step"] for s in cloud.store.steps(RUN_ID)] == list(range(12))
    whole = "".join(ray_job_chunks()).splitlines()
    assert len(job_log.read_text().splitlines()) == len(whole)  # each line once, none cut
    assert CUT not in job_log.read_text()
    assert segments(cloud.store.path, "n, cause, last_step") == [(1, None, 11)]
    assert kinds_left(cloud.state) == set()


def test_resume_without_the_raycluster_ends_the_open_segment_and_runs_a_new_one(
    cloud: Cloud,
) -> None:
    first = JobScript(statuses=("RUNNING",), chunks=ray_job_chunks())
    again = JobScript(statuses=("RUNNING", "SUCCEEDED"), chunks=ray_job_chunks())
    with FakeRayDashboard(TOKEN, first, later=[again]) as dash:
        configure_ray(cloud.state, dashboard_port=dash.port, token=TOKEN)
        dead = _killed_while_following(cloud)
        gone = cloud.runner.run(["kubectl", "delete", "raycluster", dead.kplan.name])
        assert gone.ok, gone.text()
        outcome = _run(cloud).resume()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    assert list(dash.jobs) == [f"tpu-trainer-{RUN_ID}", f"tpu-trainer-{RUN_ID}-2"]
    assert [r[:2] for r in segments(cloud.store.path, "n, cause, last_step")] == [
        (1, "crashed"),
        (2, None),
    ]
    assert kinds_left(cloud.state) == set()


def test_resume_of_a_kuberay_run_without_its_kept_manifest_says_how_to_go_on(
    tmp_path: Path,
) -> None:
    """`tpu-trainer resume RUN` takes KubeRay runs; the image comes from the RayCluster the run
    kept (runs/<run>/raycluster.yaml): without it, a clear error and what to do next."""
    from conftest import CONFIG, RECIPES, RECIPES_ROOT, cli_env, plan_for
    from tpu_trainer.app.plan_json import plan_json
    from tpu_trainer.store.db import RunStore

    store = RunStore(tmp_path / "store" / "runs.db")
    plan = plan_for(RECIPES["classic"])
    device = plan.slice.device_type
    new_run(store, RUN_ID, LaunchPath.KUBERAY, device, plan_json(plan), project="demo-project")
    store.close()
    env = {**cli_env(tmp_path), "TPU_TRAINER_CONFIG": str(CONFIG)}
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "resume", RUN_ID],
        env=env,
        cwd=RECIPES_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Traceback" not in out, out[-3000:]
    assert f"run {RUN_ID} has no RayCluster manifest with an image" in out, out[-3000:]
    assert "--backend kuberay --ray-image IMAGE" in out
