"""Deleting one node pool for good: wait out a create still running, delete, then look.

GKE refuses to delete a pool while its create operation runs (``code=400 ... is currently
creating node pool X. Please wait and try again once it is done``) and the create cannot be
cancelled, so the delete waits for it, showing the time waited. A delete that answers success
is checked with a describe: only a pool that is gone counts as deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tpu_trainer.app.display import Display
from tpu_trainer.infra.gcloud import Gcloud, NodePool, is_not_found
from tpu_trainer.infra.gcloud_errors import XpkFailure, classify
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock, Pending, Tick, wait_until
from tpu_trainer.infra.runner import CommandResult

_GOING_STATES = ("STOPPING", "RECONCILING")


def create_in_progress(result: CommandResult) -> bool:
    """Whether a delete was refused because an operation (the pool's create) still runs."""
    return classify(result) is XpkFailure.BUSY


@dataclass(frozen=True, slots=True)
class PoolDeleted:
    """How a pool delete ended: ``gone`` (deleted or already gone), or why not."""

    gone: bool
    already_gone: bool = False
    planned: bool = False
    """A dry run: the delete was only printed."""
    problem: str = ""


Look = Callable[[str, str, str], NodePool | None]
"""How a pool (cluster, region, name) is looked at after its delete: None once it is gone."""


@dataclass
class PoolDeleter:
    gcloud: Gcloud
    display: Display
    poll_seconds: float = 10.0
    wait_timeout_s: float = 4 * 3600.0
    verify_polls: int = 6
    clock: Clock = SYSTEM_CLOCK
    look: Look | None = None
    """None: a ``node-pools describe``. A teardown lists the cluster's pools instead, and asks
    that list its later questions (a workload policy's users, what is left)."""

    def delete(self, cluster: str, region: str, name: str) -> PoolDeleted:
        """Delete ``name``; wait out its create first if GKE says it still runs."""
        started = self.clock.now()
        while True:
            result = self.gcloud.delete_node_pool(cluster, region, name)
            if not result.ran:
                return PoolDeleted(gone=False, planned=True)
            if result.ok:
                return self._verify(cluster, region, name)
            if is_not_found(result):
                return PoolDeleted(gone=True, already_gone=True)
            if not create_in_progress(result):
                return PoolDeleted(gone=False, problem=_last_line(result))
            problem = self._wait_created(cluster, region, name, started)
            if problem:
                return PoolDeleted(gone=False, problem=problem)

    def _wait_created(self, cluster: str, region: str, name: str, started: float) -> str:
        """Wait while the pool is PROVISIONING. Returns a problem, or "" to delete again."""
        self.display.info(
            f"node pool {name} is still being created (GKE cannot cancel that): waiting for "
            "it to finish, then deleting it"
        )

        def check(tick: Tick) -> str | Pending:
            if tick.elapsed > self.wait_timeout_s:
                return (
                    f"still being created after {tick.elapsed:.0f} s; `tpu-trainer gc` deletes it "
                    "once the create is done"
                )
            pool = self.gcloud.node_pool(cluster, region, name)
            if pool is None or pool.status != "PROVISIONING":
                return ""
            return Pending(f"node pool {name} PROVISIONING (delete waits)")

        return wait_until(
            check,
            interval=self.poll_seconds,
            on_tick=self.display.waiting,
            clock=self.clock,
            started=started,
        )

    def _verify(self, cluster: str, region: str, name: str) -> PoolDeleted:
        """After a delete that answered success: is the pool really gone?"""
        look = self.look or self.gcloud.node_pool
        pool: NodePool | None = None
        for attempt in range(self.verify_polls):
            pool = look(cluster, region, name)
            if pool is None:
                return PoolDeleted(gone=True)
            if pool.status not in _GOING_STATES:
                break
            if attempt < self.verify_polls - 1:
                self.clock.sleep(self.poll_seconds)
        status = pool.status if pool is not None else "?"
        return PoolDeleted(
            gone=False, problem=f"the delete answered success but the pool is still {status}"
        )


def _last_line(result: CommandResult) -> str:
    lines = [line for line in result.text().splitlines() if line.strip()]
    return lines[-1][:300] if lines else f"exit {result.code}"
