"""A training log read as it streams: steps into columns, the rest into a few facts.

:class:`LogTally` takes the events a log reader yields (``frameworks.maxtext.log.iter_events``)
one at a time and keeps nothing per line: steps go to :class:`StepColumns` (41 bytes a step),
hidden profiler steps and start-up facts to short lists. :meth:`LogTally.summarize` then gives
the run's :class:`RunMetrics`. :func:`write_json` and :func:`write_jsonl` print a summary with
every step without building the whole document in memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TextIO

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.metrics.columns import StepColumns
from tpu_trainer.metrics.lazy_rows import LazyRows
from tpu_trainer.metrics.log_badput import MeasuredBadput
from tpu_trainer.metrics.records import (
    Event,
    HiddenStep,
    StartupFact,
    StartupSummary,
    StepRecord,
    summarize_startup,
)
from tpu_trainer.metrics.summary import RunMetrics, step_json, summarize_columns
from tpu_trainer.plan.slices import Slice

LONG_RUN_STEPS = 200
"""Above this many steps a run is long: its views summarise (bounded tables, downsampled
charts, compact JSON lines) and its stored figures leave the per-step list to the steps table."""


class LogTally:
    """What a stream of log events added up to."""

    def __init__(self) -> None:
        self.columns = StepColumns()
        self.hidden: list[int] = []
        self._facts: list[StartupFact] = []
        self.lines = 0
        self.badput = MeasuredBadput()
        """The badput seconds the log's reader measured (TPU init, checkpoints, data waits)."""

    def add(self, event: Event) -> None:
        if isinstance(event, StepRecord):
            self.columns.add(event)
        elif isinstance(event, HiddenStep):
            self.hidden.append(event.step)
        else:
            self._facts.append(event)

    def feed(self, events: Iterable[Event]) -> LogTally:
        for event in events:
            self.add(event)
        return self

    def counted(self, lines: Iterable[str]) -> Iterator[str]:
        """``lines``, counted into :attr:`lines` as they pass."""
        for line in lines:
            self.lines += 1
            yield line

    @property
    def startup(self) -> StartupSummary:
        return summarize_startup(self._facts)

    def summarize(
        self,
        *,
        slice: Slice,
        precision: Precision,
        profiler_skip: int | None,
        profiler_steps: int | None,
    ) -> RunMetrics:
        return summarize_columns(
            self.columns,
            slice=slice,
            precision=precision,
            profiler_skip=profiler_skip,
            profiler_steps=profiler_steps,
            hidden_steps=tuple(self.hidden),
            startup=self.startup,
            log_badput=self.badput,
        )


def write_json(metrics: RunMetrics, out: TextIO) -> None:
    """``metrics.to_json()`` as indented JSON, written step by step. A short run's text is
    exactly ``json.dumps(metrics.to_json(), indent=2)``; a long run's steps take one compact
    line each."""
    if len(metrics.rows) <= LONG_RUN_STEPS:
        out.write(json.dumps(metrics.to_json(), indent=2) + "\n")
        return
    figures = metrics.to_json(steps=False)
    steady = metrics.steady_steps
    head = json.dumps({**figures, "steady_steps": _STEADY}, indent=2)
    before, after = head[: head.rindex("\n}")].split(json.dumps(_STEADY))
    out.write(before + "[")
    for at in range(0, len(steady), 10_000):
        out.write(("," if at else "") + ",".join(map(str, steady[at : at + 10_000])))
    out.write("]" + after + ',\n  "steps": [\n')
    separator = "    "
    for chunk in _step_chunks(metrics):
        if chunk:
            out.write(separator + ",\n    ".join(chunk))
            separator = ",\n    "
    out.write("\n  ]\n}\n")


_STEADY = "\u0000steady\u0000"
"""Where the steady steps go in a long run's indented head (written compactly, in pieces)."""


def write_jsonl(metrics: RunMetrics, out: TextIO) -> None:
    """JSON Lines: the summary (``to_json`` without ``steps``) on the first line, then one
    line per step."""
    out.write(json.dumps(metrics.to_json(steps=False)) + "\n")
    for chunk in _step_chunks(metrics):
        if chunk:
            out.write("\n".join(chunk) + "\n")


def _step_chunks(metrics: RunMetrics) -> Iterator[list[str]]:
    """The steps' JSON lines, some thousands at a time."""
    rows = metrics.rows
    if isinstance(rows, LazyRows):
        return rows.json_chunks()
    return iter([[json.dumps(step_json(row)) for row in rows]])
