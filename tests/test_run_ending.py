"""A run that exits 0 is not finished until its last step: MaxText's SIGTERM stop, checkpoints,
and the resumability warning given before any capacity is asked."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.app.ending import interruption, interruption_in_log
from tpu_trainer.checks.resumability import check_resumability
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


def test_a_run_that_reached_its_last_step_or_stopped_for_another_reason_is_not_interrupted(
    tmp_path: Path,
) -> None:
    assert interruption(scan_ending([*_steps(5), SIGTERM]), 5) is None  # all 5 steps done
    assert interruption(scan_ending(_steps(3)), 5) is None  # no stop line: the log decides not
    data = "Training stopped: You may have run out of training data. Received StopIteration"
    ended = scan_ending([*_steps(3), data])
    assert ended.stop is StopReason.DATA_EXHAUSTED
    assert interruption(ended, 5) is None  # a failure for diagnose, not a preemption
    assert interruption_in_log(tmp_path / "missing.log", 5) is None


def test_a_preemption_before_the_first_step_and_a_restore_are_said() -> None:
    facts = scan_ending(["restoring from this run's directory step 30", SIGTERM])
    assert facts.restored_step == 30
    assert interruption(facts, 50) == (
        "interrupted before its first step (preempted: Job received termination signal "
        "(SIGTERM).); no durable checkpoint"
    )


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
