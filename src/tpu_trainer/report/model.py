"""What a training report is made of: one run's summary and its per-step metrics.

The per-step rows are the run store's :class:`~tpu_trainer.store.steps.StepRow`, the same rows
the summary computes; a figure a step lacks is shown as 0 (a loss as n/a).

These are plain inputs; the numbers are computed elsewhere (from the training log) and
only checked here for the things that would corrupt a README (an unparseable date, a run id
that cannot live inside an HTML comment or a file name).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date as _date
from enum import StrEnum
from typing import Any

from tpu_trainer.errors import InputError
from tpu_trainer.report.downsample import StepBucket
from tpu_trainer.store.steps import StepRow

_RUN_ID = re.compile(r"[A-Za-z0-9]+(?:[._:-][A-Za-z0-9]+)*")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class ReportLang(StrEnum):
    """The languages of the README's headings (``--lang``)."""

    ZH = "zh"
    EN = "en"


class Outcome(StrEnum):
    """How the run ended, as its README row and section say it."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed out"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    UNFINISHED = "unfinished"


@dataclass(frozen=True, slots=True, kw_only=True)
class RunReport:
    """One finished training run, as it is recorded in the model's README."""

    run_id: str
    """Unique per run; embedded in the README so the same run is never added twice."""
    date: str
    """The day the run was made, YYYY-MM-DD."""
    model: str
    """The model folder name, e.g. ``deepseek3-671b``."""
    config_name: str
    """The recipe folder name, e.g. ``4k-bf16-tpu7x-4x4x8``."""
    topology: str
    device_type: str
    precision: str
    chips: int
    steady_step_seconds: float
    steady_tflops_device: float
    steady_tflops_chip: float
    steady_tokens_chip: float
    steady_steps: tuple[int, ...]
    """The steps averaged for the steady-state numbers (usually step 2 onwards)."""
    loss_first: float
    loss_last: float
    final_loss: float
    note: str = ""
    steps: tuple[StepRow, ...] = ()
    """Every step of a short run; a long run's first and last steps (``step_buckets`` set)."""
    step_buckets: tuple[StepBucket, ...] = ()
    """A long run's steps as per-N-steps means with min/max (the README's summarised table);
    empty for a short run, whose README lists every step."""
    chart_buckets: tuple[StepBucket, ...] = ()
    """A long run's steps in finer buckets, for the charts (min/max keep spikes visible)."""
    steps_logged: int = 0
    """How many steps the log reported (a long run's ``steps`` holds only some)."""
    framework: str = "MaxText"
    framework_version: str = ""
    """A branch, tag or commit of the framework."""
    jax_version: str = ""
    libtpu_version: str = ""
    xpk_version: str = ""
    params: str | None = None
    """Total parameter count as people write it, e.g. ``671B``."""
    hardware: str = "TPU v7 (Ironwood)"
    outcome: Outcome = Outcome.SUCCEEDED
    """Anything but a success is marked in the row and the section heading."""
    rehearsal: bool = False
    """A run on the fake cloud: its numbers are not a measurement, and the README says so."""
    goodput: float | None = None
    """Productive step time ÷ wall time, from the request to when the report was written."""
    largest_badput: str | None = None
    """The bucket that took the most time (``SCHEDULING_AND_IMAGE_PULL``, ``PROGRAM_STARTUP``...)."""
    cost_usd: float | None = None
    """What the TPU-hours cost, teardown included (None when the price is unknown)."""
    cost_per_million_tokens: float | None = None
    price_note: str = ""
    """Why there is no cost (``price unknown — set prices.tpu7x ...``); empty when priced."""

    def __post_init__(self) -> None:
        if not _RUN_ID.fullmatch(self.run_id):
            raise InputError(
                f"run id {self.run_id!r} cannot be recorded in a README",
                fix="use letters, digits and single '.', '_', ':' or '-' between them",
            )
        if not _DATE.fullmatch(self.date) or not _is_date(self.date):
            raise InputError(
                f"run date {self.date!r} is not a date in the form YYYY-MM-DD",
                fix="pass the day the run was made, e.g. 2026-11-22",
            )
        if not self.model.strip():
            raise InputError("the report has no model name", fix="pass the model folder name")

    @property
    def loss_drop_percent(self) -> float | None:
        """How much the loss fell from the first to the last step, in percent of the first."""
        if self.loss_first == 0 or not math.isfinite(self.loss_first):
            return None
        return (self.loss_first - self.loss_last) / self.loss_first * 100.0


def step_figures(row: StepRow) -> tuple[float, float, float, float]:
    """The figures a README and its charts show for one step: TFLOP/s/device, TFLOP/s/chip,
    Tokens/s/chip (0 when absent) and the loss (NaN when absent)."""
    return (
        row.tflops_per_device or 0.0,
        row.tflops_per_chip or 0.0,
        row.tokens_per_chip or 0.0,
        math.nan if row.loss is None else row.loss,
    )


def steps_to_json(steps: Sequence[StepRow]) -> list[dict[str, float | int]]:
    """A report's steps as they are stored with it (``step``, ``seconds``, ``tflops_device``,
    ``tflops_chip``, ``tokens_chip``, ``loss``: the figures shown)."""
    shown = []
    for row in steps:
        tflops_device, tflops_chip, tokens_chip, loss = step_figures(row)
        shown.append(
            {
                "step": row.step,
                "seconds": row.seconds,
                "tflops_device": tflops_device,
                "tflops_chip": tflops_chip,
                "tokens_chip": tokens_chip,
                "loss": loss,
            }
        )
    return shown


def steps_from_json(stored: Sequence[Mapping[str, Any]]) -> tuple[StepRow, ...]:
    """The steps :func:`steps_to_json` stored, as rows that show the same figures."""
    return tuple(
        StepRow(
            step=int(s["step"]),
            seconds=float(s["seconds"]),
            tflops_per_device=float(s["tflops_device"]),
            tflops_per_chip=float(s["tflops_chip"]),
            tokens_per_device=None,
            tokens_per_chip=float(s["tokens_chip"]),
            total_weights=None,
            loss=float(s["loss"]),
        )
        for s in stored
    )


def _is_date(text: str) -> bool:
    try:
        _date.fromisoformat(text)
    except ValueError:
        return False
    return True
