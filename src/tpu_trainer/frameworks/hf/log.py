"""Hugging Face Transformers training logs, read into the step records every run uses.

``Trainer`` prints one Python dict per logging step and one at the end::

    {'loss': '5.564', 'grad_norm': '1.25', 'learning_rate': '0.0007', 'epoch': '0.25'}
    {'train_runtime': '12.3', 'train_samples_per_second': '41.6', 'train_steps_per_second': '0.81', 'train_loss': '5.1', 'epoch': '1'}

Transformers 5.x formats the floats as strings (4 significant digits); older versions print
numbers. With its progress bar on, a line can carry tqdm's redraws before the dict, joined by
``\\r``. The generated script (:mod:`tpu_trainer.frameworks.hf.train_script`) adds ``step`` (the
optimizer step, from 1) and ``step_seconds`` to each step's dict; plain Transformers output has
neither.

Each dict is read with :func:`ast.literal_eval` (a literal, never code) and only when the line
holds a dict opening and a known key. Step numbers: ``step`` when present, else the order of the
dicts times ``logging_steps`` (``StepRecord.step`` is 0-based, like MaxText's). Step seconds:
``step_seconds`` when present, else ``train_runtime`` / steps for every step once the summary
is read (an average, compile included), else 0.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from tpu_trainer.metrics.records import ParsedLog, StartupSummary, StepRecord

MAX_DICT_CHARS = 20_000
"""Longer candidates are not parsed (a log dict is a few hundred characters)."""
MAX_TRIES = 8
"""Closing braces tried for one opening before giving up on it."""
_OPEN = ("{'", '{"')
_STEP_KEY = "loss"
_SUMMARY_KEY = "train_runtime"
_OWN_KEYS = frozenset({"loss", "step", "step_seconds"})
_SUMMARY_FIELDS = {
    "train_runtime": "runtime_seconds",
    "train_samples_per_second": "samples_per_second",
    "train_steps_per_second": "steps_per_second",
    "train_loss": "loss",
    "epoch": "epoch",
}


class StepTime(StrEnum):
    """Where the step seconds of a log came from."""

    LOGGED = "logged"
    """Each step's ``step_seconds`` (the generated script's)."""
    AVERAGE = "average"
    """``train_runtime`` / steps, the same for every step."""
    NONE = "none"


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainSummary:
    """The dict ``Trainer.train`` logs at the end."""

    runtime_seconds: float | None
    samples_per_second: float | None
    steps_per_second: float | None
    loss: float | None
    """Mean training loss over the run (``train_loss``)."""
    epoch: float | None
    extra: dict[str, float] = field(default_factory=dict)
    """Other numeric keys (``total_flos`` in older versions...)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HfLog:
    """A whole Transformers log: its steps (in the shared shape), the summary, and where the
    step seconds came from."""

    parsed: ParsedLog
    summary: TrainSummary | None
    step_time: StepTime


def number(value: object) -> float | None:
    """A log value as a float: numbers as they are, strings parsed (``'5.564'``, ``'nan'``)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            return None
    return None


def log_dicts(line: str) -> Iterator[dict[str, object]]:
    """Every dict literal with string keys in ``line`` (tqdm's ``\\r`` redraws skipped)."""
    for segment in line.split("\r"):
        start = _next_open(segment, 0)
        while start >= 0:
            found, end = _dict_at(segment, start)
            if found is not None:
                yield found
            start = _next_open(segment, end if found is not None else start + 1)


def _next_open(text: str, at: int) -> int:
    hits = [i for i in (text.find(o, at) for o in _OPEN) if i >= 0]
    return min(hits) if hits else -1


def _dict_at(text: str, start: int) -> tuple[dict[str, object] | None, int]:
    """The dict literal starting at ``start`` (tried up to each following ``}``) and its end."""
    end = text.find("}", start)
    for _ in range(MAX_TRIES):
        if end < 0 or end - start >= MAX_DICT_CHARS:
            break
        try:
            value = ast.literal_eval(text[start : end + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            end = text.find("}", end + 1)
            continue
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return value, end + 1
        return None, end + 1
    return None, start + 1


def _is_step(d: Mapping[str, object]) -> bool:
    return _STEP_KEY in d and _SUMMARY_KEY not in d


def step_record(d: Mapping[str, object], index: int, logging_steps: int = 1) -> StepRecord:
    """One training-step dict as a :class:`StepRecord` (``index``: its place among the step
    dicts, used when the dict has no ``step``)."""
    logged = number(d.get("step"))
    step = int(logged) - 1 if logged is not None else (index + 1) * logging_steps - 1
    extra = {k: v for k, raw in d.items() if k not in _OWN_KEYS and (v := number(raw)) is not None}
    return StepRecord(
        step=step,
        seconds=number(d.get("step_seconds")) or 0.0,
        tflops_per_device=None,
        tokens_per_device=None,
        total_weights=None,
        loss=number(d.get(_STEP_KEY)),
        extra=extra,
    )


def train_summary(d: Mapping[str, object]) -> TrainSummary:
    """The final ``train_runtime`` dict."""
    known = {attr: number(d.get(key)) for key, attr in _SUMMARY_FIELDS.items()}
    extra = {
        k: v for k, raw in d.items() if k not in _SUMMARY_FIELDS and (v := number(raw)) is not None
    }
    return TrainSummary(**known, extra=extra)


def parse_step(line: str, index: int = 0) -> StepRecord | None:
    """The training step one line logs, or None (for following a run line by line)."""
    if _STEP_KEY not in line:
        return None
    for d in log_dicts(line):
        if _is_step(d):
            return step_record(d, index)
    return None


def read_hf_log(lines: Iterable[str], *, logging_steps: int = 1) -> HfLog:
    """Every step and the summary of a Transformers log."""
    steps: list[StepRecord] = []
    summary: TrainSummary | None = None
    count = 0
    for line in lines:
        count += 1
        if "{" not in line or (_STEP_KEY not in line and _SUMMARY_KEY not in line):
            continue
        for d in log_dicts(line):
            if _is_step(d):
                steps.append(step_record(d, len(steps), logging_steps))
            elif _SUMMARY_KEY in d:
                summary = train_summary(d)
    timed, source = _with_seconds(steps, summary)
    parsed = ParsedLog(steps=timed, hidden_steps=(), startup=StartupSummary(), lines=count)
    return HfLog(parsed=parsed, summary=summary, step_time=source)


def read_log(lines: Iterable[str]) -> ParsedLog:
    """:func:`read_hf_log`'s steps, in the shape the launchers' readers return."""
    return read_hf_log(lines).parsed


def _with_seconds(
    steps: list[StepRecord], summary: TrainSummary | None
) -> tuple[tuple[StepRecord, ...], StepTime]:
    if any(s.seconds > 0 for s in steps):
        return tuple(steps), StepTime.LOGGED
    runtime = summary.runtime_seconds if summary is not None else None
    last = max((s.step for s in steps), default=-1)
    if not steps or not runtime or last < 0:
        return tuple(steps), StepTime.NONE
    average = runtime / (last + 1)
    return tuple(replace(s, seconds=average) for s in steps), StepTime.AVERAGE
