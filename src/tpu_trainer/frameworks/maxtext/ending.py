"""How a MaxText run ended, read from its log: the last step, why it stopped, its checkpoints.

MaxText 0.2.5 stops its loop with ``Training stopped: <reason>`` (``train.py``) when it raises
``StopTraining``: ``Job received termination signal (SIGTERM).`` after a preemption notice,
``You may have run out of training data ...`` or ``Target loss ... is achieved.``. On SIGTERM it
still exits 0, so the exit code alone cannot say whether the run finished.

Checkpoints: ``Started an asynchronous checkpoint save for step N`` is not durable; Orbax's
``Finished saving checkpoint (finalized tmp dir) to `<dir>/checkpoints/N`.`` is. A run that
found its own checkpoint logs ``restoring from this run's directory step N``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.frameworks.maxtext.log import parse_completed
from tpu_trainer.metrics.records import HiddenStep, StepRecord


class StopReason(StrEnum):
    PREEMPTED = "preempted"
    DATA_EXHAUSTED = "data exhausted"
    TARGET_REACHED = "target loss reached"
    OTHER = "stopped"


_STOPPED = re.compile(r"Training stopped: (.*)")
_DURABLE = re.compile(
    r"Finished saving checkpoint \(finalized tmp dir\) to `?([^`\s]*?)/(\d+)`?\.?$"
)
_RESTORED = re.compile(r"restoring from this run's directory step (\d+)")
_REASONS: tuple[tuple[str, StopReason], ...] = (
    ("termination signal", StopReason.PREEMPTED),
    ("run out of training data", StopReason.DATA_EXHAUSTED),
    ("next(self.data_iterator)", StopReason.DATA_EXHAUSTED),
    ("Target loss", StopReason.TARGET_REACHED),
)


@dataclass(frozen=True, slots=True)
class EndFacts:
    last_step: int | None = None
    stop: StopReason | None = None
    stop_text: str = ""
    durable_step: int | None = None
    """The last step whose checkpoint Orbax finalized."""
    restored_step: int | None = None


def _reason(text: str) -> StopReason:
    return next((reason for needle, reason in _REASONS if needle in text), StopReason.OTHER)


def scan_ending(lines: Iterable[str]) -> EndFacts:
    """The ending facts of a log, in one pass that keeps no line."""
    last: int | None = None
    stop: StopReason | None = None
    stop_text = ""
    durable: int | None = None
    restored: int | None = None
    for line in lines:
        if "completed " in line:
            event = parse_completed(line)
            if isinstance(event, StepRecord | HiddenStep):
                last = event.step if last is None else max(last, event.step)
                continue
        if "Training stopped: " in line and (m := _STOPPED.search(line)):
            stop_text = m[1].strip()
            stop = _reason(stop_text)
        elif "Finished saving checkpoint" in line and (m := _DURABLE.search(line.rstrip())):
            durable = int(m[2])
        elif "restoring from this run" in line and (m := _RESTORED.search(line)):
            restored = int(m[1])
    return EndFacts(last, stop, stop_text, durable, restored)


def requested_steps(args: Iterable[str]) -> int | None:
    """The ``steps=N`` of a MaxText command (the last one wins), or None when not given."""
    found: int | None = None
    for text in args:
        key, sep, value = text.partition("=")
        if sep and key == "steps":
            try:
                found = int(value.replace("_", ""))
            except ValueError:
                found = None
    return found
