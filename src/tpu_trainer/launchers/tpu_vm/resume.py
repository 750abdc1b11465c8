"""``tpu-trainer resume RUN`` for a TPU VM run: what is left of the run's VM decides where its
next segment runs.

A run whose process died, or that ended interrupted, carries on under the same ``run_name``, so
MaxText restores its last durable checkpoint. When the store still lists the run's VM and the
cloud reads it READY, the next segment runs on it (nothing is asked of the cloud again); a VM
the cloud took back (PREEMPTED), or any other state, is deleted and the next segment makes one
again as the first time did. Pure but for the one describe call.
"""

from __future__ import annotations

from dataclasses import dataclass

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.launchers.tpu_vm.spec import TpuVmSpec
from tpu_trainer.launchers.tpu_vm.teardown import TPU_VM
from tpu_trainer.store.db import LIVE_STATES, RunStore

READY = "READY"


@dataclass(frozen=True, slots=True)
class VmLeft:
    """The run's VM as ``resume`` finds it."""

    recorded: bool
    """The store lists it as still there."""
    state: str | None
    """What the cloud reads (None: gone, or it could not say)."""

    @property
    def reusable(self) -> bool:
        return self.recorded and self.state == READY

    def say(self, name: str) -> str:
        if self.reusable:
            return f"TPU VM {name} is still READY: the next segment runs on it"
        if not self.recorded:
            return f"TPU VM {name} was given back: the next segment makes it again"
        return f"TPU VM {name} is {self.state or 'gone'}: it is deleted and made again"


def vm_left(store: RunStore, cloud: TpuVmCloud, run_id: str, vm: TpuVmSpec) -> VmLeft:
    """What is left of ``run_id``'s VM: recorded as live in the store, and its cloud state."""
    live = [r for r in store.resources(run_id, states=LIVE_STATES) if r.kind == TPU_VM]
    if not live:
        return VmLeft(recorded=False, state=None)
    try:
        node = cloud.node(vm.name, vm.zone, vm.project)
    except TpuTrainerError:
        return VmLeft(recorded=True, state=None)
    return VmLeft(recorded=True, state=None if node is None else node.state)
