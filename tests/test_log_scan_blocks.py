"""The block reader of long MaxText logs gives what the line reader gives, on tricky logs."""

from __future__ import annotations

import io
import json

import pytest

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.frameworks.maxtext import log_scan
from tpu_trainer.frameworks.maxtext.log import iter_events
from tpu_trainer.metrics.stream import LogTally, write_json, write_jsonl
from tpu_trainer.metrics.summary import RunMetrics, step_json
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

_PREFIX = "I1122 04:29:{:02d}.380500 139763251608448 metric_logger.py:265] "


def _step(n: int, loss: str = "2.500", tail: str = "") -> str:
    return (
        f"{_PREFIX.format(n % 60)}completed step: {n}, seconds: 7.{n % 1000:03d}, "
        f"TFLOP/s/device: 31.5, Tokens/s/device: 550.25, total_weights: 262144, "
        f"loss: {loss}{tail}\n"
    )


def _chatter(n: int) -> str:
    return f"{_PREFIX.format(n % 60)}data loader: prefetched batch {n}\n"


def _special(n: int) -> str | None:
    """The line a tricky log has for step ``n`` when it is not a plain one."""
    plain = _step(n)
    return {
        50: _step(n, "nan"),
        60: plain.replace(", total_weights: 262144", ""),  # a missing field
        70: _step(n, "2.1, lm_loss: 2.1, diag: grad norm 3"),
        80: "(RayTrainWorker pid=7, ip=10.0.0.1) " + plain.split("] ", 1)[1],
        90: "\x1b[36m" + _step(n, tail=" [repeated 3x across cluster]\x1b[0m"),
        100: "completed profiler activation/deactivation step: 100\n",
        110: _step(n, "2.0").rstrip("\n") + "\r\n",
        120: _step(n, "1_0"),  # Python reads it as 10
        130: _step(n, "abc"),
        140: _step(n - 5),  # a repeated step
        150: f"[Rampup Batch Size Phase] {plain}",
        160: _step(n, "2.2   "),
        170: _step(155),  # out of order
        180: _step(n, tail=" [repeated 2x across cluster]"),  # Ray's merge, no colours
        190: _chatter(n).replace("data loader", "restore completed in 3 s; data loader") + plain,
    }.get(n)


def _tricky() -> str:
    """Plain steps with every kind of line the fast path must leave to the line reader."""
    lines = ["I1122 04:28:00.000000 1 max_utils.py:1] Num_devices: 8\n", _step(0)]
    for n in range(1, 400):
        lines.append(_chatter(n))
        lines.append(_special(n) or _step(n))
    return "".join(lines) + "completed step: 400, sec"


def _both(text: str, block: int, monkeypatch: pytest.MonkeyPatch) -> tuple[LogTally, LogTally]:
    monkeypatch.setattr(log_scan, "BLOCK", block)
    by_line, by_block = LogTally(), LogTally()
    by_line.feed(iter_events(by_line.counted(io.StringIO(text))))
    log_scan.scan_log(io.StringIO(text), by_block)
    return by_line, by_block


def _metrics(tally: LogTally) -> RunMetrics:
    return tally.summarize(
        slice=Slice.parse("v6e-8"), precision=Precision.BF16, profiler_skip=5, profiler_steps=3
    )


@pytest.mark.parametrize("block", [61, 997, 4096, 1 << 20, 1 << 22])
def test_the_block_reader_agrees_with_the_line_reader(
    block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _tricky()
    by_line, by_block = _both(text, block, monkeypatch)
    a, b = _metrics(by_line), _metrics(by_block)
    assert by_block.lines == by_line.lines == len(text.splitlines())
    assert json.dumps(b.to_json()) == json.dumps(a.to_json())  # NaN loss: compare the text
    assert by_block.startup == by_line.startup
    assert b.notes == a.notes and by_block.columns.duplicates == by_line.columns.duplicates == 2
    loss = {r.step: r.loss for r in a.rows}
    assert loss[50] != loss[50] and loss[120] == 10.0 and loss[130] is None and loss[160] == 2.2
    assert loss[110] == 2.0 and by_block.columns.ray_merged


def test_plain_blocks_go_through_the_bulk_path(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _step(0) + "".join(_chatter(n) + _step(n) for n in range(1, 5000))
    calls: list[int] = []
    slow = log_scan._scan

    def counted(text: str, stop: int, tally: LogTally) -> None:
        calls.append(stop)
        slow(text, stop, tally)

    monkeypatch.setattr(log_scan, "_scan", counted)
    by_line, by_block = _both(text, 1 << 16, monkeypatch)
    assert not calls  # every block was read in bulk
    assert _metrics(by_block).to_json() == _metrics(by_line).to_json()
    assert len(by_block.columns) == 5000 and by_block.lines == 10_000 - 1


def test_bulk_json_matches_the_row_objects() -> None:
    text = _tricky()
    tally = LogTally()
    log_scan.scan_log(io.StringIO(text), tally)
    m = _metrics(tally)
    lines = io.StringIO()
    write_jsonl(m, lines)
    steps = lines.getvalue().splitlines()[1:]
    assert steps == [json.dumps(step_json(row)) for row in m.rows]  # byte for byte
    assert len(steps) == len(m.rows) and '"loss": NaN' in steps[50]
    whole = io.StringIO()
    write_json(m, whole)
    assert len(json.loads(whole.getvalue())["steps"]) == len(steps)
