"""Showing each completed training step as its log line arrives (time, loss, pace).

The pace comes from the step times the log reports, not from when the lines arrive: lines
read back from a finished log (or a rehearsal's) arrive all at once."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.frameworks.maxtext.log import parse_completed
from tpu_trainer.metrics.records import StepRecord

_STEP_WORD = "completed "
"""Every step line holds it: other lines cost one substring search."""
_PACE_STEPS = 5
"""How many recent steps the pace is averaged over."""


@dataclass
class StepDisplay:
    display: Display
    lines: int = 0
    _seconds: deque[float] = field(default_factory=lambda: deque(maxlen=_PACE_STEPS))
    """The last step times (a long run's follow loop keeps only these)."""

    def __call__(self, line: str) -> None:
        if not line:
            return
        self.lines += 1
        if _STEP_WORD not in line:
            return
        event = parse_completed(line)
        if not isinstance(event, StepRecord):
            return
        if math.isfinite(event.seconds) and event.seconds > 0:
            self._seconds.append(event.seconds)
        recent = self._seconds
        pace = f", {len(recent) / sum(recent):.2f} steps/s" if len(recent) > 1 else ""
        loss = f", loss {event.loss:.3f}" if event.loss is not None else ""
        self.display.info(f"step {event.step}: {event.seconds:.2f} s{loss}{pace}")
