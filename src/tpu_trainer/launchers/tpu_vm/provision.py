"""Creating a run's TPU VM and waiting until every worker can be reached.

The VM (and its queued resource) is written to the store *before* the create call, so a run
killed at any moment leaves a record ``tpu-trainer cleanup`` can act on. A create that fails
leaves nothing behind unless the cloud says otherwise (then teardown deletes it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from tpu_trainer.app.display import Display
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.poll import Expired, Pending, SystemClock, Tick, wait_until
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud, created_node
from tpu_trainer.launchers.tpu_vm.spec import (
    DEAD_STATES,
    QUEUED_DEAD,
    Provisioning,
    TpuNode,
    TpuVmSpec,
)
from tpu_trainer.launchers.tpu_vm.teardown import QUEUED_RESOURCE, TPU_VM
from tpu_trainer.store.db import ResourceState, RunStore

T = TypeVar("T")


class ProvisionError(TpuTrainerError):
    """The TPU VM could not be made ready."""


# Markers in a failed create's text -> what to do next (first match wins).
_CREATE_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (
        ("no more capacity", '"code": 8', "RESOURCE_EXHAUSTED", "Insufficient reserved capacity"),
        "no capacity in {zone} now: try another zone, a queued resource (waits for capacity), "
        "spot capacity, or a reservation (--reserved)",
    ),
    (
        ("INVALID_ARGUMENT", "was not found in zone", "not supported"),
        "check the accelerator type and runtime version offered in {zone}: `gcloud compute tpus "
        "accelerator-types list --zone={zone}` and `gcloud compute tpus versions list "
        "--zone={zone}`",
    ),
    (
        ("PERMISSION_DENIED", "Permission denied"),
        "enable the Cloud TPU API (`gcloud services enable tpu.googleapis.com`) and check your "
        "TPU quota and roles in the project",
    ),
)


def create_fix(text: str, zone: str) -> str:
    for markers, fix in _CREATE_FIXES:
        if any(m in text for m in markers):
            return fix.format(zone=zone)
    return "see the gcloud message above; `tpu-trainer show RUN` lists every command run"


@dataclass
class VmProvisioner:
    store: RunStore
    cloud: TpuVmCloud
    display: Display
    run_id: str
    vm: TpuVmSpec
    poll_seconds: float = 15.0
    timeout_s: float = 3600.0
    sleep: Callable[[float], None] = time.sleep

    def provision(self) -> TpuNode:
        """Record, create, wait until READY and check the VM is the one asked for."""
        vm, store = self.vm, self.store
        ids: list[tuple[str, int]] = []
        if vm.queued:
            ids.append(
                (
                    QUEUED_RESOURCE,
                    store.resource_intent(
                        self.run_id,
                        kind=QUEUED_RESOURCE,
                        name=vm.queued_resource,
                        project=vm.project,
                        location=vm.zone,
                        detail={"node": vm.name},
                    ),
                )
            )
        ids.append(
            (
                TPU_VM,
                store.resource_intent(
                    self.run_id,
                    kind=TPU_VM,
                    name=vm.name,
                    project=vm.project,
                    location=vm.zone,
                    detail={
                        "accelerator_type": vm.accelerator_type,
                        "runtime_version": vm.runtime_version,
                        "provisioning": vm.provisioning.value,
                    },
                ),
            )
        )
        self.display.info(
            f"creating TPU VM {vm.name} ({vm.accelerator_type}, {vm.runtime_version}) in {vm.zone}"
        )
        result = self.cloud.create(vm)
        if not result.ok:
            self._after_failed_create(ids)
            raise ProvisionError(_failure("create", result), fix=create_fix(result.text(), vm.zone))
        for _, rid in ids:
            store.resource_state(rid, ResourceState.CREATED)
        if vm.queued:
            self._wait_queued()
        printed = created_node(result)
        if (
            printed is not None
            and printed.name == vm.name
            and printed.state == "READY"
            and vm.provisioning is not Provisioning.SPOT
        ):
            node = printed  # the create's own answer: no need to ask again
        else:
            # spot capacity can be taken back the moment it is READY: look once more
            node = self._wait_ready()
        self._check(node)
        return node

    def _after_failed_create(self, ids: list[tuple[str, int]]) -> None:
        """Keep a record only of what the cloud holds after all."""
        vm = self.vm
        for kind, rid in ids:
            try:
                exists = (
                    self.cloud.node(vm.name, vm.zone, vm.project) is not None
                    if kind == TPU_VM
                    else self.cloud.queued_state(vm.queued_resource, vm.zone, vm.project)
                    is not None
                )
            except TpuTrainerError:
                exists = True  # unknown: keep it for teardown, which checks again
            state = ResourceState.CREATED if exists else ResourceState.ABSENT
            self.store.resource_state(rid, state)

    def _wait_queued(self) -> None:
        vm = self.vm

        def check(_tick: Tick) -> bool | Pending:
            state = self.cloud.queued_state(vm.queued_resource, vm.zone, vm.project)
            if state == "ACTIVE":
                return True
            if state is None or state in QUEUED_DEAD:
                raise ProvisionError(
                    f"queued resource {vm.queued_resource} is {state or 'gone'}",
                    fix=create_fix("no more capacity", vm.zone),
                )
            return Pending(f"queued resource {state}")

        self._wait(check)

    def _wait_ready(self) -> TpuNode:
        vm = self.vm

        def check(_tick: Tick) -> TpuNode | Pending:
            node = self.cloud.node(vm.name, vm.zone, vm.project)
            if node is not None and node.state == "READY":
                return node
            if node is not None and node.state in DEAD_STATES:
                raise ProvisionError(
                    f"TPU VM {vm.name} is {node.state} instead of READY",
                    fix="run again (a preempted VM cannot be resumed); the VM is deleted now",
                )
            return Pending(f"{vm.name} {node.state if node else '-'}")

        return self._wait(check)

    def _wait(self, check: Callable[[Tick], T | Pending]) -> T:
        found = wait_until(
            check,
            interval=self.poll_seconds,
            timeout=self.timeout_s,
            on_tick=self.display.waiting,
            clock=SystemClock(self.sleep),
        )
        if isinstance(found, Expired):
            raise ProvisionError(
                f"TPU VM {self.vm.name} not ready after {self.timeout_s:.0f} s ({found.last.label})",
                fix="try another zone or a longer wait; the VM is deleted now",
            )
        return found

    def _check(self, node: TpuNode) -> None:
        vm = self.vm
        wrong = []
        if node.runtime_version and node.runtime_version != vm.runtime_version:
            wrong.append(f"runtime {node.runtime_version} (asked {vm.runtime_version})")
        if node.accelerator_type and node.accelerator_type != vm.accelerator_type:
            wrong.append(f"accelerator {node.accelerator_type} (asked {vm.accelerator_type})")
        if len(node.workers) != vm.workers:
            wrong.append(f"{len(node.workers)} workers ({vm.slice} has {vm.workers} hosts)")
        if wrong:
            raise ProvisionError(
                f"TPU VM {vm.name} is not what was asked for: {'; '.join(wrong)}",
                fix="the VM is deleted now; check the zone's offer and run again",
            )


def _failure(verb: str, result: CommandResult) -> str:
    lines = [ln for ln in result.stderr.strip().splitlines() if ln.strip()]
    errors = [i for i, ln in enumerate(lines) if ln.startswith("ERROR:")]
    shown = lines[errors[0] :] if errors else lines[-5:]
    return f"TPU VM {verb} failed (exit {result.code}): " + " ".join(s.strip() for s in shown)[:800]
