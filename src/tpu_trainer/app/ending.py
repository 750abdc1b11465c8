"""The truth about an ending: a workload that exits 0 has not necessarily finished training.

A MaxText run that receives SIGTERM (a preemption or maintenance notice) logs
``Training stopped: Job received termination signal (SIGTERM).`` and exits 0, and its pod then
reads ``Succeeded``. Before a launcher calls such a run succeeded it asks :func:`interrupted`.
"""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.frameworks.maxtext.ending import (
    EndFacts,
    StopReason,
    requested_steps,
    scan_ending,
)
from tpu_trainer.plan.plan import Plan


def interruption(facts: EndFacts, steps: int | None) -> str | None:
    """Why a run that exited cleanly did not finish, or None when it did (as far as the log
    says). ``steps`` is the number of steps the command asked for, when known."""
    if facts.stop is not StopReason.PREEMPTED:
        return None
    if steps is not None and facts.last_step is not None and facts.last_step >= steps - 1:
        return None
    at = "before its first step" if facts.last_step is None else f"at step {facts.last_step}"
    of = f" of {steps}" if steps is not None and facts.last_step is not None else ""
    kept = (
        f"; last durable checkpoint: step {facts.durable_step}"
        if facts.durable_step is not None
        else "; no durable checkpoint"
    )
    return f"interrupted {at}{of} (preempted: {facts.stop_text}){kept}"


def steps_of(plan: Plan) -> int | None:
    """The steps a plan's MaxText command asks for, when it names them."""
    return requested_steps(plan.expand(text) for text in plan.program_arg_texts)


def interruption_in_log(log: Path, steps: int | None) -> str | None:
    """:func:`interruption` for a log file; a missing log says nothing."""
    if not log.is_file():
        return None
    with log.open(encoding="utf-8", errors="replace") as lines:
        return interruption(scan_ending(lines), steps)
