"""Giving everything back: after success, failure, Ctrl-C, SIGTERM, or a crash (from the store).

Only resources the store says this tool created are deleted; pools that existed before the run
are never touched.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

from tpu_trainer.app.display import Display
from tpu_trainer.infra.gcloud import Gcloud, is_not_found
from tpu_trainer.infra.xpk import Xpk, workload_delete_argv
from tpu_trainer.plan.nodepool import run_of_tool_pool
from tpu_trainer.store.db import LIVE_STATES, Resource, ResourceState, RunStatus, RunStore

# Delete in this order: what runs on a pool, then the pool, then what the pool needed.
_ORDER = {"workload": 0, "nodepool": 1, "workload-policy": 2}


@dataclass
class TeardownReport:
    deleted: list[str] = field(default_factory=list)
    already_gone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    extra_pools: list[str] = field(default_factory=list)
    """Pools present now that were not there before the run and are not the tool's."""

    @property
    def clean(self) -> bool:
        return not self.failed


@dataclass
class Teardown:
    store: RunStore
    gcloud: Gcloud
    xpk: Xpk
    display: Display

    def run(self, run_id: str) -> TeardownReport:
        """Delete every live resource of ``run_id``, newest kind first, and verify the pools."""
        report = TeardownReport()
        live = self.store.resources(run_id, states=LIVE_STATES)
        for res in sorted(live, key=lambda r: (_ORDER.get(r.kind, 9), -r.id)):
            self._delete(res, report)
        self._verify(run_id, report)
        return report

    def _delete(self, res: Resource, report: TeardownReport) -> None:
        label = f"{res.kind} {res.name}"
        self.store.resource_state(res.id, ResourceState.DELETING)
        if res.kind == "workload":
            zone = str(res.detail.get("zone") or res.location)
            result = self.xpk.run(
                workload_delete_argv(
                    workload=res.name, cluster=res.cluster or "", project=res.project, zone=zone
                ),
                timeout=1800,
            )
        elif res.kind == "nodepool":
            result = self.gcloud.delete_node_pool(res.cluster or "", res.location, res.name)
        elif res.kind == "workload-policy":
            result = self.gcloud.delete_resource_policy(res.name, res.location)
        else:
            report.failed.append(f"{label}: no way to delete this kind")
            return
        if result.ok:
            self.store.resource_state(res.id, ResourceState.DELETED)
            report.deleted.append(label)
            self.display.info(f"deleted {label}")
        elif is_not_found(result) or "not found" in result.text().lower():
            self.store.resource_state(res.id, ResourceState.DELETED, note="already gone")
            report.already_gone.append(label)
        else:
            self.store.resource_state(
                res.id, ResourceState.CREATED, delete_error=result.text()[-500:]
            )
            report.failed.append(f"{label}: {result.text().splitlines()[-1:] or result.code}")
            self.display.warn(f"could not delete {label}; `tpu-trainer cleanup` will retry")

    def _verify(self, run_id: str, report: TeardownReport) -> None:
        run = self.store.run(run_id)
        if run is None or run.pools_before is None or not run.cluster or not run.region:
            return
        pools = self.gcloud.node_pools(run.cluster, run.region)
        ours = {r.name for r in self.store.resources(run_id) if r.kind == "nodepool"}
        for pool in pools:
            if pool.name in run.pools_before:
                continue
            if pool.name in ours:
                report.failed.append(f"nodepool {pool.name} still present after delete")
            else:
                report.extra_pools.append(pool.name)
        missing = set(run.pools_before) - {p.name for p in pools}
        if missing:
            self.display.warn(
                f"pools that existed before the run are gone: {sorted(missing)} "
                "(not deleted by tpu-trainer)"
            )


def gc_candidates(store: RunStore) -> list[str]:
    """Runs that hold live resources and whose process is gone."""
    runs = {r.id: r for r in store.runs(limit=10_000)}
    out = []
    for res in store.resources(states=LIVE_STATES):
        run = runs.get(res.run_id)
        if run is None or run.process_alive():
            continue
        if res.run_id not in out:
            out.append(res.run_id)
    return out


def orphan_tool_pools(store: RunStore, pool_names: list[str]) -> list[str]:
    """Pools named by the tool (``tpt-<run>-...``) for runs of *this* store whose process is gone.

    A tool-named pool of a run this store does not know (another user's machine) is never
    returned: the tool deletes only what it created.
    """
    runs = store.runs(limit=100_000)
    dead = {r.id[:8] for r in runs if not r.process_alive()}
    alive = {r.id[:8] for r in runs if r.process_alive()}
    return [n for n in pool_names if (p := run_of_tool_pool(n)) and p in dead and p not in alive]


class Interrupted(BaseException):
    """SIGTERM arrived: unwind like Ctrl-C so teardown runs."""


class RunTeardown(Protocol):
    """Deletes what one run made (each launcher has its own)."""

    def run(self, run_id: str) -> TeardownReport: ...


@contextmanager
def teardown_always(
    store: RunStore,
    run_id: str,
    teardown: RunTeardown,
    before_teardown: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Run the body; whatever happens (error, Ctrl-C, SIGTERM), tear the run down after.

    ``before_teardown`` (e.g. stopping a program by its process id) is called first when the
    body did not finish; its own failure never keeps the teardown from running."""

    def on_term(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
        raise Interrupted

    previous = signal.signal(signal.SIGTERM, on_term)
    status = RunStatus.FAILED
    error: str | None = None
    report: TeardownReport | None = None
    finished = False
    try:
        yield
        status, finished = RunStatus.SUCCEEDED, True
    except (KeyboardInterrupt, Interrupted):
        status, error = RunStatus.CANCELLED, "interrupted"
        raise
    except BaseException as e:
        error = str(e)[:2000]
        raise
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            if not finished and before_teardown is not None:
                before_teardown()
        except Exception:  # noqa: S110 (the teardown that follows removes what still runs)
            pass
        finally:
            try:
                report = teardown.run(run_id)
            finally:
                signal.signal(signal.SIGTERM, previous)
                _finish(store, run_id, status, error, report)


def _finish(
    store: RunStore,
    run_id: str,
    status: RunStatus,
    error: str | None,
    report: TeardownReport | None,
) -> None:
    current = store.run(run_id)
    if current is None:
        return
    if report is None or not report.clean:
        failed = "; ".join(report.failed) if report else "teardown did not run to the end"
        note = f"teardown incomplete: {failed}"
        store.finish_run(
            run_id, RunStatus.FAILED, "; ".join(x for x in (current.error or error, note) if x)
        )
    elif current.status is RunStatus.RUNNING:
        store.finish_run(run_id, status, error)
