"""The records every training-log reader yields, whatever the framework wrote the log.

The MaxText reader (``frameworks.maxtext.log``), the Tunix and Hugging Face readers and the
Ray log splitter all turn lines into these: a :class:`StepRecord` per completed step, a
:class:`HiddenStep` for a step whose metrics were hidden, :class:`StartupFact` lines before
training, folded into one :class:`StartupSummary`, and a whole log as a :class:`ParsedLog`.
:mod:`tpu_trainer.metrics.summary` computes a run's figures from them.

Times in logs come from absl prefixes (``I1122 04:29:46.380500 ...]``), which carry no year:
:func:`absl_time` reads one as seconds since 1 January and :func:`elapsed` subtracts two.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

_ABSL = re.compile(r"[IWEF](\d\d)(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?) +\d+ [^\s\]]+:\d+\] ")

# Days before each month in a leap year: absl prefixes carry no year, so times are seconds
# since 1 January of an unknown year (a log that crosses New Year wraps; see elapsed()).
_DAYS_BEFORE_MONTH = (0, 31, 60, 91, 121, 152, 182, 213, 244, 274, 305, 335)
_YEAR_SECONDS = 366 * 86400


class FactKind(StrEnum):
    """What a start-up line tells."""

    LOG_START = "log_start"
    """Time of the first absl-prefixed line (``value``: seconds since 1 January)."""
    NUM_DEVICES = "num_devices"
    PARAMETERS = "parameters_billion"
    MEMORY_ESTIMATE = "memory_estimate_gb"
    MEMSTATS = "memstats"
    """A ``Memstats`` header or a per-device ``Using (GB) used / limit`` line (``value``: used GB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRecord:
    """One ``completed step:`` line."""

    step: int
    """0-based, as MaxText counts."""
    seconds: float
    tflops_per_device: float | None
    """Absent during batch-size rampup."""
    tokens_per_device: float | None
    """Absent during batch-size rampup."""
    total_weights: float | None
    """Non-padding target tokens of the whole global batch (absent only in very old versions)."""
    loss: float | None
    extra: dict[str, float] = field(default_factory=dict)
    """Other numeric fields: ``lm_loss``, ``perplexity``, ``moe_lb_loss``, ``mtp_loss``..."""
    diag: str | None = None
    """The free text after ``diag:``."""
    rampup: bool = False
    """The line had the ``[Rampup Batch Size Phase]`` prefix."""
    worker: str | None = None
    """Ray's prefix without brackets (``RayTrainWorker pid=21663, ip=10.12.3.6``)."""
    repeated: int = 0
    """N of Ray's ``[repeated Nx across cluster]``: other workers' similar lines Ray dropped."""
    timestamp: float | None = None
    """Time of the absl prefix, seconds since 1 January (year unknown)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class HiddenStep:
    """A step whose metrics MaxText hid (profiler activation/deactivation)."""

    step: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupFact:
    """One fact from the lines before training starts."""

    kind: FactKind
    value: float | None
    text: str
    """The line from its marker on (``Num_devices: 1, shape (...)``)."""


Event = StepRecord | HiddenStep | StartupFact


def absl_time(text: str) -> float | None:
    """Seconds since 1 January of the absl prefix in ``text`` (``I1122 04:29:46.380500 ...]``)."""
    m = _ABSL.search(text)
    if m is None:
        return None
    month, day = int(m[1]), int(m[2])
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    days = _DAYS_BEFORE_MONTH[month - 1] + day - 1
    return days * 86400 + int(m[3]) * 3600 + int(m[4]) * 60 + float(m[5])


def elapsed(start: float, end: float) -> float:
    """Seconds from ``start`` to ``end`` (two :func:`absl_time` values), across New Year too."""
    delta = end - start
    return delta + _YEAR_SECONDS if delta < 0 else delta


@dataclass(frozen=True, slots=True, kw_only=True)
class StartupSummary:
    """What the start-up lines said, one field per fact (the first of each kind wins)."""

    log_start: float | None = None
    """:func:`absl_time` of the first timestamped line."""
    num_devices: int | None = None
    parameters_billion: float | None = None
    memory_estimate_gb: float | None = None
    memory_estimate: str | None = None
    memstats: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {
            "num_devices": self.num_devices,
            "parameters_billion": self.parameters_billion,
            "memory_estimate_gb": self.memory_estimate_gb,
            "memory_estimate": self.memory_estimate,
            "memstats": list(self.memstats),
        }


def summarize_startup(facts: Iterable[StartupFact]) -> StartupSummary:
    """Fold start-up facts into one :class:`StartupSummary`."""
    first: dict[FactKind, StartupFact] = {}
    memstats: list[str] = []
    for fact in facts:
        first.setdefault(fact.kind, fact)
        if fact.kind is FactKind.MEMSTATS:
            memstats.append(fact.text)

    def value(kind: FactKind) -> float | None:
        fact = first.get(kind)
        return fact.value if fact else None

    devices = value(FactKind.NUM_DEVICES)
    estimate = first.get(FactKind.MEMORY_ESTIMATE)
    return StartupSummary(
        log_start=value(FactKind.LOG_START),
        num_devices=None if devices is None else int(devices),
        parameters_billion=value(FactKind.PARAMETERS),
        memory_estimate_gb=value(FactKind.MEMORY_ESTIMATE),
        memory_estimate=estimate.text if estimate else None,
        memstats=tuple(memstats),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedLog:
    """A whole log, read: step lines in log order, hidden steps, start-up facts."""

    steps: tuple[StepRecord, ...]
    hidden_steps: tuple[int, ...]
    startup: StartupSummary
    lines: int
