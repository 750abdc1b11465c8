"""A long run's views read straight from the step columns (no row object per step) give what
the row-by-row reading gives: chart and README buckets, the run's tokens and step times, the
steady state, the bounded step table and the JSON text of the figures."""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import store_with_run
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.metrics.json_text import FloatTexts, float_text
from tpu_trainer.metrics.lazy_rows import LazyRows
from tpu_trainer.metrics.ledger import tokens_of, tokens_trained
from tpu_trainer.metrics.positions import Positions
from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.metrics.summary import RunMetrics, summarize
from tpu_trainer.plan.slices import Slice
from tpu_trainer.report.downsample import Stat, StepBucket, bucket_series, bucket_steps_by
from tpu_trainer.report.step_table import IndexedRows, bounded, ranges
from tpu_trainer.store.db import StepRow

pytestmark = pytest.mark.unit


def _records(steps: int) -> Iterator[StepRecord]:
    """Steps with what a bucket must skip: NaN and infinite figures, missing ones, rampup
    steps, gaps, a spike."""
    for n in range(steps):
        if n % 97 == 13:
            continue  # absent from the log
        seconds = 485.0 if n == 0 else 7.4 + (n % 11) * 0.013
        if n % 89 == 7:
            seconds = math.inf
        loss: float | None = 12.0 - n / 700 + (n % 5) * 0.0071
        if n % 53 == 3:
            loss = math.nan
        elif n % 61 == 4:
            loss = None
        yield StepRecord(
            step=n,
            seconds=seconds,
            tflops_per_device=None if n % 41 == 2 else 32.0 * 7.4 / seconds,
            tokens_per_device=None if n % 43 == 1 else 550.0 * 7.4 / seconds + n * 1e-3,
            total_weights=None if n % 47 == 5 else 262144.0,
            loss=20.0 if n == 1500 else loss,
            rampup=n % 300 == 150,
        )


def _metrics(steps: int) -> RunMetrics:
    return summarize(
        _records(steps),
        slice=Slice.parse("tpu7x-4x4x8"),
        precision=Precision.BF16,
        profiler_skip=5,
        profiler_steps=3,
    )


def _by_hand(rows: list[StepRow], width: int) -> list[StepBucket]:
    """Buckets the plain way: one running total, minimum and maximum per figure."""
    buckets: list[StepBucket] = []
    for key in sorted({r.step // width for r in rows}):
        part = [r for r in rows if r.step // width == key]
        stats: list[Stat | None] = []
        for name in ("seconds", "tflops_per_device", "tflops_per_chip", "tokens_per_chip", "loss"):
            total, values = 0.0, []
            for r in part:
                v: float | None = getattr(r, name)
                if v is not None and math.isfinite(v):
                    total += v
                    values.append(v)
            stats.append(Stat(total / len(values), min(values), max(values)) if values else None)
        seconds = stats[0] or Stat(math.nan, math.nan, math.nan)
        buckets.append(
            StepBucket(width, part[0].step, part[-1].step, len(part), seconds, *stats[1:])
        )
    return buckets


def _same(a: list[StepBucket], b: list[StepBucket]) -> bool:
    return repr(a) == repr(b)  # NaN != NaN: compare the text, exact to the last digit


def test_buckets_from_the_columns_are_the_buckets_of_the_rows() -> None:
    m = _metrics(3_000)
    assert isinstance(m.rows, LazyRows)
    rows = list(m.rows)
    by_column = bucket_series(*m.rows.series(), [7, 100, 5_000])
    by_row = bucket_steps_by(rows, [7, 100, 5_000])
    for width, columns, from_rows in zip((7, 100, 5_000), by_column, by_row, strict=True):
        expected = _by_hand(rows, width)
        assert _same(columns, expected) and _same(from_rows, expected)
    spike = next(b for b in by_column[1] if b.first <= 1500 <= b.last)
    assert spike.loss is not None and spike.loss.high == 20.0 and spike.loss.mean < 11
    assert by_column[2][0].count == len(rows)


def test_a_bucket_of_only_missing_figures_has_none() -> None:
    steps = [0, 1, 2, 10]
    nan = math.nan
    series = [[1.0, 2.0, math.inf, 4.0], [nan] * 4, [nan] * 4, [3.0, nan, nan, nan], [nan] * 4]
    (buckets,) = bucket_series(steps, series, [10])
    first, second = buckets
    assert (first.first, first.last, first.count) == (0, 2, 3)
    assert first.seconds == Stat(1.5, 1.0, 2.0) and first.tflops_device is None
    assert first.tokens_chip == Stat(3.0, 3.0, 3.0) and second.tokens_chip is None
    with pytest.raises(ValueError, match="5 series"):
        bucket_series(steps, series[:4], [10])


def test_the_ledger_reads_step_figures_without_a_dict_per_step(tmp_path: Path) -> None:
    store = store_with_run(tmp_path)
    m = _metrics(2_000)
    store.record_step_values(m.rows.store_values("r1"))  # type: ignore[attr-defined]
    figures = list(store.step_figures("r1", "total_weights", "tokens_device", "seconds"))
    steps = store.steps("r1")
    assert len(figures) == len(steps) == len(m.rows)
    assert tokens_of(figures, 8) == tokens_trained(steps, 8)
    assert [s for (s,) in store.step_figures("r1", "seconds")] == [s["seconds"] for s in steps]
    with pytest.raises(ValueError, match="not step figure columns"):
        store.step_figures("r1", "seconds; DROP TABLE steps")


def test_positions_are_runs_read_by_slices() -> None:
    steady = Positions(10, (0, 1, 5))
    assert list(steady) == [2, 3, 4, 6, 7, 8, 9] and len(steady) == 7
    assert list(steady.runs()) == [(2, 5), (6, 10)]
    assert steady.picked([0, 3, 6]) == [2, 6, 9]
    assert list(steady.without([6, 9])) == [2, 3, 4, 7, 8]
    assert list(steady.gather(array("d", range(10)))) == [2.0, 3.0, 4.0, 6.0, 7.0, 8.0, 9.0]
    assert list(Positions(3, (0, 1, 2))) == [] and not Positions(0)


def _plain(steps: int, slow: tuple[int, ...] = ()) -> Iterator[StepRecord]:
    for n in range(steps):
        seconds = 485.0 if n == 0 else (30.0 if n in slow else 7.4 + (n % 7) * 0.01)
        yield StepRecord(
            step=n,
            seconds=float("nan") if n == 40 else seconds,
            tflops_per_device=1.0,
            tokens_per_device=2.0,
            total_weights=8.0,
            loss=3.0,
        )


@pytest.mark.parametrize(("skip", "count"), [(5, 3), (0, 4), (None, None), (1_000, 3)])
def test_the_steady_state_of_a_plain_log_is_that_of_a_log_with_rampup(
    skip: int | None, count: int | None
) -> None:
    """A log whose steps all logged every figure takes a shorter way to the steady state;
    one rampup step at the end sends the same steps the long way."""
    summary = {
        "slice": Slice.parse("v6e-8"),
        "precision": Precision.BF16,
        "profiler_skip": skip,
        "profiler_steps": count,
    }
    records = list(_plain(600, slow=(3, 77, 300, 599)))
    plain = summarize(records, **summary)  # type: ignore[arg-type]
    rampup = StepRecord(
        step=600,
        seconds=7.4,
        tflops_per_device=None,
        tokens_per_device=None,
        total_weights=None,
        loss=None,
        rampup=True,
    )
    mixed = summarize([*records, rampup], **summary)  # type: ignore[arg-type]
    assert plain.steady_steps == mixed.steady_steps
    assert {**plain.excluded(), 600: "batch-size rampup (no throughput figures)"} == (
        mixed.excluded()
    )
    assert plain.step_seconds == mixed.step_seconds and plain.tokens_check == mixed.tokens_check
    assert plain.excluded()[40].startswith("outlier: nan s")
    assert [s for s in (3, 77, 300, 599) if s not in plain.steady_steps] == [3, 77, 300, 599]


@pytest.mark.parametrize("limit", [3, 7, 60, 2_000])
@pytest.mark.parametrize("slow", [(), (900,), tuple(range(100, 1_900, 40))])
def test_a_bounded_table_picks_from_the_columns_what_it_picks_from_a_stream(
    limit: int, slow: tuple[int, ...]
) -> None:
    m = summarize(
        _plain(2_000, slow),
        slice=Slice.parse("v6e-8"),
        precision=Precision.BF16,
        profiler_skip=5,
        profiler_steps=3,
    )
    assert isinstance(m.rows, IndexedRows)
    picked = bounded(m.rows, limit)
    assert repr(picked) == repr(bounded(iter(list(m.rows)), limit))  # NaN seconds: the text
    shown = [r for r in picked if isinstance(r, StepRow)]
    assert len(shown) <= limit and (limit < 2_000 or len(shown) == 2_000)
    if slow and limit >= 7:
        assert any(r.step in slow for r in shown)  # an outlier between the first and last


def test_a_column_of_floats_is_written_as_json_dumps_writes_it() -> None:
    odd = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-300, 7.45, 1e16, -2.5]
    repeating = FloatTexts()
    for part in range(6):
        values = [*odd, *(7.0 + (n % 300) / 1000 for n in range(900)), part / 3]
        assert repeating(values) == [json.dumps(v) for v in values]
    assert repeating._known is not None  # a few hundred values: remembered
    distinct = FloatTexts()
    for part in range(5):
        values = [part + n / 17389 for n in range(10_000)]
        assert distinct(values) == [json.dumps(v) for v in values]
    assert distinct._known is None  # every value new: formatted in bulk
    assert [float_text(v) for v in odd] == [json.dumps(v) for v in odd]


@pytest.mark.parametrize(
    "numbers",
    [
        [1, 2, 3, 7],
        [],
        [5],
        [*range(2, 5), *range(8, 50_000), *range(50_001, 100_000)],
        list(range(0, 40, 2)),
        [3, 3, 4, 9, 8, 7],  # not rising: read one by one
        [5, 5],
    ],
)
def test_step_ranges(numbers: list[int]) -> None:
    runs: list[list[int]] = []
    for n in numbers:  # the plain way
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    expected = ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
    assert ranges(numbers) == expected
    assert ranges(tuple(numbers), "–") == expected.replace("-", "–")
