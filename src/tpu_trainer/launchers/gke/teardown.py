"""Giving everything back: after success, failure, Ctrl-C, SIGTERM, or a crash (from the store).

Only resources the store says this tool created are deleted; pools that existed before the run
are never touched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.app.outcome import TeardownReport
from tpu_trainer.app.services import Services
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.gcloud import Gcloud, NodePool, is_not_found
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launchers.gke.nodepool import run_of_tool_pool
from tpu_trainer.launchers.gke.pool_delete import PoolDeleter
from tpu_trainer.launchers.gke.submitter import SUBMITTER_KEY, XPK, Target, submitter_named
from tpu_trainer.store.db import LIVE_STATES, Resource, ResourceState, RunStore

__all__ = ["Teardown", "TeardownReport", "gc_candidates", "orphan_tool_pools"]
"""``TeardownReport`` lives in :mod:`tpu_trainer.app.outcome`; it is named here for the teardowns
that extend GKE's."""

# Delete in this order: what runs on a pool, then the pool, then what the pool needed.
_ORDER = {"workload": 0, "nodepool": 1, "workload-policy": 2}


@dataclass
class Teardown:
    store: RunStore
    gcloud: Gcloud
    xpk: Xpk
    display: Display
    dry_run: bool = field(default=False, kw_only=True)
    kubectl: Kubectl | None = field(default=None, kw_only=True)
    """What deletes an xpk workload (its JobSet), as the run's other kubectl calls reach the
    cluster (None: kubectl through the xpk client's runner)."""
    """Print the deletes, run none, change nothing in the store."""
    poll_seconds: float = field(default=10.0, kw_only=True)
    wait_timeout_s: float = field(default=4 * 3600.0, kw_only=True)
    """How long to wait for a node pool's create to finish before it can be deleted."""
    _listed: dict[tuple[str, str], list[NodePool]] = field(default_factory=dict, init=False)
    """Node pools listed since the last delete, by (cluster, location): the check that a pool
    is gone, a policy's users and the final check ask the same question once."""

    @classmethod
    def of(cls, svc: Services, *, poll_seconds: float, dry_run: bool = False) -> Teardown:
        """The teardown of a GKE run's resources, with the services' gcloud, xpk and kubectl."""
        return cls(
            svc.store,
            svc.gcloud,
            svc.xpk,
            svc.display,
            dry_run=dry_run,
            poll_seconds=poll_seconds,
            kubectl=svc.kubectl,
        )

    def run(self, run_id: str) -> TeardownReport:
        """Delete every live resource of ``run_id``, newest kind first, and verify the pools.
        Every resource is tried, whatever happens to the others."""
        report = TeardownReport()
        self._listed.clear()
        live = self.store.resources(run_id, states=LIVE_STATES)
        for res in sorted(live, key=lambda r: (_ORDER.get(r.kind, 9), -r.id)):
            try:
                self._delete(res, report)
            except TpuTrainerError as e:
                lines = e.message.splitlines() or [type(e).__name__]
                self._failed(res, report, lines[-1][:300])
        try:
            self._verify(run_id, report)
        except TpuTrainerError as e:
            report.failed.append(f"could not list the node pools to check: {e.message[-300:]}")
        return report

    def _delete(self, res: Resource, report: TeardownReport) -> None:
        if res.kind == "nodepool":
            self._delete_pool(res, report)
            return
        if res.kind == "workload-policy":
            self._delete_policy(res, report)
            return
        if res.kind != "workload":
            report.failed.append(f"{res.kind} {res.name}: no way to delete this kind")
            return
        self._mark_deleting(res)
        zone = str(res.detail.get("zone") or res.location)
        # cancelled as the tool that submitted it cancels it: ``xpk workload delete``'s kubectl
        # delete of the JobSet, ``gcluster job cancel``
        submitter = submitter_named(
            str(res.detail.get(SUBMITTER_KEY) or XPK), self.xpk, self.kubectl
        )
        target = Target(
            workload=res.name, cluster=res.cluster or "", project=res.project, zone=zone
        )
        self._settle(res, report, submitter.cancel(target))

    def _mark_deleting(self, res: Resource) -> None:
        if not self.dry_run:
            self.store.resource_state(res.id, ResourceState.DELETING)

    def _settle(self, res: Resource, report: TeardownReport, result: CommandResult) -> None:
        """Record what one delete command did."""
        label = f"{res.kind} {res.name}"
        if not result.ran:
            report.planned.append(label)
        elif result.ok:
            self.store.resource_state(res.id, ResourceState.DELETED)
            report.deleted.append(label)
            self.display.info(f"deleted {label}")
        elif is_not_found(result) or _says_not_found(result.text()):
            note = "never created" if res.state is ResourceState.MAYBE else "already gone"
            self.store.resource_state(res.id, ResourceState.DELETED, note=note)
            report.already_gone.append(label)
        else:
            lines = result.text().splitlines()
            self._failed(res, report, lines[-1][:300] if lines else f"exit {result.code}")

    def _failed(self, res: Resource, report: TeardownReport, problem: str) -> None:
        label = f"{res.kind} {res.name}"
        report.failed.append(f"{label}: {problem}")
        if not self.dry_run:
            keep = res.state if res.state in (ResourceState.CREATING, ResourceState.MAYBE) else None
            self.store.resource_state(
                res.id, keep or ResourceState.CREATED, delete_error=problem[-500:]
            )
        self.display.warn(f"could not delete {label}: {problem}; `tpu-trainer gc` retries")

    def _delete_pool(self, res: Resource, report: TeardownReport) -> None:
        self._listed.clear()
        self._mark_deleting(res)
        deleter = PoolDeleter(
            self.gcloud,
            self.display,
            self.poll_seconds,
            self.wait_timeout_s,
            look=self._listed_pool,
        )
        done = deleter.delete(res.cluster or "", res.location, res.name)
        label = f"{res.kind} {res.name}"
        if done.planned:
            report.planned.append(label)
        elif done.already_gone:
            self.store.resource_state(res.id, ResourceState.DELETED, note="already gone")
            report.already_gone.append(label)
        elif done.gone:
            self.store.resource_state(res.id, ResourceState.DELETED)
            report.deleted.append(label)
            self.display.info(f"deleted {label}")
        else:
            self._failed(res, report, done.problem)

    def _delete_policy(self, res: Resource, report: TeardownReport) -> None:
        """A workload policy goes last, and only when no pool uses it: one another run of the
        store uses becomes that run's to delete; one a pool not made by tpu-trainer uses is
        left (and said so)."""
        label = f"{res.kind} {res.name}"
        for pool in self._policy_users(res):
            if f"nodepool {pool}" in report.planned:
                continue  # a dry run: this run's own pool would be gone by now
            owner = self._owner_of_pool(pool)
            if owner == res.run_id:
                self._failed(res, report, f"still used by this run's node pool {pool}")
                return
            if self.dry_run:
                report.planned.append(f"{label} (kept: node pool {pool} uses it)")
                return
            if owner is not None:
                self.store.hand_over(res.id, owner)
                self.store.resource_state(res.id, ResourceState.CREATED, shared_from=res.run_id)
                report.handed_over.append(f"{label} -> run {owner} (its node pool {pool})")
                self.display.info(
                    f"{label} is also used by run {owner}'s node pool {pool}: that run "
                    "deletes it when it finishes"
                )
                return
            note = f"used by node pool {pool}, which tpu-trainer did not make"
            self.store.resource_state(res.id, ResourceState.LEFT, note=note)
            report.left.append(f"{label}: {note}")
            self.display.warn(f"{label} left in place: {note}")
            return
        self._mark_deleting(res)
        self._settle(res, report, self.gcloud.delete_resource_policy(res.name, res.location))

    def _list_pools(self, cluster: str, region: str) -> list[NodePool]:
        """The cluster's pools, now; kept until the next delete for the questions after it."""
        if (cluster, region) not in self._listed:
            self._listed[(cluster, region)] = self.gcloud.node_pools(cluster, region)
        return self._listed[(cluster, region)]

    def _listed_pool(self, cluster: str, region: str, name: str) -> NodePool | None:
        """A pool just deleted, looked for in a fresh list of the cluster's pools."""
        self._listed.pop((cluster, region), None)
        return next((p for p in self._list_pools(cluster, region) if p.name == name), None)

    def _policy_users(self, res: Resource) -> list[str]:
        run = self.store.run(res.run_id)
        cluster = res.cluster or (run.cluster if run else None)
        if not cluster:
            return []
        pools = self._list_pools(cluster, res.location)
        return [p.name for p in pools if p.placement_policy == res.name]

    def _owner_of_pool(self, pool: str) -> str | None:
        """The run of this store that made node pool ``pool`` (and has not deleted it)."""
        for res in self.store.resources(states=LIVE_STATES):
            if res.kind == "nodepool" and res.name == pool:
                return res.run_id
        prefix = run_of_tool_pool(pool)
        if prefix:
            for run in self.store.runs(limit=100_000):
                if run.id.startswith(prefix):
                    return run.id
        return None

    def _verify(self, run_id: str, report: TeardownReport) -> None:
        run = self.store.run(run_id)
        if run is None or run.pools_before is None or not run.cluster or not run.region:
            return
        if self.dry_run:
            return
        names = [p.name for p in self._list_pools(run.cluster, run.region)]
        ours = {r.name for r in self.store.resources(run_id) if r.kind == "nodepool"}
        for name in names:
            if name in run.pools_before:
                continue
            if name in ours:
                if not any(f.startswith(f"nodepool {name}:") for f in report.failed):
                    report.failed.append(f"nodepool {name} still present after delete")
            else:
                report.extra_pools.append(name)
        missing = set(run.pools_before) - set(names)
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


def _says_not_found(text: str) -> bool:
    lower = text.lower()
    return "not found" in lower or "notfound" in lower
