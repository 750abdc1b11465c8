"""Why a workload's pods do not run yet (pure): Kueue's reason on its Workload object, or the
scheduler's on a pod.

Kueue writes why it holds a workload back on the ``Workload`` it made for the JobSet
(``status.conditions``: ``QuotaReserved`` False, e.g. "couldn't assign flavors to pod set
slice-job: insufficient unused quota for google.com/tpu in flavor 2xtpu7x-256, 256 more
needed"); the suspended JobSet itself only says that it is suspended. Once admitted, a pod the
scheduler cannot place says so in its ``PodScheduled`` condition (reason ``Unschedulable``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_WAITING_CONDITIONS = ("QuotaReserved", "Admitted")


def workload_of(jobset: str, workloads: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The Kueue Workload that belongs to the JobSet ``jobset`` (by its owner reference)."""
    for obj in workloads:
        owners = (obj.get("metadata") or {}).get("ownerReferences") or []
        if any(o.get("kind") == "JobSet" and o.get("name") == jobset for o in owners):
            return obj
    return None


def kueue_reason(workload: dict[str, Any] | None) -> str | None:
    """Why Kueue has not admitted the workload, or None when it has (or says nothing)."""
    if workload is None:
        return None
    conditions = (workload.get("status") or {}).get("conditions") or []
    by_type = {c.get("type"): c for c in conditions}
    if (by_type.get("Admitted") or {}).get("status") == "True":
        return None
    for kind in _WAITING_CONDITIONS:
        cond = by_type.get(kind)
        if cond and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "no reason given")
    return None


def unscheduled_reason(pod: dict[str, Any]) -> str | None:
    """The scheduler's message for a pod it has not placed, or None once it is placed."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            reason = cond.get("reason") or "Unschedulable"
            return f"{reason}: {cond.get('message') or 'no message'}"
    return None


def first_unscheduled(pods: Iterable[dict[str, Any]]) -> tuple[str, str] | None:
    """(pod name, scheduler's reason) of the first pod not yet placed."""
    for pod in pods:
        reason = unscheduled_reason(pod)
        if reason is not None:
            return str((pod.get("metadata") or {}).get("name", "")), reason
    return None
