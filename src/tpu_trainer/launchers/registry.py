"""Which class launches each launch path, and which teardown gives back each kind of recorded
resource. Adding a launch path is one folder under ``launchers/`` and one line in each table."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.app.launcher import Launcher
from tpu_trainer.app.services import Services
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke.run import GkeRun
from tpu_trainer.launchers.gke.teardown import Teardown
from tpu_trainer.launchers.kuberay.cluster import CONFIGMAP, RAYCLUSTER, KubeRayTeardown
from tpu_trainer.launchers.kuberay.run import KubeRayRun
from tpu_trainer.launchers.local.ray_run import LocalRayRun
from tpu_trainer.launchers.local.run import LocalRun
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.launchers.tpu_vm.run import TpuVmRun
from tpu_trainer.launchers.tpu_vm.teardown import QUEUED_RESOURCE, TPU_VM, TpuVmTeardown

LAUNCHERS: dict[LaunchPath, type[Launcher]] = {
    LaunchPath.XPK: GkeRun,
    LaunchPath.TPU_VM: TpuVmRun,
    LaunchPath.KUBERAY: KubeRayRun,
    LaunchPath.LOCAL: LocalRun,
    LaunchPath.RAY: LocalRayRun,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteOptions:
    dry_run: bool = False
    """Print the deletes, run none, change nothing in the store."""
    poll_seconds: float = 10.0


Deleter = Callable[[Services, DeleteOptions], RunTeardown]
"""Builds the teardown that gives back a kind of recorded resource."""


def _gke(svc: Services, opts: DeleteOptions) -> RunTeardown:
    return Teardown.of(svc, poll_seconds=opts.poll_seconds, dry_run=opts.dry_run)


def _tpu_vm(svc: Services, opts: DeleteOptions) -> RunTeardown:
    return TpuVmTeardown(svc.store, TpuVmCloud(svc.runner), svc.display, dry_run=opts.dry_run)


def _kuberay(svc: Services, opts: DeleteOptions) -> RunTeardown:
    return KubeRayTeardown(
        svc.store, svc.gcloud, svc.xpk, svc.display, svc.kubectl, dry_run=opts.dry_run
    )


DELETERS: dict[str, Deleter] = {
    "workload": _gke,
    "nodepool": _gke,
    "workload-policy": _gke,
    TPU_VM: _tpu_vm,
    QUEUED_RESOURCE: _tpu_vm,
    RAYCLUSTER: _kuberay,
    CONFIGMAP: _kuberay,
}
_COVERS: tuple[Deleter, ...] = (_kuberay, _tpu_vm, _gke)
"""When a run recorded kinds of several deleters, the first here (KubeRay's also deletes GKE's
kinds); a run that recorded none gets GKE's, which checks the node pools it noted."""


def deleter_for(svc: Services, kinds: Iterable[str], opts: DeleteOptions) -> RunTeardown:
    """The teardown that gives back every kind of resource a run recorded."""
    found = {DELETERS[k] for k in kinds if k in DELETERS}
    chosen = next((d for d in _COVERS if d in found), _gke)
    return chosen(svc, opts)
