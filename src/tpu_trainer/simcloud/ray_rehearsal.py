"""A KubeRay rehearsal's Ray head: the fake Ray dashboard (the Jobs API, ``fakecloud.ray_dashboard``)
on 127.0.0.1, served as the dashboard port of the head pods the emulated KubeRay operator makes,
so the real ``kubectl port-forward`` reaches it, playing the jobs the scenario's ``ray:`` part
describes. It runs in a daemon thread and stops when the ``with`` block ends."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from tpu_trainer.fakecloud import maxtext_log as mlog
from tpu_trainer.fakecloud.ray_dashboard import (
    FakeRayDashboard,
    JobScript,
    ray_job_log,
    reclaimed_jobs,
)
from tpu_trainer.fakecloud.ray_scenario import RayScenario
from tpu_trainer.simcloud.kube.node_shutdown import reclaim_workers
from tpu_trainer.simcloud.kube.raycluster import configure_ray

FAILED = "Job failed due to an application error, last available logs (truncated to 20,000 chars)"
"""What Ray says of a job whose entrypoint exited non-zero."""
_RUNNING = ("PENDING", "RUNNING", "RUNNING", "RUNNING")


def job_scripts(
    ray: RayScenario, command: str, on_reclaim: Callable[[], None]
) -> tuple[JobScript, ...]:
    """The jobs a run's dashboard plays, in turn: ``command`` is the run's MaxText arguments
    (its ``steps=``, ``checkpoint_period=``, ``run_name=``)."""
    if ray.ends == "preempted":
        assert ray.after_step is not None  # noqa: S101 (the scenario's schema checks it)
        return reclaimed_jobs(ray.after_step, command, on_reclaim)
    chunks = ray_job_log(mlog.default_log(ray.log, command))
    if ray.ends == "failed":
        return (JobScript((*_RUNNING, "FAILED"), chunks, message=FAILED, driver_exit_code=1),)
    return (JobScript((*_RUNNING, "SUCCEEDED"), chunks),)


@contextmanager
def ray_head(
    state: Path, ray: RayScenario, command: str, cluster: str, env: Mapping[str, str]
) -> Iterator[FakeRayDashboard]:
    """The dashboard of RayCluster ``cluster``'s head over the fake cloud's ``state`` file,
    answering the token the operator's Secret holds (the caller's ``RAY_AUTH_TOKEN`` when it
    has one, as the launcher sends that first)."""
    token = env.get("RAY_AUTH_TOKEN") or secrets.token_hex(16)

    def reclaim() -> None:  # the cloud takes the slice back under the run's RayCluster
        reclaim_workers(state, cluster)

    first, *later = job_scripts(ray, command, reclaim)
    with FakeRayDashboard(token, first, later=later) as dashboard:
        configure_ray(
            state,
            dashboard_port=dashboard.port,
            token=token,
            head_ready=ray.head_ready,
            replace_ended_workers=ray.replace_ended_workers,
        )
        yield dashboard
