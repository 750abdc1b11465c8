"""A run that exits 0 is not finished until its last step: MaxText's SIGTERM stop, checkpoints,
and the resumability warning given before any capacity is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.app.ending import (
    Cause,
    cut_short,
    interruption,
    interruption_in_log,
    wasted_steps,
)
from tpu_trainer.checks.resumability import check_resumability
from tpu_trainer.fakecloud import maxtext_log as fake_log
from tpu_trainer.fakecloud.maxtext_log import DEFAULT_LOG
from tpu_trainer.frameworks.maxtext.ending import StopReason, requested_steps, scan_ending
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Level
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

PREEMPTED_LOG = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "preempted.log"
STEP = (
    "I1124 06:00:0{s}.100000 1 metric_logger.py:265] completed step: {s}, seconds: 2.700, "
    "TFLOP/s/device: 801.100, Tokens/s/device: 6024.110, total_weights: 65536, loss: 9.9"
)
SIGTERM = "I1124 train.py:1454] Training stopped: Job received termination signal (SIGTERM)."


def _steps(n: int) -> list[str]:
    return [STEP.format(s=s) for s in range(n)]


def test_the_sigterm_stop_its_step_and_the_last_durable_checkpoint_are_read() -> None:
    facts = scan_ending(PREEMPTED_LOG.read_text(encoding="utf-8").splitlines())
    assert facts.last_step == 20
    assert facts.stop is StopReason.PREEMPTED
    # step 20's save was only started: the durable one is step 10
    assert facts.durable_step == 10
    assert interruption(facts, 30) == (
        "interrupted at step 20 of 30 (preempted: Job received termination signal (SIGTERM).); "
        "last durable checkpoint: step 10"
    )


def test_a_run_that_reached_its_last_step_or_its_target_is_not_interrupted(
    tmp_path: Path,
) -> None:
    assert interruption(scan_ending([*_steps(5), SIGTERM]), 5) is None  # all 5 steps done
    target = "Training stopped: Target loss 2.0 is achieved."
    assert cut_short(scan_ending([*_steps(3), target]), 5) is None  # the framework was done
    assert interruption(scan_ending(_steps(3)), None) is None  # no step count: nothing to judge
    assert interruption(scan_ending(["no steps here"]), 5) is None  # no step line, no stop line
    assert interruption_in_log(tmp_path / "missing.log", 5) is None


def test_a_run_that_exits_before_its_last_step_is_never_succeeded() -> None:
    """The strict rule: short of ``steps - 1`` a clean exit is an interruption, whatever the
    reason; only a preemption is worth resuming."""
    quiet = cut_short(scan_ending(_steps(3)), 5)
    assert quiet is not None and quiet.cause is Cause.UNFINISHED and not quiet.resumable
    assert quiet.message.startswith("interrupted at step 2 of 5 (the log ends before the last")
    data = "Training stopped: You may have run out of training data. Received StopIteration"
    ended = scan_ending([*_steps(3), data])
    assert ended.stop is StopReason.DATA_EXHAUSTED
    stopped = cut_short(ended, 5)
    assert stopped is not None and stopped.cause is Cause.STOPPED and not stopped.resumable
    assert "(data exhausted: You may have run out" in stopped.message
    preempted = cut_short(scan_ending([*_steps(3), SIGTERM]), 50)
    assert preempted is not None and preempted.resumable
    assert preempted.message.startswith("interrupted at step 2 of 50 (preempted: ")


def test_a_preemption_before_the_first_step_and_a_restore_are_said() -> None:
    facts = scan_ending(["restoring from this run's directory step 30", SIGTERM])
    assert facts.restored_step == 30
    assert interruption(facts, 50) == (
        "interrupted before its first step (preempted: Job received termination signal "
        "(SIGTERM).); last durable checkpoint: step 30"  # the one it restored still holds
    )
    assert wasted_steps(facts) is None
    assert wasted_steps(scan_ending(_steps(3))) == 3  # nothing kept: every step is redone


def test_the_requested_steps_are_the_last_steps_argument() -> None:
    assert requested_steps(["steps=10", "model_name=x", "steps=1_000"]) == 1000
    assert requested_steps(["model_name=x"]) is None
    assert requested_steps(["steps=${STEPS}"]) is None


def _finding(**values: object) -> tuple[Level, str, str]:
    effective = {
        "steps": 50,
        "checkpoint_period": 10,
        "enable_checkpointing": True,
        "base_output_directory": "gs://bucket/runs",
        **values,
    }
    request = MaxTextRequest.from_args([], Slice.parse("tpu7x-2x2x1"))
    (found,) = check_resumability(request, None, effective)  # type: ignore[arg-type]
    return found.status, found.message, found.fix


def test_resumability_warns_before_a_run_that_could_not_continue() -> None:
    level, message, fix = _finding(enable_checkpointing=False)
    assert level is Level.WARN and "cannot resume" in message
    assert fix == "--set enable_checkpointing=true --set checkpoint_period=5"
    level, message, fix = _finding(base_output_directory="/tmp/out")
    assert level is Level.WARN and "/tmp/out" in message and fix.startswith("--set base_output")
    level, message, fix = _finding(steps=20_000, checkpoint_period=50_000)
    assert level is Level.WARN and "step 50000 of 20000" in message
    assert fix == "--set checkpoint_period=2000 --set enable_autocheckpoint=true"


def test_resumability_passes_what_can_resume_or_is_cheap_to_rerun() -> None:
    level, message, _ = _finding()
    assert level is Level.PASS and message.startswith("checkpoints every 10 steps")
    level, message, _ = _finding(steps=30, checkpoint_period=10_000)
    assert level is Level.PASS and "an interruption reruns it" in message
    level, message, _ = _finding(enable_autocheckpoint=True)
    assert "and on SIGTERM" in message


def test_the_fake_workloads_logs_end_as_the_strict_rule_expects() -> None:
    command = "train.py profiler_steps=3 steps=50 checkpoint_period=10 run_name=r"
    assert fake_log.requested_steps(command) == 50
    full = scan_ending(fake_log.default_log(DEFAULT_LOG, command).splitlines())
    assert (full.last_step, cut_short(full, 50)) == (49, None)  # the recipe's steps, all of them
    first = scan_ending(fake_log.reclaimed_log(DEFAULT_LOG, command, 30).splitlines())
    cut = cut_short(first, 50)
    assert cut is not None and cut.resumable
    assert (first.last_step, first.durable_step, wasted_steps(first)) == (30, 30, 0)
    second = scan_ending(fake_log.resumed_log(DEFAULT_LOG, command, 30).splitlines())
    assert (second.restored_step, second.last_step, cut_short(second, 50)) == (30, 49, None)
