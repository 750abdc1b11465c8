"""Showing each completed training step as its log line arrives (time, loss, pace)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tpu_trainer.app.display import Display


@dataclass
class StepDisplay:
    display: Display
    lines: int = 0
    _times: list[float] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        from tpu_trainer.frameworks.maxtext_log import StepRecord, parse_line

        if not line:
            return
        self.lines += 1
        event = parse_line(line)
        if not isinstance(event, StepRecord):
            return
        self._times.append(time.monotonic())
        recent = self._times[-6:]
        span = recent[-1] - recent[0]
        pace = f", {(len(recent) - 1) / span:.2f} steps/s" if len(recent) > 1 and span > 0 else ""
        loss = f", loss {event.loss:.3f}" if event.loss is not None else ""
        self.display.info(f"step {event.step}: {event.seconds:.2f} s{loss}{pace}")
