"""Giving a TPU VM back: after success, failure, Ctrl-C, SIGTERM, or a crash (from the store).

The VM (and its queued resource, when it was asked for through one) is written to the store
before the create call; teardown deletes every live one the store lists, then checks that the
VM is really gone. Nothing the store does not list is ever deleted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tpu_trainer.app.display import Display
from tpu_trainer.app.outcome import TeardownReport
from tpu_trainer.infra.gcloud import is_not_found
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.store.db import LIVE_STATES, Resource, ResourceState, RunStore

TPU_VM = "tpu-vm"
QUEUED_RESOURCE = "queued-resource"
_ORDER = {TPU_VM: 0, QUEUED_RESOURCE: 1}
"""The VM first, then the request that holds it."""


@dataclass
class TpuVmTeardown:
    store: RunStore
    cloud: TpuVmCloud
    display: Display
    dry_run: bool = False
    """Print the deletes, run none, change nothing in the store."""

    def run(self, run_id: str) -> TeardownReport:
        """Delete every live TPU VM and queued resource of ``run_id``, then verify."""
        report = TeardownReport()
        live = self.store.resources(run_id, states=LIVE_STATES)
        for res in sorted(live, key=lambda r: (_ORDER.get(r.kind, 9), -r.id)):
            self._delete(res, report)
        self._verify(run_id, report)
        return report

    def _delete(self, res: Resource, report: TeardownReport) -> None:
        label = f"{res.kind} {res.name}"
        deleter: dict[str, Callable[[], CommandResult]] = {
            TPU_VM: lambda: self.cloud.delete(res.name, res.location, res.project),
            QUEUED_RESOURCE: lambda: self.cloud.delete_queued(res.name, res.location, res.project),
        }
        if res.kind not in deleter:
            report.failed.append(f"{label}: no way to delete this kind here")
            return
        if not self.dry_run:
            self.store.resource_state(res.id, ResourceState.DELETING)
        result = deleter[res.kind]()
        if not result.ran:
            report.planned.append(label)
        elif result.ok:
            self.store.resource_state(res.id, ResourceState.DELETED)
            report.deleted.append(label)
            self.display.info(f"deleted {label}")
        elif is_not_found(result):
            self.store.resource_state(res.id, ResourceState.DELETED, note="already gone")
            report.already_gone.append(label)
        else:
            self.store.resource_state(
                res.id, ResourceState.CREATED, delete_error=result.text()[-500:]
            )
            last = result.text().splitlines()[-1:] or [f"exit {result.code}"]
            report.failed.append(f"{label}: {last[0]}")
            self.display.warn(f"could not delete {label}; `tpu-trainer gc` will retry")

    def _verify(self, run_id: str, report: TeardownReport) -> None:
        if self.dry_run:
            return
        for res in self.store.resources(run_id):
            if res.kind != TPU_VM or res.state is not ResourceState.DELETED:
                continue
            try:
                still = self.cloud.node(res.name, res.location, res.project)
            except Exception as e:  # a failed check is reported, not raised
                report.failed.append(f"{TPU_VM} {res.name}: could not check it is gone: {e}")
                continue
            if still is not None:
                self.store.resource_state(res.id, ResourceState.CREATED)
                report.failed.append(f"{TPU_VM} {res.name} still present ({still.state})")
