"""Long runs (thousands to hundreds of thousands of steps): compact step columns, streamed
JSON, the bounded step table, the downsampled charts, the summarised README section and the
batched store insert."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import GOLDEN, check_golden, new_run
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.results import (
    report_from_json,
    report_steps,
    report_to_json,
    stored_figures,
)
from tpu_trainer.app.step_display import StepDisplay
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.metrics.columns import LazyRows
from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.metrics.stream import LONG_RUN_STEPS, write_json, write_jsonl
from tpu_trainer.metrics.summary import RunMetrics, step_json, summarize
from tpu_trainer.plan.slices import Slice
from tpu_trainer.report import RunReport, render_readme
from tpu_trainer.report.downsample import StepBucket, bucket_steps, nice_width
from tpu_trainer.report.step_table import Gap, bounded
from tpu_trainer.store.db import RunMode, RunStore, StepRow

pytestmark = pytest.mark.unit

SPIKE = 50_000


def _records(steps: int, spike: int = SPIKE, skip: tuple[int, ...] = ()) -> Iterator[StepRecord]:
    """A generated run: step 0 compiles, step ``spike`` is slow with a loss spike."""
    for n in range(steps):
        if n in skip:
            continue
        seconds = 485.0 if n == 0 else (30.0 if n == spike else 7.4 + (n % 7) * 0.01)
        loss = 9.5 if n == spike else 12.0 - 10.0 * n / steps
        yield StepRecord(
            step=n,
            seconds=seconds,
            tflops_per_device=32.0 * 7.4 / seconds,
            tokens_per_device=550.0 * 7.4 / seconds,
            total_weights=262144.0,
            loss=round(loss, 3),
        )


def _metrics(steps: int, **kw: object) -> RunMetrics:
    return summarize(
        _records(steps, **kw),  # type: ignore[arg-type]
        slice=Slice.parse("tpu7x-4x4x8"),
        precision=Precision.BF16,
        profiler_skip=5,
        profiler_steps=3,
    )


def _row(step: int, seconds: float = 7.4, excluded: str | None = None) -> StepRow:
    return StepRow(
        step=step,
        seconds=seconds,
        tflops_per_device=1.0,
        tflops_per_chip=2.0,
        tokens_per_device=None,
        tokens_per_chip=None,
        total_weights=None,
        loss=1.0,
        excluded=excluded,
    )


# ---- downsampling ----------------------------------------------------------------------------
def test_buckets_keep_a_one_step_spike_and_every_step() -> None:
    rows = list(_metrics(100_000).rows)
    width = nice_width(len(rows), 1000)
    buckets = bucket_steps(rows, width)
    assert width == 100 and len(buckets) == 1000
    assert sum(b.count for b in buckets) == 100_000
    spiked = next(b for b in buckets if b.first <= SPIKE <= b.last)
    assert spiked.loss is not None and spiked.loss.high == 9.5
    assert spiked.seconds.high == 30.0 and spiked.seconds.low < 7.5
    assert max(b.seconds.high for b in buckets) == 485.0  # the compile step too
    others = [b for b in buckets if b is not spiked and b.loss is not None]
    assert all(b.loss.high < 7.1 for b in others if b.first > SPIKE)  # type: ignore[union-attr]
    assert spiked.loss.mean < 9.5  # the mean alone would hide it


@pytest.mark.parametrize(
    ("steps", "most", "width"),
    [(20, 50, 1), (100_000, 50, 2000), (500_000, 50, 10_000), (123_456, 1000, 200), (1, 1, 1)],
)
def test_nice_widths(steps: int, most: int, width: int) -> None:
    assert nice_width(steps, most) == width
    assert -(-steps // width) <= most


def test_bucket_json_round_trip() -> None:
    bucket = bucket_steps([_row(0), _row(1, 9.0)], 10)[0]
    assert StepBucket.from_json(json.loads(json.dumps(bucket.to_json()))) == bucket


# ---- bounded step table --------------------------------------------------------------------
def test_a_short_run_shows_every_step() -> None:
    rows = [_row(n) for n in range(60)]
    assert bounded(iter(rows), 60) == rows
    assert bounded(iter(rows), None) == rows


def test_a_long_run_shows_first_outliers_last_with_gaps() -> None:
    rows = (
        _row(n, 30.0, "outlier: 30.000 s against a median of 7.400 s (beyond 2x)")
        if n in (500, 70_000)
        else _row(n)
        for n in range(100_000)
    )
    shown = bounded(rows, 60)
    steps = [r.step for r in shown if isinstance(r, StepRow)]
    gaps = [r for r in shown if isinstance(r, Gap)]
    assert steps == [*range(24), 500, 70_000, *range(99_976, 100_000)]
    assert [(g.first_step, g.last_step, g.rows) for g in gaps] == [
        (24, 499, 476),
        (501, 69_999, 69_499),
        (70_001, 99_975, 29_975),
    ]
    assert gaps[0].describe() == "… 476 steps not shown (steps 24–499) …"


def test_steps_absent_from_the_log_are_marked() -> None:
    shown = bounded(iter([_row(0), _row(1), _row(5)]), 60)
    assert shown[2] == Gap(0, 2, 4, absent=True)
    assert shown[2].describe() == "… steps 2–4 absent from the log …"


# ---- metrics in columns and streamed JSON ----------------------------------------------------
def test_long_run_metrics_and_missing_steps() -> None:
    m = _metrics(20_000, spike=10_000, skip=(300, 301))
    assert m.steps_completed == 20_000 and len(m.rows) == 19_998
    assert m.excluded()[10_000].startswith("outlier: 30.000 s")
    assert "2 step(s) absent from the log: 300-301" in m.notes
    assert m.rows[-1].step == 19_999 and m.rows[299].step == 299 and m.rows[300].step == 302


def test_json_lines_match_json_dumps_of_each_row() -> None:
    m = _metrics(300)
    rows = list(m.rows)
    out = io.StringIO()
    write_jsonl(m, out)
    lines = out.getvalue().splitlines()
    assert json.loads(lines[0]) == m.to_json(steps=False)
    assert lines[1:] == [json.dumps(step_json(r)) for r in rows]


def test_streamed_json_is_the_whole_document() -> None:
    long, short = _metrics(LONG_RUN_STEPS + 50), _metrics(30)
    out = io.StringIO()
    write_json(long, out)
    assert json.loads(out.getvalue()) == json.loads(json.dumps(long.to_json()))
    out = io.StringIO()
    write_json(short, out)
    assert out.getvalue() == json.dumps(short.to_json(), indent=2) + "\n"


def test_out_of_order_and_repeated_steps_as_before() -> None:
    records = list(_records(10))
    shuffled = [records[5], *records[:5], records[3], *records[6:]]
    m = summarize(
        shuffled,
        slice=Slice.parse("tpu7x-4x4x8"),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )
    assert [r.step for r in m.rows] == list(range(10))
    assert m.steady_steps == tuple(range(2, 10))
    assert "1 repeated step line(s) ignored (several workers log each step)" in m.notes


# ---- store -----------------------------------------------------------------------------------
def _store(folder: Path) -> RunStore:
    store = RunStore(folder / "runs.db", RunMode.REAL)
    new_run(store, "r1", LaunchPath.XPK, "tpu7x-256")
    return store


def test_steps_are_stored_from_a_stream_in_batches(tmp_path: Path) -> None:
    store = _store(tmp_path)
    m = _metrics(5_000, spike=4_000)
    store.record_steps("r1", m.rows)  # LazyRows: made one at a time
    store.set_metrics("r1", stored_figures(m))
    assert store.step_count("r1") == 5_000
    back = list(store.iter_step_rows("r1"))
    assert back == list(m.rows)
    stored = store.metrics("r1") or {}
    assert "steps" not in stored and stored["excluded_steps"]["4000"].startswith("outlier")
    assert "steps" in stored_figures(_metrics(30))


def test_show_prints_a_bounded_step_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from tpu_trainer.cli.main import app

    monkeypatch.setenv("TPU_TRAINER_HOME", str(tmp_path))
    store = _store(tmp_path)
    m = _metrics(5_000, spike=4_000)
    store.record_steps("r1", m.rows)
    store.set_metrics("r1", stored_figures(m))
    store.close()
    shown = CliRunner().invoke(app, ["show", "r1"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "3,976 steps not shown (steps 24–3,999)" in shown.output
    assert "│ 4000 │  30.000 │" in shown.output and "│ 4999 │" in shown.output
    assert "steady state (steps 2-4, 8-3999, 4001-4999 (4,994 steps))" in shown.output
    assert len(shown.output.splitlines()) < 90
    every = CliRunner().invoke(app, ["show", "r1", "--steps", "all"], env={"COLUMNS": "200"})
    assert len(every.output.splitlines()) > 5_000


# ---- the README section of a long run --------------------------------------------------------
def _long_report(steps: int) -> RunReport:
    m = _metrics(steps)
    assert m.step_seconds is not None and m.loss is not None
    return RunReport(
        run_id="long0001",
        date="2026-11-22",
        model="llama3.1-8b",
        config_name="8k-bf16-tpu7x-4x4x8",
        topology="4x4x8",
        device_type="tpu7x-256",
        precision="bf16",
        chips=128,
        steady_step_seconds=m.step_seconds,
        steady_tflops_device=m.tflops_per_device or 0.0,
        steady_tflops_chip=m.tflops_per_chip or 0.0,
        steady_tokens_chip=m.tokens_per_chip or 0.0,
        steady_steps=m.steady_steps,
        loss_first=m.loss.first,
        loss_last=m.loss.last,
        final_loss=m.loss.last,
        framework_version="0.2.5",
        jax_version="0.8.1",
        **report_steps(m),
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_long_run_readme_section_is_summarised(lang: str, update_golden: bool) -> None:
    report = _long_report(100_000)
    text = render_readme(report, lang=lang, plot_links=("a-step_time.png",))  # type: ignore[arg-type]
    check_golden(GOLDEN / "report" / f"long_run_{lang}.md", text, update_golden)
    assert len(text.splitlines()) < 200
    assert "| 50000–51999 | " in text and "9.500)" in text  # the spike's bucket keeps its max
    assert "| 0 | 485.00 |" in text and "| 99999 | " in text


def test_a_long_run_report_survives_the_store() -> None:
    report = _long_report(1_000)
    stored = json.loads(json.dumps(report_to_json(report, None)))
    back, _ = report_from_json(stored)
    assert back.step_buckets == report.step_buckets and back.chart_buckets == report.chart_buckets
    assert render_readme(back, lang="en") == render_readme(
        replace(report, steps=back.steps), lang="en"
    )


def test_the_step_display_keeps_only_recent_step_times() -> None:
    show = StepDisplay(SilentDisplay())
    for n in range(1_000):
        show(f"completed step: {n}, seconds: 7.400, TFLOP/s/device: 1.0, loss: 2.0")
    assert show.lines == 1_000 and len(show._seconds) == 5


def test_the_columns_store_the_rows_the_row_objects_store(tmp_path: Path) -> None:
    m = _metrics(1_000)
    assert isinstance(m.rows, LazyRows)
    by_row, by_column = _store(tmp_path / "a"), _store(tmp_path / "b")
    by_row.record_steps("r1", list(m.rows))
    by_column.record_step_values(m.rows.store_values("r1"))
    assert by_column.steps("r1") == by_row.steps("r1") and by_column.step_count("r1") == 1_000
    assert by_column.step_rows("r1")[3].excluded == m.rows[3].excluded


# ---- reading a log at line rate --------------------------------------------------------------
def test_the_block_scanner_reads_what_the_line_reader_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tpu_trainer.frameworks.maxtext import log_scan
    from tpu_trainer.frameworks.maxtext.badput_lines import BadputLines
    from tpu_trainer.frameworks.maxtext.log import iter_events
    from tpu_trainer.metrics.log_badput import MeasuredBadput
    from tpu_trainer.metrics.stream import LogTally

    fixtures = sorted((Path(__file__).parent / "fixtures" / "maxtext_logs").glob("*.log"))
    text = "".join(p.read_text(encoding="utf-8") for p in fixtures) + "completed step: 99, sec"
    monkeypatch.setattr(log_scan, "BLOCK", 97)  # lines cut across blocks
    by_line, by_block = LogTally(), LogTally()
    by_line.feed(iter_events(by_line.counted(io.StringIO(text))))
    log_scan.scan_log(io.StringIO(text), by_block)
    summary = {
        "slice": Slice.parse("v6e-4x4"),
        "precision": Precision.BF16,
        "profiler_skip": 5,
        "profiler_steps": 3,
    }
    a, b = by_line.summarize(**summary), by_block.summarize(**summary)  # type: ignore[arg-type]
    assert by_block.lines == by_line.lines == len(text.splitlines())
    read_alone = MeasuredBadput()  # the badput lines, read one line at a time
    reader = BadputLines(read_alone)
    for line in io.StringIO(text):
        reader.feed(line, len(line))
    assert b.to_json() == {**a.to_json(), "log_badput": read_alone.to_json()}
    assert by_block.startup == by_line.startup
    assert len(b.rows) >= 10 and b.notes == a.notes and by_block.columns.duplicates > 50
