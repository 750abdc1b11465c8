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
    Finding,
    configmap_name,
    kueue_findings,
)
from tpu_trainer.plan.naming import LOCAL_QUEUE
from tpu_trainer.plan.slices import Slice


@dataclass(frozen=True, slots=True)
class KueueState:
    flavor: Mapping[str, Any] | None
    cluster_queue: Mapping[str, Any] | None
    configmap_data: Mapping[str, str] | None
    local_queue_exists: bool = True


def read_state(
    kubectl: Kubectl,
    cluster: str,
    slice_: Slice,
    num_slices: int,
    *,
    xpk_configmap: bool = True,
    local_queue: str = LOCAL_QUEUE,
) -> KueueState:
    """The objects admission depends on, read in parallel (xpk's configmap only when the
    submitter reads it; the LocalQueue the workload goes to)."""
    with ThreadPoolExecutor(max_workers=4) as pool:
        flavor = pool.submit(kubectl.get, "resourceflavor", slice_.kueue_flavor(num_slices))
        queue = pool.submit(kubectl.get, "clusterqueue", CLUSTER_QUEUE)
        local = pool.submit(kubectl.get, "localqueue", local_queue, CONFIGMAP_NAMESPACE)
        configmap = (
            pool.submit(kubectl.get, "configmap", configmap_name(cluster), CONFIGMAP_NAMESPACE)
            if xpk_configmap
            else None
        )
        cm = None if configmap is None else configmap.result()
    return KueueState(
        flavor.result(),
        queue.result(),
        None if cm is None else dict(cm.get("data") or {}),
        local.result() is not None,
    )


def findings(
    kubectl: Kubectl,
    cluster: str,
    slice_: Slice,
    num_slices: int,
    *,
    xpk_configmap: bool = True,
    local_queue: str = LOCAL_QUEUE,
) -> list[Finding]:
    """What is missing (xpk's configmap only for a submitter that reads it; the LocalQueue the
    workload goes to)."""
    state = read_state(
        kubectl, cluster, slice_, num_slices, xpk_configmap=xpk_configmap, local_queue=local_queue
    )
    return state_findings(
        state, cluster, slice_, num_slices, xpk_configmap=xpk_configmap, local_queue=local_queue
    )


def state_findings(
    state: KueueState,
    cluster: str,
    slice_: Slice,
    num_slices: int,
    *,
    xpk_configmap: bool = True,
    local_queue: str = LOCAL_QUEUE,
) -> list[Finding]:
    """What is missing from Kueue as ``state`` read it."""
    return kueue_findings(
        cluster,
        slice_,
        num_slices,
        flavor=state.flavor,
        cluster_queue=state.cluster_queue,
        configmap_data=state.configmap_data,
        local_queue_exists=state.local_queue_exists,
        xpk_configmap=xpk_configmap,
        local_queue_name=local_queue,
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
    elif finding.argv[:1] == ("kubectl",):  # on the run's cluster, like every kubectl call
        result = runner.run(kubectl.argv(*finding.argv[1:]), timeout=120)
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
    *,
    xpk_configmap: bool = True,
    local_queue: str = LOCAL_QUEUE,
) -> list[Finding]:
    """Repair whatever is missing (xpk's configmap only for a submitter that reads it; the
    LocalQueue the workload goes to); returns what was repaired. The cluster checks every
    manifest first, so a refused one leaves nothing half repaired."""
    todo = findings(
        kubectl, cluster, slice_, num_slices, xpk_configmap=xpk_configmap, local_queue=local_queue
    )
    check_fixes(todo, kubectl)
    for finding in todo:
        display.info(f"repairing: {finding.message}")
        apply_fix(finding, kubectl, runner)
    return todo
