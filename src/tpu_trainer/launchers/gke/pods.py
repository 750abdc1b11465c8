"""What a workload's pods say (pure): which is worker 0, what runs, what waits and why."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
_SLICE_LABEL = "jobset.sigs.k8s.io/job-index"
_WORKER_LABEL = "batch.kubernetes.io/job-completion-index"


@dataclass(frozen=True, slots=True)
class PodView:
    name: str
    phase: str
    """Pending, Running, Succeeded, Failed, Unknown."""
    slice_index: int
    worker: int
    containers: tuple[str, ...]
    waiting: str | None
    """Why it is not running yet (scheduler or container message)."""
    exit_codes: tuple[int, ...]

    @property
    def host(self) -> str:
        """How the run names the host: ``worker 1``, ``slice 2 worker 0`` on several slices."""
        where = f"slice {self.slice_index} " if self.slice_index else ""
        return f"{where}worker {self.worker}"

    @property
    def main_container(self) -> str:
        """``jax-tpu`` on one host; ``jax-tpu-1`` where a host runs several containers."""
        return self.containers[0] if self.containers else "jax-tpu"


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _waiting(status: dict[str, Any]) -> str | None:
    for cond in status.get("conditions") or []:
        if cond.get("status") == "False" and cond.get("message"):
            return f"{cond.get('reason', '')}: {cond['message']}".strip(": ")
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            return f"{waiting.get('reason', '')} {waiting.get('message', '')}".strip()
    return None


def parse_pod(obj: dict[str, Any]) -> PodView:
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    codes = tuple(
        _int(((cs.get("state") or {}).get("terminated") or {}).get("exitCode"))
        for cs in status.get("containerStatuses") or []
        if (cs.get("state") or {}).get("terminated")
    )
    return PodView(
        name=meta.get("name", ""),
        phase=status.get("phase", "Unknown"),
        slice_index=_int(labels.get(_SLICE_LABEL)),
        worker=_int(labels.get(_WORKER_LABEL)),
        containers=tuple(c.get("name", "") for c in spec.get("containers") or []),
        waiting=_waiting(status),
        exit_codes=codes,
    )


def ordered(pods: Iterable[dict[str, Any]]) -> list[PodView]:
    """Pods by (slice, worker): the first is worker 0 of slice 0, whose log MaxText prints to."""
    return sorted((parse_pod(p) for p in pods), key=lambda p: (p.slice_index, p.worker, p.name))


@dataclass(frozen=True, slots=True)
class PodSummary:
    expected: int
    running: int
    pending: int
    succeeded: int
    failed: int
    reasons: tuple[str, ...]

    @property
    def all_started(self) -> bool:
        return self.running + self.succeeded + self.failed >= self.expected and self.expected > 0

    @property
    def finished(self) -> bool:
        return self.failed > 0 or (self.expected > 0 and self.succeeded >= self.expected)

    def line(self) -> str:
        text = f"pods ready {self.running}/{self.expected}"
        if self.succeeded or self.failed:
            text += f", succeeded {self.succeeded}, failed {self.failed}"
        if self.pending and self.reasons:
            text += f" — pending: {self.reasons[0]}"
        return text


def summarize(pods: list[PodView], expected: int) -> PodSummary:
    count = {
        ph: sum(1 for p in pods if p.phase == ph)
        for ph in ("Running", "Pending", "Succeeded", "Failed")
    }
    reasons = tuple(dict.fromkeys(p.waiting for p in pods if p.waiting))
    return PodSummary(
        expected, count["Running"], count["Pending"], count["Succeeded"], count["Failed"], reasons
    )
