"""The truth about an ending: a workload that exits 0 has not necessarily finished training.

A run succeeded only when its log's last step reached the steps its command asked for (MaxText
counts from 0, so step ``steps - 1``), or when the framework stopped it because it was done
(MaxText's ``Target loss ... is achieved.``). Otherwise it was cut short:

* preempted: MaxText logs ``Training stopped: Job received termination signal (SIGTERM).``
  after a preemption or maintenance notice and still exits 0 (its pod then reads
  ``Succeeded``); such a run can resume from its last durable checkpoint;
* stopped: MaxText stopped for another reason (its data ran out, ...): an error to diagnose;
* unfinished: the log ends before the last step with no reason given (the process was killed,
  or hung and was stopped).

A log without any step line and without a stop line says nothing either way: it is not judged.
Before a launcher calls a run succeeded it asks :func:`cut_in_log`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from tpu_trainer.frameworks.maxtext.ending import (
    EndFacts,
    StopReason,
    requested_steps,
    scan_ending,
)
from tpu_trainer.plan.plan import Plan


class Cause(StrEnum):
    PREEMPTED = "preempted"
    STOPPED = "stopped"
    UNFINISHED = "unfinished"


@dataclass(frozen=True, slots=True)
class Cut:
    """A run that exited cleanly without finishing: why, and what it kept."""

    cause: Cause
    message: str
    facts: EndFacts

    @property
    def resumable(self) -> bool:
        """A preemption is retried; a stop for another reason is an error to fix first."""
        return self.cause is Cause.PREEMPTED


def _cause(facts: EndFacts, cloud_says: str | None = None) -> tuple[Cause, str]:
    if facts.stop is StopReason.PREEMPTED:
        also = f"; {cloud_says}" if cloud_says else ""
        return Cause.PREEMPTED, f"preempted: {facts.stop_text}{also}"
    if cloud_says is not None:
        return Cause.PREEMPTED, f"preempted: {cloud_says}"
    if facts.stop is not None:
        return Cause.STOPPED, f"{facts.stop.value}: {facts.stop_text}"
    return Cause.UNFINISHED, "the log ends before the last step, with no reason given"


def kept_step(facts: EndFacts) -> int | None:
    """The last durable checkpoint: the segment's own, or the one it restored."""
    return facts.durable_step if facts.durable_step is not None else facts.restored_step


def wasted_steps(facts: EndFacts) -> int | None:
    """Steps done after the last durable checkpoint, which a resume does again."""
    if facts.last_step is None:
        return None
    kept = kept_step(facts)
    return facts.last_step + 1 if kept is None else max(0, facts.last_step - kept)


def cut_short(facts: EndFacts, steps: int | None, cloud_says: str | None = None) -> Cut | None:
    """Why a run that exited cleanly did not finish, or None when it did (as far as the log
    says). ``steps`` is the number of steps the command asked for, when known. ``cloud_says``
    is the cloud's own word that the capacity was taken back (a TPU VM that reads
    ``PREEMPTED``): the run was preempted even when its log ends without MaxText's stop line."""
    if facts.stop is StopReason.TARGET_REACHED:
        return None
    reached = steps is not None and facts.last_step is not None and facts.last_step >= steps - 1
    if reached:
        return None
    if facts.stop is None and cloud_says is None and (steps is None or facts.last_step is None):
        return None  # no step count or no step line, and no stop line: nothing to judge by
    cause, why = _cause(facts, cloud_says)
    at = "before its first step" if facts.last_step is None else f"at step {facts.last_step}"
    of = f" of {steps}" if steps is not None and facts.last_step is not None else ""
    durable = kept_step(facts)
    kept = (
        f"; last durable checkpoint: step {durable}"
        if durable is not None
        else ("; no durable checkpoint")
    )
    return Cut(cause, f"interrupted {at}{of} ({why}){kept}", facts)


def interruption(facts: EndFacts, steps: int | None) -> str | None:
    """:func:`cut_short`'s message."""
    cut = cut_short(facts, steps)
    return None if cut is None else cut.message


def steps_of(plan: Plan) -> int | None:
    """The steps a plan's MaxText command asks for, when it names them."""
    return requested_steps(plan.expand(text) for text in plan.program_arg_texts)


def facts_in_log(log: Path, start: int = 0) -> EndFacts:
    """The ending facts of a log file from byte ``start`` on (one segment of a resumed run)."""
    if not log.is_file():
        return EndFacts()
    with log.open("rb") as raw:
        raw.seek(start)
        return scan_ending(line.decode("utf-8", errors="replace") for line in raw)


def cut_in_log(
    log: Path, steps: int | None, start: int = 0, cloud_says: str | None = None
) -> Cut | None:
    """:func:`cut_short` for a log file from byte ``start`` on; a missing log says nothing
    (unless the cloud says the capacity was taken back)."""
    if not log.is_file() and cloud_says is None:
        return None
    return cut_short(facts_in_log(log, start), steps, cloud_says)


def interruption_in_log(log: Path, steps: int | None) -> str | None:
    """:func:`interruption` for a log file; a missing log says nothing."""
    cut = cut_in_log(log, steps)
    return None if cut is None else cut.message
