"""What a fake workload's worker 0 prints: MaxText's lines up to the step its command asks for.

The scenario's default log shows the first three steps; a run asks for ``steps=N``, so the
default log carries on, one compact line a step, to step ``N - 1`` (MaxText counts from 0).
A scenario's own log is printed as written.

A slice reclaimed after step ``K`` (``reclaim_after_step``) prints steps 0..K with a durable
Orbax checkpoint every ``checkpoint_period`` steps (Orbax's checkpoint-manager record of the
save's blocking seconds, MaxText's start line, Orbax's finalize line), then MaxText's SIGTERM
stop; the workload exits 0. The run's next workload (same ``run_name``) restores the last
durable checkpoint, logging ``restoring from this run's directory step D`` and Orbax's record
of the restore, and carries on at step ``D + 1``.
"""

from __future__ import annotations

import re

# The scenario's default worker-0 log: MaxText's start-up lines and its first three steps.
DEFAULT_LOG = """\
I1122 04:27:31.120000 139872 max_utils.py:273] Num_devices: 8
I1122 04:27:35.410000 139872 train.py:112] number parameters: 8.030 billion
I1122 04:29:46.380500 139872 metric_logger.py:265] completed step: 0, seconds: 125.311, \
TFLOP/s/device: 0.054, Tokens/s/device: 941.329, total_weights: 65536, loss: 10.937, \
lm_loss: 10.937, perplexity: 56244.406
I1122 04:29:49.101200 139872 metric_logger.py:265] completed step: 1, seconds: 2.720, \
TFLOP/s/device: 801.100, Tokens/s/device: 6024.110, total_weights: 65536, loss: 10.412, \
lm_loss: 10.412, perplexity: 33251.120
I1122 04:29:51.790100 139872 metric_logger.py:265] completed step: 2, seconds: 2.688, \
TFLOP/s/device: 810.640, Tokens/s/device: 6095.870, total_weights: 65536, loss: 9.870, \
lm_loss: 9.870, perplexity: 19341.700
"""

_STEP = (
    "I1122 {h:02d}:{m:02d}:{s:02d}.100000 139872 metric_logger.py:265] completed step: {step}, "
    "seconds: 2.700, TFLOP/s/device: 801.100, Tokens/s/device: 6024.110, total_weights: 65536, "
    "loss: {loss:.3f}, lm_loss: {loss:.3f}, perplexity: 1000.000\n"
)
_SAVE_RECORD = (
    "I1122 {h:02d}:{m:02d}:{s:02d}.190000 139872 standard_logger.py:34] {{'step': {step}, "
    "'event_type': 'save', 'directory': '{where}', 'reached_preemption': False, "
    "'preemption_received_at': None, 'synchronous': False, 'wait_for_prev_start_time': "
    "{at:.6f}, 'wait_for_prev_duration_secs': 3.1e-05, 'time_between_consecutive_saves_sec': "
    "None, 'checkpointer_blocking_start_time': {at:.6f}, 'checkpointer_blocking_duration_secs': "
    "0.179, 'get_old_steps_start_time': {at:.6f}, 'get_old_steps_duration_secs': 2.2e-05, "
    "'checkpoint_manager_blocking_start_time': {at:.6f}, "
    "'checkpoint_manager_blocking_duration_secs': 0.18}}\n"
)
_STARTED = (
    "I1122 {h:02d}:{m:02d}:{s:02d}.200000 139872 checkpointing.py:596] Started an asynchronous "
    "checkpoint save for step {step}\n"
)
_FINISHED = (
    "I1122 {h:02d}:{m:02d}:{s:02d}.900000 139901 atomicity.py:852] [process=0][thread="
    "save_finalize] Finished saving checkpoint (finalized tmp dir) to `{where}/{step}`.\n"
)
_RESTORE = (
    "I1122 04:27:40.000000 139872 checkpointing.py:210] restoring from this run's directory "
    "step {step}\n"
    "I1122 04:27:44.210000 139872 standard_logger.py:34] {{'step': {step}, 'event_type': "
    "'restore', 'directory': '{where}', 'checkpointer_start_time': 1763785660.0, "
    "'checkpointer_duration_secs': 4.2, 'checkpoint_manager_start_time': 1763785660.0, "
    "'checkpoint_manager_duration_secs': 4.21}}\n"
)
SAVE_BLOCKING_S = 0.18
"""The blocking seconds of each checkpoint save in Orbax's record."""
RESTORE_S = 4.21
"""The seconds of a restore in Orbax's record."""
_SIGTERM = (
    "I1122 {h:02d}:{m:02d}:{s:02d}.500000 139872 train.py:1454] Training stopped: Job received "
    "termination signal (SIGTERM).\n"
)
FIRST_LINES = 3
"""Steps the default log shows itself."""


def command_arg(command: str, key: str) -> str | None:
    """The last ``key=value`` of a command line, or None."""
    found = re.findall(rf"(?:^|\s){re.escape(key)}=(\S+)", command)
    return found[-1].strip("'\"") if found else None


def requested_steps(command: str) -> int | None:
    value = command_arg(command, "steps")
    return int(value) if value is not None and value.isdigit() else None


_EPOCH = 1763785800.0
"""Step 0's time (04:30:00 on 22 November) as Orbax's records give it, in epoch seconds."""


def _clock(step: int) -> dict[str, int]:
    t = 4 * 3600 + 30 * 60 + 3 * step
    return {"h": t // 3600 % 24, "m": t // 60 % 60, "s": t % 60}


def step_lines(first: int, last: int, *, period: int = 0, where: str = "") -> str:
    """``completed step`` lines for steps first..last, each checkpointed step (every
    ``period``) followed by Orbax's start and finalize lines."""
    out = []
    for step in range(first, last + 1):
        out.append(_STEP.format(step=step, loss=max(1.0, 10.0 - step / 100), **_clock(step)))
        if period and step % period == 0:
            at = _EPOCH + 3 * step
            out.append(_SAVE_RECORD.format(step=step, where=where, at=at, **_clock(step)))
            out.append(_STARTED.format(step=step, **_clock(step)))
            out.append(_FINISHED.format(step=step, where=where, **_clock(step)))
    return "".join(out)


def default_log(base: str, command: str) -> str:
    """The default log carried on to the command's last step."""
    steps = requested_steps(command)
    if steps is None or steps <= FIRST_LINES:
        return base
    return base + step_lines(FIRST_LINES, steps - 1)


def _checkpoints(command: str) -> tuple[int, str]:
    period = command_arg(command, "checkpoint_period") or "0"
    where = f"{command_arg(command, 'base_output_directory') or 'gs://bucket'}/"
    where += f"{command_arg(command, 'run_name') or 'run'}/checkpoints"
    return (int(period) if period.isdigit() else 0), where


def durable_before(step: int, command: str) -> int | None:
    """The last checkpointed step at or before ``step``."""
    period, _ = _checkpoints(command)
    return None if not period else step - step % period


def reclaimed_log(base: str, command: str, after_step: int) -> str:
    """A first segment whose slice is reclaimed after ``after_step``."""
    period, where = _checkpoints(command)
    head = "".join(line + "\n" for line in base.splitlines() if "completed step" not in line)
    return (
        head
        + step_lines(0, after_step, period=period, where=where)
        + _SIGTERM.format(**_clock(after_step + 1))
    )


def resumed_log(base: str, command: str, restored: int | None) -> str:
    """A later segment: it restores ``restored`` (or starts again) and reaches the last step."""
    period, where = _checkpoints(command)
    steps = requested_steps(command) or FIRST_LINES
    head = "".join(line + "\n" for line in base.splitlines() if "completed step" not in line)
    first = 0 if restored is None else restored + 1
    restore = "" if restored is None else _RESTORE.format(step=restored, where=where)
    return head + restore + step_lines(first, steps - 1, period=period, where=where)
