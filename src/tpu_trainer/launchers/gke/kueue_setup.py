"""Check and repair Kueue and xpk configuration on the cluster (effects; decisions in plan.kueue)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from tpu_trainer.app.display import Display
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandFailed, CommandRunner
from tpu_trainer.launchers.gke.kueue import (
    CLUSTER_QUEUE,
    CONFIGMAP_NAMESPACE,
    LOCAL_QUEUE,
    Finding,
    configmap_name,
    kueue_findings,
)
from tpu_trainer.plan.slices import Slice


@dataclass(frozen=True, slots=True)
class KueueState:
    flavor: Mapping[str, Any] | None
    cluster_queue: Mapping[str, Any] | None
    configmap_data: Mapping[str, str] | None
    local_queue_exists: bool = True


def read_state(kubectl: Kubectl, cluster: str, slice_: Slice, num_slices: int) -> KueueState:
    """The three objects xpk's admission depends on, read in parallel."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        flavor = pool.submit(kubectl.get, "resourceflavor", slice_.kueue_flavor(num_slices))
        queue = pool.submit(kubectl.get, "clusterqueue", CLUSTER_QUEUE)
        local = pool.submit(kubectl.get, "localqueue", LOCAL_QUEUE, CONFIGMAP_NAMESPACE)
        configmap = pool.submit(
            kubectl.get, "configmap", configmap_name(cluster), CONFIGMAP_NAMESPACE
        )
        cm = configmap.result()
    return KueueState(
        flavor.result(),
        queue.result(),
        None if cm is None else dict(cm.get("data") or {}),
        local.result() is not None,
    )


def findings(kubectl: Kubectl, cluster: str, slice_: Slice, num_slices: int) -> list[Finding]:
    state = read_state(kubectl, cluster, slice_, num_slices)
    return kueue_findings(
        cluster,
        slice_,
        num_slices,
        flavor=state.flavor,
        cluster_queue=state.cluster_queue,
        configmap_data=state.configmap_data,
        local_queue_exists=state.local_queue_exists,
    )


def check_fixes(findings: Sequence[Finding], kubectl: Kubectl) -> None:
    """The cluster's own check of every manifest the fixes apply, in one server-side dry run
    before any of them is applied (``ClusterRefusedError`` names what it refuses)."""
    manifests = [f.manifest for f in findings if f.manifest is not None]
    if manifests:
        kubectl.check(manifests)


def apply_fix(finding: Finding, kubectl: Kubectl, runner: CommandRunner) -> None:
    """Carry out one finding's fix (its manifest checked with :func:`check_fixes` first)."""
    if finding.manifest is not None:
        result = kubectl.apply(finding.manifest)
    else:
        result = runner.run(list(finding.argv), timeout=120)
    if not result.ok:
        raise CommandFailed(result, fix=f"apply it by hand: {finding.fix}")


def ensure(
    kubectl: Kubectl,
    runner: CommandRunner,
    cluster: str,
    slice_: Slice,
    num_slices: int,
    display: Display,
) -> list[Finding]:
    """Repair whatever is missing; returns what was repaired. The cluster checks every
    manifest first, so a refused one leaves nothing half repaired."""
    todo = findings(kubectl, cluster, slice_, num_slices)
    check_fixes(todo, kubectl)
    for finding in todo:
        display.info(f"repairing: {finding.message}")
        apply_fix(finding, kubectl, runner)
    return todo
