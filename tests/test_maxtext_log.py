"""MaxText step lines and start-up facts, read into the records every log reader yields."""

from __future__ import annotations

import pytest

from tpu_trainer.frameworks.maxtext.log import iter_events, parse_line
from tpu_trainer.metrics.records import (
    FactKind,
    HiddenStep,
    StartupFact,
    StepRecord,
    absl_time,
    elapsed,
)

pytestmark = pytest.mark.unit

PREFIX = "I1122 04:29:46.380500 139763251608448 metric_logger.py:265] "
LINE = (
    "completed step: 3, seconds: 0.780, TFLOP/s/device: 0.009, Tokens/s/device: 164.048, "
    "total_weights: 128, loss: 10.705, lm_loss: 10.705, perplexity: 44568.367"
)


# ---- one line ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "prefix", ["", PREFIX, "  ", "\x1b[36m(RayTrainWorker pid=1, ip=10.0.0.2)\x1b[0m "]
)
def test_step_line_with_any_prefix(prefix: str) -> None:
    rec = parse_line(prefix + LINE + "\n")
    assert isinstance(rec, StepRecord)
    assert (rec.step, rec.seconds, rec.tflops_per_device) == (3, 0.78, 0.009)
    assert (rec.tokens_per_device, rec.total_weights, rec.loss) == (164.048, 128.0, 10.705)
    assert rec.extra == {"lm_loss": 10.705, "perplexity": 44568.367}
    assert not rec.rampup


def test_step_line_keeps_the_absl_time() -> None:
    rec = parse_line(PREFIX + LINE)
    assert isinstance(rec, StepRecord) and rec.timestamp is not None
    assert rec.timestamp == absl_time(PREFIX)
    assert absl_time("I1122 04:29:27.525797 1 x.py:1] hi") == pytest.approx(
        rec.timestamp - 18.854703
    )


def test_ray_prefix_colours_and_repeated_suffix() -> None:
    line = (
        "\x1b[36m(RayTrainWorker pid=21663, ip=10.12.3.6)\x1b[0m completed step: 99, seconds: "
        "1.100, TFLOP/s/device: 179.739, Tokens/s/device: 3725.218, total_weights: 65536, "
        "loss: 0.000 \x1b[2m[repeated 3x across cluster]\x1b[0m"
    )
    rec = parse_line(line)
    assert isinstance(rec, StepRecord)
    assert (rec.step, rec.loss, rec.repeated, rec.extra) == (99, 0.0, 3, {})
    assert rec.worker == "RayTrainWorker pid=21663, ip=10.12.3.6"


def test_rampup_line_has_no_throughput() -> None:
    rec = parse_line(
        PREFIX + "[Rampup Batch Size Phase], completed step: 1, seconds: 0.402, "
        "total_weights: 16384, loss: 10.871"
    )
    assert isinstance(rec, StepRecord)
    assert rec.rampup and rec.tflops_per_device is None and rec.tokens_per_device is None
    assert (rec.total_weights, rec.loss) == (16384.0, 10.871)


def test_suffix_fields_and_diag_text() -> None:
    rec = parse_line(
        "completed step: 7, seconds: 4.4, TFLOP/s/device: 293.1, Tokens/s/device: 1861.0, "
        "total_weights: 131072.0, loss: 9.5, moe_lb_loss: 0.0224, mtp_loss: 1.262, "
        "dpo_loss: 0.693, diag: grad_norm=0.9, max_logits: 28.4"
    )
    assert isinstance(rec, StepRecord)
    assert rec.extra == {"moe_lb_loss": 0.0224, "mtp_loss": 1.262, "dpo_loss": 0.693}
    assert rec.diag == "grad_norm=0.9, max_logits: 28.4"


def test_nan_loss_and_hidden_profiler_step() -> None:
    rec = parse_line(LINE.replace("loss: 10.705,", "loss: nan,"))
    assert isinstance(rec, StepRecord) and rec.loss != rec.loss
    hidden = parse_line(PREFIX + "completed profiler activation/deactivation step: 5")
    assert hidden == HiddenStep(step=5)


@pytest.mark.parametrize(
    "line",
    [
        "I1122 04:29:28.6 1 pyconfig.py:591] Config param steps: 5",
        "completed step: x, seconds: 1.0",
        "Training completed successfully",
        "eval metrics after step: 9, loss=2.1, total_weights=512",
        "",
    ],
)
def test_lines_that_are_not_steps(line: str) -> None:
    assert parse_line(line) is None


@pytest.mark.parametrize(
    ("line", "kind", "value"),
    [
        (PREFIX + "Num_devices: 256, shape (1, 1, 256, 1)", FactKind.NUM_DEVICES, 256.0),
        (PREFIX + "number parameters: 671.026 billion", FactKind.PARAMETERS, 671.026),
        (
            PREFIX + "[train] Total estimated memory size: 63.9 GB, estimated output size: 1 GB",
            FactKind.MEMORY_ESTIMATE,
            63.9,
        ),
        ("Memstats: After params initialized:", FactKind.MEMSTATS, None),
        (PREFIX + "\tUsing (GB) 11.21 / 31.25 (35.9%) on TPU_0", FactKind.MEMSTATS, 11.21),
    ],
)
def test_startup_facts(line: str, kind: FactKind, value: float | None) -> None:
    fact = parse_line(line)
    assert isinstance(fact, StartupFact)
    assert (fact.kind, fact.value) == (kind, value)


def test_elapsed_across_midnight_and_new_year() -> None:
    before = absl_time("I1231 23:59:50.0 1 a.py:1] x")
    after = absl_time("I0101 00:00:20.0 1 a.py:1] x")
    assert before is not None and after is not None
    assert elapsed(before, after) == pytest.approx(30.0)
    assert absl_time("E0000 00:00:1795321767.600606 1701 common_lib.cc:906] x") is None


def test_iter_events_stops_looking_for_startup_facts_after_the_first_step() -> None:
    lines = ["noise", PREFIX + "Num_devices: 8", PREFIX + LINE, PREFIX + "Num_devices: 99"]
    events = list(iter_events(lines))
    assert [type(e).__name__ for e in events] == ["StartupFact", "StartupFact", "StepRecord"]
    start = events[0]
    assert isinstance(start, StartupFact) and start.kind is FactKind.LOG_START
