"""Kueue's and the scheduler's reasons for a workload that does not run yet (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_trainer.launchers.gke.scheduling import (
    first_unscheduled,
    kueue_reason,
    unscheduled_reason,
    workload_of,
)

pytestmark = pytest.mark.unit

QUOTA = (
    "couldn't assign flavors to pod set slice-job-1: insufficient unused quota for "
    "google.com/tpu in flavor 2xtpu7x-256, 256 more needed"
)
SCHEDULER = (
    "0/12 nodes are available: 12 Insufficient google.com/tpu. preemption: 0/12 nodes are "
    "available: 12 No preemption victims found for incoming pod."
)


def _workload(owner: str, conditions: list[dict[str, str]]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"jobset-{owner}-1a2b3",
            "ownerReferences": [{"kind": "JobSet", "name": owner}],
        },
        "status": {"conditions": conditions},
    }


def test_kueue_reason_is_the_quota_reserved_message_of_the_jobsets_workload() -> None:
    pending = _workload("w1", [{"type": "QuotaReserved", "status": "False", "message": QUOTA}])
    other = _workload("w2", [{"type": "Admitted", "status": "True"}])
    assert workload_of("w1", [other, pending]) is pending
    assert workload_of("w3", [other, pending]) is None
    assert kueue_reason(pending) == QUOTA
    assert kueue_reason(other) is None
    assert kueue_reason(None) is None


def test_unscheduled_reason_comes_from_the_pod_scheduled_condition() -> None:
    waiting = {
        "metadata": {"name": "w1-slice-job-0-0-abcde"},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": SCHEDULER,
                }
            ],
        },
    }
    placed = {
        "metadata": {"name": "w1-slice-job-0-1-fghij"},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]},
    }
    assert unscheduled_reason(placed) is None
    assert unscheduled_reason(waiting) == f"Unschedulable: {SCHEDULER}"
    assert first_unscheduled([placed, waiting]) == (
        "w1-slice-job-0-0-abcde",
        f"Unschedulable: {SCHEDULER}",
    )
    assert first_unscheduled([placed]) is None
