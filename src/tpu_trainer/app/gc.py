"""``cleanup`` and ``gc``: delete what crashed runs left, try everything, then report.

Every run and every sweep is tried before anything is reported, so one resource that cannot be
deleted never keeps the others (or the orphan sweep) from going. A dry run prints the deletes
and changes nothing, in the cloud or in the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpu_trainer.app.services import Services
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.launchers.gke.pool_delete import PoolDeleter
from tpu_trainer.launchers.gke.teardown import (
    RunTeardown,
    TeardownReport,
    gc_candidates,
    orphan_tool_pools,
)
from tpu_trainer.store.db import RunStatus


@dataclass
class CleanupResult:
    reports: dict[str, TeardownReport] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    """What could not be deleted (or checked), and why."""
    orphans_deleted: list[str] = field(default_factory=list)
    orphans_planned: list[str] = field(default_factory=list)
    marked_gone: list[str] = field(default_factory=list)
    """Runs whose process had ended without finishing, now marked failed."""

    @property
    def clean(self) -> bool:
        return not self.problems and all(r.clean for r in self.reports.values())

    def left(self) -> list[str]:
        """Everything still there, with why."""
        out = list(self.problems)
        for run_id, report in self.reports.items():
            out += [f"run {run_id}: {line}" for line in report.failed]
        return out


def teardown_for(svc: Services, launcher: str, dry_run: bool, poll_s: float) -> RunTeardown:
    """The teardown that knows the kinds of resource a launcher makes."""
    from tpu_trainer.launchers.gke.teardown import Teardown

    if launcher == "tpu-vm":
        from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
        from tpu_trainer.launchers.tpu_vm.teardown import TpuVmTeardown

        return TpuVmTeardown(svc.store, TpuVmCloud(svc.runner), svc.display, dry_run=dry_run)
    if launcher == "kuberay":
        from tpu_trainer.launchers.kuberay.cluster import KubeRayTeardown

        return KubeRayTeardown(
            svc.store, svc.gcloud, svc.xpk, svc.display, svc.kubectl, dry_run=dry_run
        )
    return Teardown(
        svc.store, svc.gcloud, svc.xpk, svc.display, dry_run=dry_run, poll_seconds=poll_s
    )


@dataclass
class Cleaner:
    svc: Services
    dry_run: bool = False
    poll_seconds: float = 10.0
    result: CleanupResult = field(default_factory=CleanupResult)

    def runs(self, run_ids: list[str]) -> None:
        """Tear down each run (refusing one whose process still runs)."""
        store = self.svc.store
        for run_id in run_ids:
            row = store.run(run_id)
            if row is None:
                raise InputError(f"no run {run_id} in {store.path}", fix="see `tpu-trainer runs`")
            if row.process_alive():
                raise InputError(
                    f"run {run_id} is still running (pid {row.pid})",
                    fix="stop it with Ctrl-C; it cleans up after itself",
                )
            self._one(run_id, row.launcher, row.status)

    def _one(self, run_id: str, launcher: str, status: RunStatus) -> None:
        self.svc.current.run_id = run_id
        teardown = teardown_for(self.svc, launcher, self.dry_run, self.poll_seconds)
        try:
            report = teardown.run(run_id)
        except TpuTrainerError as e:
            self.result.problems.append(f"run {run_id}: {e.message}")
            return
        self.result.reports[run_id] = report
        if not self.dry_run and status is RunStatus.RUNNING:
            self.svc.store.finish_run(run_id, RunStatus.FAILED, "process gone; cleaned up")

    def gc(self, cluster: str, region: str) -> None:
        """Every run whose process is gone, the orphan pools, then those runs again if the
        sweep freed what they were waiting for; last, runs that died before making anything."""
        store = self.svc.store
        candidates = gc_candidates(store)
        rows = {r.id: r for r in store.runs(limit=100_000)}
        for run_id in candidates:
            self._one(run_id, rows[run_id].launcher, rows[run_id].status)
        self.sweep_pools(cluster, region)
        retry = [r for r, rep in self.result.reports.items() if not rep.clean]
        if retry and self.result.orphans_deleted:
            for run_id in retry:
                del self.result.reports[run_id]
                self._one(run_id, rows[run_id].launcher, RunStatus.FAILED)
        if not self.dry_run:
            self.result.marked_gone = store.mark_gone_runs()

    def sweep_pools(self, cluster: str, region: str) -> None:
        """Node pools named by tpu-trainer for runs of this store whose process is gone."""
        try:
            pools = self.svc.gcloud.node_pools(cluster, region)
        except TpuTrainerError as e:
            self.result.problems.append(f"could not list node pools: {e.message[-300:]}")
            return
        deleter = PoolDeleter(self.svc.gcloud, self.svc.display, self.poll_seconds)
        planned = {x for r in self.result.reports.values() for x in r.planned}
        for name in orphan_tool_pools(self.svc.store, [p.name for p in pools]):
            if f"nodepool {name}" in planned:
                continue  # a dry run: its run's teardown already prints this delete
            try:
                done = deleter.delete(cluster, region, name)
            except TpuTrainerError as e:
                self.result.problems.append(f"orphan node pool {name}: {e.message[-300:]}")
                continue
            if done.planned:
                self.result.orphans_planned.append(name)
            elif done.gone:
                self.result.orphans_deleted.append(name)
            else:
                self.result.problems.append(f"orphan node pool {name}: {done.problem}")
