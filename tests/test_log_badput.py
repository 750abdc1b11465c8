"""The badput seconds read from MaxText's own lines: TPU initialisation, checkpoint saves and
restores, data-loading waits; each bucket is non-zero when the log has its lines and stays 0
when it does not.

``cpu_checkpoint_saves.log`` and ``cpu_checkpoint_restore.log`` are real MaxText 0.2.5 runs of
``examples/local/tiny-llama`` on this machine's CPU with ``enable_checkpointing=true
async_checkpointing=true checkpoint_period=4`` (the second run resumed the first's checkpoint
at step 8), with the configuration dump left out; ``maxtext_cpu_run_clean.log`` is a real run
without checkpoints. ``badput_v5p_16.log`` is modelled on them, with MaxText's TPU
distributed-system lines and two data-batch retries."""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from conftest import store_with_run
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.frameworks.maxtext import log_scan
from tpu_trainer.frameworks.maxtext.badput_lines import BadputLines
from tpu_trainer.metrics.goodput import Bucket, goodput
from tpu_trainer.metrics.ledger import log_badput, wasted_seconds
from tpu_trainer.metrics.log_badput import MeasuredBadput
from tpu_trainer.metrics.stream import LogTally
from tpu_trainer.metrics.timeline import Phase, PhaseName, Timeline
from tpu_trainer.plan.slices import Slice
from tpu_trainer.store.db import RunStore, SegmentEnd

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).parent / "fixtures"
SAVES = FIXTURES / "maxtext_logs" / "cpu_checkpoint_saves.log"
RESTORE = FIXTURES / "maxtext_logs" / "cpu_checkpoint_restore.log"
CLEAN = FIXTURES / "diagnose" / "maxtext_cpu_run_clean.log"
TPU = FIXTURES / "maxtext_logs" / "badput_v5p_16.log"
NO_LINES = FIXTURES / "maxtext_logs" / "seed001_tpu7x_2x4x4.log"


def _measured(
    text: str, block: int | None = None, monkeypatch: pytest.MonkeyPatch | None = None
) -> LogTally:
    if block is not None and monkeypatch is not None:
        monkeypatch.setattr(log_scan, "BLOCK", block)
    tally = LogTally()
    log_scan.scan_log(StringIO(text), tally)
    return tally


def _figures(path: Path) -> dict[str, float | None]:
    return _measured(path.read_text()).badput.to_json()


def test_checkpoint_saves_are_the_manager_s_blocking_seconds() -> None:
    got = _figures(SAVES)
    # Orbax's records for steps 0, 4 and 8: checkpoint_manager_blocking_duration_secs
    assert got["checkpoint_save"] == pytest.approx(
        0.03151655197143555 + 0.5584156513214111 + 0.015932083129882812, abs=1e-6
    )
    assert got["checkpoint_restore"] is None  # "No existing checkpoints found"
    # Num_devices at 01:15:07.808889 to "Checkpoint manager created!" at 01:15:07.898071
    assert got["tpu_initialization"] == pytest.approx(0.089182, abs=1e-6)
    assert got["data_loading"] is None


def test_a_restore_is_the_manager_s_restore_seconds() -> None:
    got = _figures(RESTORE)
    assert got["checkpoint_restore"] == pytest.approx(0.5276715755462646, abs=1e-6)
    assert got["checkpoint_save"] == pytest.approx(0.02525043487548828, abs=1e-6)  # step 11
    assert got["tpu_initialization"] == pytest.approx(43.521748 - 43.405800, abs=1e-6)


def test_without_the_manager_s_records_orbax_s_timing_lines_count() -> None:
    saves = "".join(
        line for line in SAVES.read_text().splitlines(True) if "standard_logger" not in line
    )
    restore = "".join(
        line for line in RESTORE.read_text().splitlines(True) if "standard_logger" not in line
    )
    # "[async] Finished blocking save in 0.03 / 0.56 / 0.01 seconds"; not the background time
    assert _measured(saves).badput.checkpoint_save == pytest.approx(0.60)
    # "[sync] Finished load in 0.53 seconds", not "Finished blocking load in 0.02 seconds"
    assert _measured(restore).badput.checkpoint_restore == pytest.approx(0.53)


def test_a_run_without_checkpoints_or_retries_measures_only_its_start_up() -> None:
    got = _figures(CLEAN)
    assert got == {
        "tpu_initialization": pytest.approx(04.474647 - 02.997657, abs=1e-6),
        "checkpoint_restore": None,
        "checkpoint_save": None,
        "data_loading": None,
    }
    assert _figures(NO_LINES) == dict.fromkeys(got)


def test_distributed_start_up_and_data_retries_on_a_tpu_log() -> None:
    got = _figures(TPU)
    assert got["tpu_initialization"] == pytest.approx(12.4 + 3.1)
    # two retries on the main thread: 10.01 s each until its next line (another thread's
    # line between them does not end the wait)
    assert got["data_loading"] == pytest.approx(20.02)
    assert got["checkpoint_save"] is None and got["checkpoint_restore"] is None


@pytest.mark.parametrize("block", [64, 700, 5000])
@pytest.mark.parametrize("path", [SAVES, RESTORE, CLEAN, TPU], ids=lambda p: p.name)
def test_any_block_size_gives_the_same_figures(
    path: Path, block: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _figures(path)
    cut = _measured(path.read_text(), block, monkeypatch).badput.to_json()
    assert cut == pytest.approx(whole)


def test_a_retry_whose_thread_never_logs_again_is_not_counted() -> None:
    out = MeasuredBadput()
    lines = BadputLines(out)
    text = TPU.read_text().split("I1129 09:02:30.970000")[0]
    lines.feed(text, len(text))
    assert out.data_loading == pytest.approx(10.01)  # the first; the second is still open


def _line(startup: float, training: float) -> Timeline:
    spans = (
        (PhaseName.STARTUP, startup),
        (PhaseName.COMPILE, 95.0),
        (PhaseName.TRAINING, training),
    )
    phases, start = [], 0.0
    for name, seconds in spans:
        phases.append(Phase(name, start, start + seconds, 0.0))
        start += seconds
    return Timeline(tuple(phases), 16, None)


def _stored(path: Path) -> dict[str, Any]:
    tally = _measured(path.read_text())
    metrics = tally.summarize(
        slice=Slice.parse("v5p-32"),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )
    return metrics.to_json(steps=False)


def test_the_stored_figures_become_the_goodput_buckets() -> None:
    stored = _stored(TPU)
    assert stored["log_badput"] == _figures(TPU)
    g = goodput(_line(200.0, 40.0), log_badput(stored, wasted=3.0))
    assert g.badput[Bucket.TPU_INITIALIZATION] == pytest.approx(15.5)
    assert g.badput[Bucket.DATA_LOADING_SYNC] == pytest.approx(20.02)
    assert g.badput[Bucket.WASTED_PROGRESS_FROM_DISRUPTION] == pytest.approx(3.0)
    assert g.badput[Bucket.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME] == 0
    assert g.badput[Bucket.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME] == 0
    # start-up: first line 09:00:00.1 to step 0's line 09:02:06.1, less step 0's 95 s
    assert g.badput[Bucket.TRAINING_PREP] == pytest.approx(126.0 - 95.0 - 15.5)
    assert g.badput[Bucket.SCHEDULING_AND_IMAGE_PULL] == pytest.approx(200.0 - 31.0)
    assert g.productive_seconds == pytest.approx(40.0 - 20.02 - 3.0)


def test_a_log_without_badput_lines_leaves_those_buckets_at_zero() -> None:
    g = goodput(_line(600.0, 100.0), log_badput(_stored(NO_LINES)))
    for bucket in (
        Bucket.TPU_INITIALIZATION,
        Bucket.DATA_LOADING_SYNC,
        Bucket.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME,
        Bucket.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME,
        Bucket.WASTED_PROGRESS_FROM_DISRUPTION,
    ):
        assert g.badput[bucket] == 0
    assert g.productive_seconds == 100.0


def test_the_restore_bucket_comes_from_a_restored_run() -> None:
    g = goodput(_line(60.0, 10.0), log_badput(_stored(RESTORE)))
    assert g.badput[Bucket.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME] == pytest.approx(0.527672)
    assert g.badput[Bucket.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME] == pytest.approx(0.02525)


def _run_with_steps(tmp_path: Path, seconds: dict[int, float]) -> RunStore:
    store = store_with_run(tmp_path, device_type="v5p-32")
    store.record_steps("r1", [{"step": n, "seconds": s} for n, s in seconds.items()])
    return store


def test_wasted_progress_is_the_lost_steps_after_the_last_durable_checkpoint(
    tmp_path: Path,
) -> None:
    store = _run_with_steps(tmp_path, {n: 10.0 + n for n in range(50)})
    assert wasted_seconds(store, "r1") is None  # no segments: nothing resumed
    first = store.start_segment("r1", "us-central1-a")
    store.end_segment("r1", first, SegmentEnd("preempted", 34, 30, None))
    assert wasted_seconds(store, "r1") is None  # not resumed (yet): nothing run again
    second = store.start_segment("r1", "us-central1-b")
    store.end_segment("r1", second, SegmentEnd("preempted", 44, None, 30))  # kept only 30
    third = store.start_segment("r1", "us-central1-b")
    store.end_segment("r1", third, SegmentEnd(None, 49, 40, 30))
    # steps 31-34 of the first segment, then 31-44 of the second (its restore was 30)
    assert wasted_seconds(store, "r1") == pytest.approx(sum(10.0 + n for n in range(31, 45)))


def test_a_segment_without_a_durable_checkpoint_wastes_all_its_steps(tmp_path: Path) -> None:
    store = _run_with_steps(tmp_path, dict.fromkeys(range(10), 2.0))
    first = store.start_segment("r1", None)
    store.end_segment("r1", first, SegmentEnd("preempted", 3, None, None))
    store.start_segment("r1", None)
    assert wasted_seconds(store, "r1") == pytest.approx(8.0)  # steps 0-3
