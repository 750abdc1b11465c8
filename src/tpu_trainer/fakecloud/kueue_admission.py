"""Whether Kueue v0.19 admits a workload, and if not the condition it writes on its Workload.

The reasons and messages are Kueue's own, with its default feature gates (the granular
``UnadmittedWorkloadsObservability`` reasons off): the workload controller's ``Inadmissible``
for a missing LocalQueue or ClusterQueue, the scheduler's ``Pending`` with the flavor
assigner's message (``couldn't assign flavors to pod set <name>: ...``, its reasons sorted and
joined by ``, ``) otherwise. Kueue names a JobSet's pod set after its replicated job: xpk's
``slice-job``, gcluster's ``main-job`` (:mod:`jobset_shape`).
"""

from __future__ import annotations

from typing import Any

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.jobset_shape import SHAPES
from tpu_trainer.fakecloud.state import State


def pod_set(wl: dict[str, Any]) -> str:
    """The pod set Kueue makes for the workload's JobSet: its replicated job."""
    return SHAPES[str(wl.get("submitter") or "xpk")].replicated_job


def _tpu_group(queue: dict[str, Any]) -> dict[str, Any] | None:
    groups = (queue.get("spec") or {}).get("resourceGroups") or []
    return next((g for g in groups if k8s.TPU_RESOURCE in (g.get("coveredResources") or [])), None)


def _listed_flavors(queue: dict[str, Any]) -> list[str]:
    groups = (queue.get("spec") or {}).get("resourceGroups") or []
    return [str(f.get("name")) for g in groups for f in g.get("flavors") or []]


def _no_fit(wl: dict[str, Any], *reasons: str) -> tuple[str, str]:
    return (
        "Pending",
        f"couldn't assign flavors to pod set {pod_set(wl)}: {', '.join(sorted(reasons))}",
    )


def blocker(state: State, wl: dict[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the ``QuotaReserved`` False condition, or None when admitted."""
    flavor = f"{wl['num_slices']}x{wl['device']}"
    needed = int(wl["chips"]) * int(wl["num_slices"])
    local = str(wl.get("queue") or k8s.LOCAL_QUEUE)
    if k8s.get(state, k8s.KINDS[2], local) is None:
        return "Inadmissible", f"LocalQueue {local} is terminating or missing"
    queue = k8s.get(state, k8s.KINDS[1], k8s.CLUSTER_QUEUE)
    if queue is None:
        return "Inadmissible", f"ClusterQueue {k8s.CLUSTER_QUEUE} is terminating or missing"
    if any(k8s.get(state, k8s.KINDS[0], name) is None for name in _listed_flavors(queue)):
        return "Pending", f"ClusterQueue {k8s.CLUSTER_QUEUE} is inactive"  # a flavor is missing
    group = _tpu_group(queue)
    if group is None:
        return _no_fit(wl, f"resource {k8s.TPU_RESOURCE} unavailable in ClusterQueue")
    names = [str(f.get("name")) for f in group.get("flavors") or []]
    if flavor not in names:
        return _no_fit(wl, *(f"flavor {name} doesn't match node affinity" for name in names))
    quota = k8s.flavor_quota(state, flavor) or 0
    if quota < needed:
        return _no_fit(
            wl,
            f"insufficient quota for {k8s.TPU_RESOURCE} in flavor {flavor}, previously "
            f"considered podsets requests (0) + current podset request ({needed}) > maximum "
            f"capacity ({quota})",
        )
    free = quota - int((state.get("kueue_in_use") or {}).get(flavor, 0))
    if free < needed:
        return _no_fit(
            wl,
            f"insufficient unused quota for {k8s.TPU_RESOURCE} in flavor {flavor}, "
            f"{needed - max(free, 0)} more needed",
        )
    return None
