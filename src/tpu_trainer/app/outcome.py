"""What a run ends with, and what its teardown did: the same for every launch path."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.store.db import RunStatus


@dataclass
class TeardownReport:
    deleted: list[str] = field(default_factory=list)
    already_gone: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    extra_pools: list[str] = field(default_factory=list)
    """Pools present now that were not there before the run and are not the tool's."""
    left: list[str] = field(default_factory=list)
    """Left on purpose: in use by something tpu-trainer did not make."""
    handed_over: list[str] = field(default_factory=list)
    """Shared with another run of the store, which deletes it when it finishes."""
    planned: list[str] = field(default_factory=list)
    """A dry run: what would be deleted."""

    @property
    def clean(self) -> bool:
        return not self.failed

    def summary(self) -> str:
        """One line that is true about what is left."""
        if self.planned:
            return f"dry run: would delete {len(self.planned)}: {', '.join(self.planned)}"
        parts = [f"deleted {len(self.deleted)}", f"already gone {len(self.already_gone)}"]
        if self.handed_over:
            parts.append(f"handed over {len(self.handed_over)}")
        if self.left:
            parts.append(f"left in use {len(self.left)}")
        if self.failed:
            return "; ".join(parts) + f"; STILL THERE {len(self.failed)}: " + "; ".join(self.failed)
        return "; ".join(parts) + "; nothing this run made is left running"


@dataclass
class RunOutcome:
    run_id: str
    status: RunStatus
    zone: str | None = None
    pool: str | None = None
    workload: str | None = None
    attempts: list[object] = field(default_factory=list)
    """The capacity attempts of a run that asked for node pools."""
    teardown: TeardownReport | None = None
    error: str | None = None
    metrics: dict[str, object] | None = None
    readme: Path | None = None
