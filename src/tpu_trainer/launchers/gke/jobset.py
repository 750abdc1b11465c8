"""How a JobSet ended, read from the conditions its controller writes (pure).

JobSet v0.12 (``pkg/constants``) ends a JobSet with one terminal condition: ``Completed``
(reason ``AllJobsCompleted``, "jobset completed successfully") or ``Failed``: ``FailedJobs``
("jobset failed due to one or more job failures") without a failure policy; with one (xpk
always gives one, ``maxRestarts`` 0 by default) ``FailJobSetFailurePolicyAction`` for a job its
pod failure policy failed, or ``ReachedMaxRestarts`` ("jobset failed due to reaching max
number of restarts") once the restarts are used up; the messages end with the first failed
job. ``status.restarts`` counts the JobSet's restarts. While Kueue holds it, the JobSet only
says ``Suspended`` ("jobset is suspended"): why it waits is on Kueue's Workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COMPLETED = "Completed"
FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class JobSetEnding:
    condition: str
    """``Completed`` or ``Failed``."""
    reason: str
    message: str
    restarts: int

    @property
    def succeeded(self) -> bool:
        return self.condition == COMPLETED

    def describe(self, name: str) -> str:
        """``JobSet NAME failed (FailedJobs): jobset failed ...; restarts: 0``."""
        verb = "completed" if self.succeeded else "failed"
        text = f"JobSet {name} {verb} ({self.reason or 'no reason given'})"
        if self.message:
            text += f": {self.message}"
        return f"{text}; restarts: {self.restarts}"


def _restarts(status: dict[str, Any]) -> int:
    value = status.get("restarts")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def jobset_ending(jobset: dict[str, Any] | None) -> JobSetEnding | None:
    """The JobSet's terminal condition (status True), or None while it has none."""
    status = (jobset or {}).get("status") or {}
    for cond in status.get("conditions") or []:
        kind = cond.get("type")
        if kind in (COMPLETED, FAILED) and cond.get("status") == "True":
            return JobSetEnding(
                str(kind),
                str(cond.get("reason") or ""),
                str(cond.get("message") or ""),
                _restarts(status),
            )
    return None


def suspended_message(jobset: dict[str, Any] | None) -> str | None:
    """The JobSet's own ``Suspended`` message while Kueue holds it, else None."""
    for cond in ((jobset or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Suspended" and cond.get("status") == "True":
            return str(cond.get("message") or cond.get("reason") or "suspended")
    return None
