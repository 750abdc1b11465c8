"""A KubeRay run started or carried on from the CLI, against the cluster of kubectl's context
or, in a rehearsal, the simulated cloud's, whose Ray heads the fake Ray dashboard plays for the
length of the run (``simcloud.ray_rehearsal``)."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tpu_trainer.app.outcome import RunOutcome
    from tpu_trainer.app.services import Services
    from tpu_trainer.launchers.kuberay.run import KubeRayRun
    from tpu_trainer.plan.plan import Plan


HEAD_POLL_S = 10.0
"""Seconds between checks of the head's readiness, unless ``--poll`` asks for less."""


@dataclass(frozen=True)
class KubeRayStart:
    """What a KubeRay run is made of: the run's services (recording under ``run_id``), its
    plan, the request it was started with and the image its RayCluster runs."""

    services: Services
    run_id: str
    plan: Plan
    label: str
    image: str
    lang: str
    retries: tuple[int, int]
    """The preemptions it resumes after, and the transient errors it retries."""
    poll_s: float = HEAD_POLL_S
    """``--poll``: the head's readiness is checked every 10 s and the job's status and log read
    every 5 s (``Deadlines.poll_s``), or every ``poll_s`` when that is shorter."""


def kuberay_run(start: KubeRayStart) -> KubeRayRun:
    from tpu_trainer.launchers.kuberay.manifests import RaySettings
    from tpu_trainer.launchers.kuberay.run import KubeRayRun
    from tpu_trainer.launchers.ray.follow import Deadlines

    services = start.services
    deadlines = Deadlines()
    return KubeRayRun(
        services.store,
        services.runner,
        services.display,
        start.plan,
        start.label,
        RaySettings(image=start.image),
        kubectl=services.kubectl,
        lang=start.lang,
        run_id=start.run_id,
        auto_resume=start.retries[0],
        error_retries=start.retries[1],
        poll_seconds=min(HEAD_POLL_S, start.poll_s),
        deadlines=replace(deadlines, poll_s=min(deadlines.poll_s, start.poll_s)),
    )


def run_on_kuberay(
    start: KubeRayStart, rehearsal: tuple[Path, Path] | None, *, resume: bool = False
) -> RunOutcome:
    """Start (or ``resume``) the run; ``rehearsal``: the scenario file and the folder of its
    fake cloud, whose Ray head plays the scenario's ``ray:`` jobs meanwhile."""
    run = kuberay_run(start)
    with _ray_head(run, rehearsal):
        return run.resume() if resume else run.start()


def _ray_head(run: KubeRayRun, rehearsal: tuple[Path, Path] | None) -> AbstractContextManager[Any]:
    if rehearsal is None:
        return nullcontext()
    from tpu_trainer.fakecloud import load_scenario
    from tpu_trainer.launchers.ray.entry import tpu_args
    from tpu_trainer.simcloud.ray_rehearsal import ray_head

    scenario, workdir = rehearsal
    ray = load_scenario(scenario).ray
    command = " ".join(tpu_args(run.plan))
    return ray_head(workdir / "state.json", ray, command, run.kplan.name, os.environ)
