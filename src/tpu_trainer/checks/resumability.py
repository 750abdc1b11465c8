"""Resumability: can this run continue after losing its slice, before any capacity is asked?

MaxText resumes by itself when ``<base_output_directory>/<run_name>/checkpoints/<step>`` exists.
So a run resumes only if it checkpoints (``enable_checkpointing``), to storage that outlives
the slice (``gs://``), often enough: with the default ``checkpoint_period`` of 10 000 steps a
shorter run saves nothing before its end. ``enable_autocheckpoint`` also saves when a
preemption notice (SIGTERM) arrives; it is off by default.

A run without checkpoints always gets a warning. A run shorter than :data:`LONG_RUN_STEPS`
whose first checkpoint would come after its end is a rerun rather than a resumption: it gets a
pass that says what an interruption would cost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level

NAME = "resumability"
LONG_RUN_STEPS = 1000
"""From this many steps on, losing the progress of a run is worth a warning."""
CHECKPOINTS_PER_RUN = 10
"""The period suggested for a long run: about this many checkpoints over the run."""


def _flag(value: Any) -> bool:
    return str(value).strip().lower() in ("true", "1", "yes")


def _suggested_period(steps: int) -> int:
    return max(1, steps // CHECKPOINTS_PER_RUN)


def check_resumability(
    request: MaxTextRequest, configs: MaxTextConfigs, effective: Mapping[str, Any]
) -> list[Finding]:
    """WARN when a long run could not continue from a checkpoint after an interruption."""
    del request, configs
    steps = int(effective.get("steps", 0) or 0)
    period = int(effective.get("checkpoint_period", 0) or 0)
    where = str(effective.get("base_output_directory") or "")
    on_sigterm = _flag(effective.get("enable_autocheckpoint", False))
    if not _flag(effective.get("enable_checkpointing", True)):
        return [
            Finding(
                NAME,
                Level.WARN,
                f"checkpointing is off: if this {steps}-step run loses its slice (preemption, "
                "maintenance) it cannot resume and starts again from step 0",
                "--set enable_checkpointing=true "
                f"--set checkpoint_period={_suggested_period(steps)}",
            )
        ]
    if where and "<" not in where and not where.startswith("gs://"):
        return [
            Finding(
                NAME,
                Level.WARN,
                f"checkpoints go to {where}, which does not outlive the slice: after an "
                "interruption there is nothing to resume from",
                "--set base_output_directory=gs://<bucket>/<folder>",
            )
        ]
    if steps >= LONG_RUN_STEPS and period >= steps:
        return [
            Finding(
                NAME,
                Level.WARN,
                f"the first checkpoint is at step {period} of {steps}: an interruption loses "
                "everything trained so far",
                f"--set checkpoint_period={_suggested_period(steps)}"
                + ("" if on_sigterm else " --set enable_autocheckpoint=true"),
            )
        ]
    extra = " and on SIGTERM" if on_sigterm else ""
    if period < steps:
        return [_pass(f"checkpoints every {period} steps{extra}: an interruption resumes")]
    return [
        _pass(
            f"no checkpoint before the end of this {steps}-step run (checkpoint_period="
            f"{period}){extra}: an interruption reruns it"
        )
    ]


def _pass(message: str) -> Finding:
    return Finding(NAME, Level.PASS, message)
