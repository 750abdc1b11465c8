"""SegmentBook.reattach: a process carrying on the segment a dead one left open, following a
program (or job) that keeps its whole output again from its first line. It knows where the
segment began in each of its files (segment.json beside worker 0's log), how many whole lines
they already hold (a last line the dead process left unfinished is cut off: it comes again
whole), and refuses output another segment started or a segment whose beginning is unknown."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import new_run
from tpu_trainer.app.resume import FINISHED, SEGMENT_MARK, SegmentBook, SegmentOutcome
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.store.db import RunStore

pytestmark = pytest.mark.unit

STEP = "I1122 04:29:49.1 1 metric_logger.py:265] completed step: {n}, seconds: 2.7, loss: 9.1\n"


def _store(tmp_path: Path) -> RunStore:
    store = RunStore(tmp_path / "runs.db")
    new_run(store, "r1", LaunchPath.TPU_VM, "v6e-8", zone="us-central1-a")
    return store


def _steps(first: int, last: int) -> str:
    return "".join(STEP.format(n=n) for n in range(first, last + 1))


def test_the_open_segment_is_carried_on_past_the_lines_it_holds(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log, job = tmp_path / "worker0.log", tmp_path / "job.log"
    book = SegmentBook(store, "r1", log, also=(job,))
    book.begin("us-central1-a")
    log.write_text(_steps(0, 4), encoding="utf-8")
    book.on_line(STEP.format(n=0))
    book.end(SegmentOutcome(cause="preempted"))
    before = (log.stat().st_size, job.stat().st_size if job.exists() else 0)
    book.begin("us-central1-a")  # segment 2 begins after what segment 1 wrote
    mark = json.loads((tmp_path / SEGMENT_MARK).read_text())
    assert mark == {"n": 2, "starts": list(before)}
    log.write_text(log.read_text() + _steps(3, 6) + "I1122 04:30:10 1 metric_logger.py:265] comp")
    job.write_text("job line 1\njob line 2\n", encoding="utf-8")
    # the process dies; the next one follows segment 2's program again
    again = SegmentBook(store, "r1", log, also=(job,))
    assert again.reattach(2) == (4, 2)
    assert (again.n, again.start) == (2, before[0])
    assert log.read_text().endswith(STEP.format(n=6))  # the unfinished last line is cut off
    log.write_text(log.read_text() + _steps(7, 9))
    again.end(FINISHED)
    rows = [(s.n, s.cause, s.last_step) for s in store.segments("r1")]
    assert rows == [(1, "preempted", 4), (2, None, 9)]


def test_without_segment_json_the_first_segment_begins_each_file(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log = tmp_path / "worker0.log"
    SegmentBook(store, "r1", log).begin("us-central1-a")
    (tmp_path / SEGMENT_MARK).unlink()
    log.write_text(_steps(0, 2), encoding="utf-8")
    again = SegmentBook(store, "r1", log)
    assert again.reattach(1) == (3,)
    assert (again.n, again.start) == (1, 0)


def test_a_later_segment_without_segment_json_is_not_carried_on(tmp_path: Path) -> None:
    store = _store(tmp_path)
    log = tmp_path / "worker0.log"
    book = SegmentBook(store, "r1", log)
    book.begin("us-central1-a")
    log.write_text(_steps(0, 4), encoding="utf-8")
    book.end(SegmentOutcome(cause="preempted"))
    book.begin("us-central1-a")
    (tmp_path / SEGMENT_MARK).unlink()
    log.write_text(log.read_text() + _steps(3, 5))
    again = SegmentBook(store, "r1", log)
    assert again.reattach(2) is None  # which lines are segment 2's is not known
    assert again.n == 0 and log.read_text() == _steps(0, 4) + _steps(3, 5)  # nothing cut


def test_output_another_segment_started_or_an_ended_segment_is_not_carried_on(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    log = tmp_path / "worker0.log"
    assert SegmentBook(store, "r1", log).reattach(1) is None  # no segment at all
    book = SegmentBook(store, "r1", log)
    book.begin("us-central1-a")
    assert SegmentBook(store, "r1", log).reattach(2) is None  # segment 2 never began
    assert SegmentBook(store, "r1", log).reattach(None) is None  # the program did not say
    book.end(FINISHED)
    assert SegmentBook(store, "r1", log).reattach(1) is None  # segment 1 has ended
