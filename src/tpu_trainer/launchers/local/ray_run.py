"""A recipe as a Ray job on a Ray head on this machine: the same entry script as on KubeRay
(``JaxTrainer`` running MaxText's trainer), with CPU workers (``use_tpu=False``) and the
recipe's arguments made for a CPU, as the local run makes them.

The head must be able to read the entry script from this machine's disk (it is written into
the run's folder), and its Python must hold Ray and MaxText: the Ray runtime
(:func:`tpu_trainer.runtime.ray_runtime.install_ray`) is such a Python.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.launcher import Launcher, RunRecord
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.results import Versions, package_versions
from tpu_trainer.app.watchdog_run import plan_watchdog
from tpu_trainer.infra.ray_jobs import RayJobsClient
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.local.run import CPU_SLICE, ENTRY_MODULE, local_args
from tpu_trainer.launchers.ray.entry import (
    ENTRY_SCRIPT,
    JOB_ENV,
    EntrySpec,
    JaxScaling,
    entrypoint,
    relative_base_config,
    render_entry,
    submission_id,
)
from tpu_trainer.launchers.ray.follow import Deadlines, Waiting
from tpu_trainer.launchers.ray.job import JobRequest, RayJob
from tpu_trainer.plan.plan import Plan
from tpu_trainer.runtime.manager import RAY, runtime_python
from tpu_trainer.store.db import RunStatus, RunStore

_PTH_FOLDER = re.compile(r"""addsitedir\(['"]([^'"]+)['"]\)|^(/\S+)$""")


def cpu_entry(plan: Plan, run_dir: Path, run_id: str, num_workers: int = 1) -> EntrySpec:
    """The entry script of a run on CPU workers (pure)."""
    return EntrySpec(
        run_id=run_id,
        title=f"{plan.model} on {num_workers} CPU worker(s)",
        module=ENTRY_MODULE,
        base_config=relative_base_config(plan.recipe.entry.base_config),
        args=tuple(local_args(plan, run_dir, run_id)),
        scaling=JaxScaling.on_cpu(num_workers),
        worker_env={"JAX_PLATFORMS": "cpu"},
        run_name=run_id,
        storage_path=str(run_dir / "ray"),
    )


def versions_of(python: Path) -> Versions:
    """MaxText's and JAX's versions as the Python's environment sees them (its site-packages and
    the folders its ``.pth`` files add), read from package metadata without starting it."""
    sites = sorted(python.parent.parent.glob("lib/python3*/site-packages"))
    paths = [str(s) for s in sites]
    for pth in (p for s in sites for p in s.glob("*.pth")):
        for line in pth.read_text(encoding="utf-8", errors="replace").splitlines():
            m = _PTH_FOLDER.search(line.strip())
            folder = (m[1] or m[2]) if m else None
            if folder and Path(folder).is_dir():
                paths.append(folder)
    if not paths:
        return Versions()
    found = package_versions(paths)
    return Versions(framework=found.get("maxtext", ""), jax=found.get("jax", ""))


@dataclass
class LocalRayRun(Launcher):
    """A Ray job on a Ray head of this machine: entry script -> Ray job -> results."""

    launch_path = LaunchPath.RAY
    store: RunStore
    display: Display
    plan: Plan
    request: str
    address: str
    """The head's dashboard, ``http://127.0.0.1:8265``."""
    token: str | None = field(default=None, repr=False)
    python: Path | None = None
    """The interpreter the head runs the entry script with (default: the Ray runtime's)."""
    num_workers: int = 1
    lang: str = "zh"
    run_id: str = field(kw_only=True)
    deadlines: Deadlines = field(default_factory=lambda: Deadlines(start_s=300.0, poll_s=2.0))

    # ---- the template's parts ------------------------------------------------------------
    def _record(self) -> RunRecord:
        plan = self.plan
        return RunRecord(
            model=plan.model,
            device_type=plan.slice.device_type,
            precision=plan.precision.value,
            plan_json=plan_json(plan),
        )

    def _headline(self) -> str:
        return f"run {self.run_id}: {self.plan.model} as a Ray job at {self.address}"

    def _new_outcome(self) -> RunOutcome:
        return RunOutcome(self.run_id, RunStatus.RUNNING, workload=submission_id(self.run_id))

    def _teardown(self) -> None:
        return None  # the head is not the run's: the job ends with the run

    def _launch(self, *, outcome: RunOutcome) -> None:
        python = self.python or runtime_python(RAY)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        script = self.run_dir / ENTRY_SCRIPT
        spec = cpu_entry(self.plan, self.run_dir, self.run_id, self.num_workers)
        script.write_text(render_entry(spec), encoding="utf-8")
        client = RayJobsClient(self.address, self.token)
        version = client.version().get("ray_version", "?")
        self.display.info(f"Ray {version} at {self.address}")
        stages = self.stages
        job = RayJob(
            stages,
            self.plan,
            self.run_dir,
            self.lang,
            versions_of(python),
            redactor=Redactor(extra=[self.token] if self.token else []),
        )
        request = JobRequest(
            entrypoint=entrypoint(str(python), str(script)),
            submission_id=submission_id(self.run_id),
            env=JOB_ENV,
            waiting=Waiting(
                shape=f"{self.num_workers} CPU worker(s)",
                fix="give the head more CPUs (`ray start --head --num-cpus=N`) or stop its "
                "other jobs",
            ),
            deadlines=self.deadlines,
            watchdog=plan_watchdog(self.store, self.plan, CPU_SLICE.device_type),
        )
        result = job.run(client, request)
        outcome.error = result.error
        if result.recorded is not None:
            outcome.metrics, outcome.readme = result.recorded.metrics, result.recorded.readme
