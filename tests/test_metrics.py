"""Steady-state per-chip metrics of MaxText logs, and ``tpu-trainer collect``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.cli.collect_cmd import collect
from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.maxtext.log import read_log
from tpu_trainer.metrics.records import ParsedLog, StepRecord
from tpu_trainer.metrics.summary import RunMetrics, compare, summarize
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

LOGS = Path(__file__).resolve().parent / "fixtures" / "maxtext_logs"


def read(name: str) -> ParsedLog:
    with (LOGS / name).open(encoding="utf-8") as fh:
        return read_log(fh)


def run_metrics(
    name: str,
    slice_name: str,
    *,
    precision: Precision = Precision.BF16,
    skip: int | None = None,
    count: int | None = None,
) -> RunMetrics:
    parsed = read(name)
    return summarize(
        parsed.steps,
        slice=Slice.parse(slice_name),
        precision=precision,
        profiler_skip=skip,
        profiler_steps=count,
        hidden_steps=parsed.hidden_steps,
        startup=parsed.startup,
    )


def records(
    seconds: list[float],
    *,
    tflops: float,
    tokens: float,
    total_weights: float,
    loss_start: float = 12.0,
) -> list[StepRecord]:
    """Step lines as MaxText computes them: per-step work divided by that step's time."""
    return [
        StepRecord(
            step=n,
            seconds=s,
            tflops_per_device=tflops / s,
            tokens_per_device=tokens / s,
            total_weights=total_weights,
            loss=loss_start - n,
        )
        for n, s in enumerate(seconds)
    ]


# ---- fixture logs --------------------------------------------------------------------------
def test_cpu_run_log() -> None:
    parsed = read("cpu_run.log")
    assert [s.step for s in parsed.steps] == list(range(8))
    assert parsed.startup.num_devices == 1
    assert parsed.startup.parameters_billion == 0.018
    assert parsed.startup.memory_estimate_gb == 0.3
    assert len(parsed.startup.memstats) == 2
    m = run_metrics("cpu_run.log", "v6e-1")
    assert m.steady_steps == (2, 3, 4, 5, 6, 7)
    assert m.step_seconds == pytest.approx(0.5522, abs=1e-4)
    assert m.tokens_check is not None and not m.tokens_check.mismatch
    assert m.first_step_seconds == 0.142
    assert m.startup_seconds == pytest.approx(20.461725 - 3.114205)
    assert m.loss is not None and m.loss.first == 10.941 and m.loss.last == 10.602
    assert m.loss.drop_percent == pytest.approx((10.941 - 10.602) / 10.941 * 100)
    assert m.notes == ()


def test_ray_log_on_v6e_counts_each_step_once() -> None:
    parsed = read("ray_v6e_4x4.log")
    assert len(parsed.steps) == 12 + 3 * 3 + 3
    assert parsed.startup.num_devices == 16
    assert parsed.startup.memstats == (
        "Memstats: After params initialized:",
        "Using (GB) 11.21 / 31.25 (35.872000%) on TPU_0(process=0,(0,0,0,0))",
        "Memstats: After params initialized:",
    )
    m = run_metrics("ray_v6e_4x4.log", "v6e-4x4")
    assert m.steps_completed == 12 and m.steady_steps == tuple(range(2, 12))
    assert m.jax_devices_per_chip == 1
    assert m.tflops_per_chip == pytest.approx(m.tflops_per_device)
    assert m.tflops_per_chip == pytest.approx(179.7, abs=0.2)
    assert m.tokens_check is not None and not m.tokens_check.mismatch
    assert m.mfu == pytest.approx(179.7 / 918, abs=1e-3)
    assert any("12 repeated step line" in n for n in m.notes)
    assert any("RAY_DEDUP_LOGS=0" in n for n in m.notes)


def test_rampup_steps_are_not_steady() -> None:
    m = run_metrics("rampup_v6e_2x4.log", "v6e-2x4")
    assert m.steady_steps == (4, 5, 6, 7, 8, 9)
    excluded = {r.step: r.excluded for r in m.rows if r.excluded}
    assert excluded[2] == excluded[3] == "batch-size rampup (no throughput figures)"
    assert m.loss is not None and m.loss.first_step == 0


def test_pre_0_2_2_log_across_midnight() -> None:
    parsed = read("pre_0_2_2_v5p_2x2x2.log")
    assert all(s.extra == {} for s in parsed.steps)
    m = run_metrics("pre_0_2_2_v5p_2x2x2.log", "v5p-2x2x2")
    assert m.steady_steps == (2, 3, 4, 5)
    assert m.startup_seconds == pytest.approx(35.612)
    assert m.tflops_per_chip == m.tflops_per_device


def test_moe_and_mtp_suffixes() -> None:
    parsed = read("moe_tpu7x_2x2x2.log")
    assert parsed.steps[2].extra["moe_lb_loss"] == 0.0259
    assert parsed.steps[2].extra["mtp_loss"] == 1.341
    assert parsed.steps[2].diag == "grad_norm=0.913, max_logits=28.4, experts_dropped: 0"
    assert "experts_dropped" not in parsed.steps[2].extra
    m = run_metrics("moe_tpu7x_2x2x2.log", "tpu7x-2x2x2")
    assert m.tflops_per_chip == pytest.approx(2 * 1290.4 / 4.4015, rel=1e-3)


def test_seed_001_run_drops_the_async_and_data_exhausted_steps() -> None:
    """Seed 001, 2x4x4 (32 chips): steps 3-5 are the steady ones (~7.5 s)."""
    m = run_metrics("seed001_tpu7x_2x4x4.log", "tpu7x-2x4x4")
    assert m.chips == 32 and m.steps_completed == 7
    assert m.steady_steps == (3, 4, 5)
    excluded = {r.step: r.excluded or "" for r in m.rows}
    assert excluded[2].startswith("outlier: 0.076 s") and excluded[6].startswith("outlier: 17.534")
    assert m.step_seconds == pytest.approx(7.5, rel=0.02)
    assert m.tflops_per_device == pytest.approx(32.0, rel=0.03)
    assert m.tflops_per_device is not None
    assert m.tflops_per_chip == pytest.approx(2 * m.tflops_per_device)
    assert m.first_step_seconds == 485.0


# ---- the seed's arithmetic -----------------------------------------------------------------
def seed_001_steady(slice_name: str) -> RunMetrics:
    """Seed 001's result table: ~7.5 s/step, 32.0 TFLOP/s/device, 549 Tokens/s/device."""
    steps = records(
        [485.0, 67.3, 7.5, 7.5, 7.5], tflops=32.0 * 7.5, tokens=549 * 7.5, total_weights=262144
    )
    return summarize(
        steps,
        slice=Slice.parse(slice_name),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )


def test_seed_001_per_chip_figures_double_on_tpu7x() -> None:
    m = seed_001_steady("tpu7x-2x4x4")
    assert (m.chips, m.jax_devices_per_chip) == (32, 2)
    assert m.step_seconds == pytest.approx(7.5)
    assert m.tflops_per_device == pytest.approx(32.0)
    assert m.tflops_per_chip == pytest.approx(64.0)
    assert m.tokens_per_chip == pytest.approx(1098.0)
    check = m.tokens_check
    assert check is not None and not check.mismatch
    assert check.from_total_weights_per_chip == pytest.approx(262144 / 7.5 / 32)


def test_per_chip_is_per_device_on_v6e() -> None:
    m = seed_001_steady("v6e-4x8")
    assert (m.chips, m.jax_devices_per_chip) == (32, 1)
    assert m.tflops_per_chip == pytest.approx(32.0)
    assert m.tokens_per_chip == pytest.approx(549.0)


def test_tokens_cross_check_flags_a_mismatch_with_both_numbers() -> None:
    steps = records([60.0, 9.0, 7.5, 7.5], tflops=240, tokens=549 * 7.5, total_weights=200000)
    m = summarize(
        steps,
        slice=Slice.parse("tpu7x-2x4x4"),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )
    check = m.tokens_check
    assert check is not None and check.mismatch
    assert check.difference_percent == pytest.approx((1098 / (200000 / 7.5 / 32) - 1) * 100)
    assert "1,098.0" in check.message and "833.3" in check.message
    assert check.message in m.notes


def test_steady_state_leaves_out_the_profiler_window() -> None:
    m = run_metrics(
        "profiler_fp8_tpu7x_4x4x8.log", "tpu7x-4x4x8", precision=Precision.FP8, skip=5, count=3
    )
    assert m.steady_steps == (2, 3, 4, 8, 9, 10, 11, 12, 13, 14)
    reasons = {r.step: r.excluded for r in m.rows}
    assert reasons[0] == "step 0: JIT compilation" and reasons[1] == "step 1: warm-up"
    assert all("profiler window, steps 5-7" in (reasons[n] or "") for n in (5, 6, 7))
    assert m.step_seconds == pytest.approx(22.39, abs=0.05)
    assert m.tflops_per_chip == pytest.approx(2 * 8206 / 22.39, rel=0.005)
    assert m.mfu is not None and m.tflops_per_chip is not None
    assert m.mfu == pytest.approx(m.tflops_per_chip / 4614)
    assert m.peak_tflops_per_chip == 4614


def test_without_a_profiler_window_its_slow_steps_are_outliers() -> None:
    m = run_metrics("profiler_fp8_tpu7x_4x4x8.log", "tpu7x-4x4x8", skip=5, count=0)
    reasons = {r.step: r.excluded or "" for r in m.rows}
    assert all(reasons[n].startswith("outlier") for n in (5, 6, 7))


def test_first_steady_and_outlier_filter_are_adjustable() -> None:
    steps = records([9.0, 1.0, 1.0, 1.0, 5.0, 1.0], tflops=10, tokens=100, total_weights=100)
    v6e = Slice.parse("v6e-1")
    default = summarize(
        steps, slice=v6e, precision=Precision.BF16, profiler_skip=None, profiler_steps=None
    )
    assert default.steady_steps == (2, 3, 5)
    kept = summarize(
        steps,
        slice=v6e,
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
        first_steady=1,
        outlier_factor=None,
    )
    assert kept.steady_steps == (1, 2, 3, 4, 5)
    assert {r.step: r.excluded for r in kept.rows}[0] == "step 0: JIT compilation"


def test_mfu_of_the_published_deepseek_fp8_figure() -> None:
    """tpu-recipes: deepseek3-671b fp8 on 128 chips, 730.60 TFLOP/s/chip = 365.3 per device."""
    steps = records([157.3, 41.9, 22.47, 22.47], tflops=365.3 * 22.47, tokens=1, total_weights=1)
    m = summarize(
        steps,
        slice=Slice.parse("tpu7x-4x4x8"),
        precision=Precision.FP8,
        profiler_skip=None,
        profiler_steps=None,
    )
    assert m.tflops_per_chip == pytest.approx(730.6)
    assert m.mfu is not None and m.mfu == pytest.approx(730.6 / 4614)
    assert round(m.mfu * 100, 1) == 15.8


def constant_run(slice_: Slice, seconds: float, precision: Precision) -> RunMetrics:
    """A run whose steady steps all take ``seconds`` for the same work."""
    work = 366.5 * 22.39
    steps = records([150.0, 40.0, seconds, seconds], tflops=work, tokens=1, total_weights=1)
    return summarize(
        steps, slice=slice_, precision=precision, profiler_skip=None, profiler_steps=None
    )


@pytest.mark.parametrize(
    ("topology", "fp8_s", "bf16_s"), [("4x4x8", 22.39, 27.42), ("4x8x8", 22.02, 27.12)]
)
def test_fp8_is_22_to_23_percent_faster_than_bf16(
    topology: str, fp8_s: float, bf16_s: float
) -> None:
    """Seed 000: 4x4x8 22.39 s vs 27.42 s, 4x8x8 22.02 s vs 27.12 s."""
    slice_ = Slice.parse(f"tpu7x-{topology}")
    c = compare(
        constant_run(slice_, fp8_s, Precision.FP8), constant_run(slice_, bf16_s, Precision.BF16)
    )
    assert c.step_time_ratio == pytest.approx(fp8_s / bf16_s)
    assert c.speedup_percent is not None and 22.0 <= c.speedup_percent <= 23.5
    assert c.tflops_per_chip_ratio == pytest.approx(bf16_s / fp8_s)


def test_empty_input_gives_no_steady_state() -> None:
    m = summarize(
        [],
        slice=Slice.parse("tpu7x-4x4x8"),
        precision=Precision.BF16,
        profiler_skip=5,
        profiler_steps=3,
    )
    assert not m.has_steady_state and m.steps_completed == 0
    assert m.step_seconds is None and m.mfu is None and m.loss is None
    assert m.notes == ("no step lines: nothing to measure",)
    assert json.loads(json.dumps(m.to_json()))["steady_steps"] == []
    assert compare(m, m).speedup_percent is None


def test_notes_name_missing_hidden_steps_and_a_wrong_slice() -> None:
    parsed = read("cpu_run.log")
    steps = [s for s in parsed.steps if s.step != 4]
    m = summarize(
        steps,
        slice=Slice.parse("tpu7x-2x2x1"),
        precision=Precision.BF16,
        profiler_skip=5,
        profiler_steps=3,
        hidden_steps=[5, 6],
        startup=parsed.startup,
    )
    assert "1 step(s) absent from the log: 4" in m.notes
    assert "MaxText hid the metrics of profiler step(s) 5-6" in m.notes
    assert any("reports 1 JAX devices but tpu7x-2x2x1 has 8" in n for n in m.notes)


# ---- the command ---------------------------------------------------------------------------
def cli_app() -> typer.Typer:
    app = typer.Typer()
    app.command("collect")(collect)

    @app.callback()
    def main() -> None:
        """Test app."""

    return app


RUNNER = CliRunner()


def test_cli_table() -> None:
    result = RUNNER.invoke(
        cli_app(),
        ["collect", str(LOGS / "seed001_tpu7x_2x4x4.log"), "--slice", "tpu7x-2x4x4"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert "TFLOP/s/chip (x2)" in result.output
    assert "no: step 0: JIT compilation" in result.output
    assert "Steady-state steps" in result.output and "3, 4" in result.output


def test_cli_json_from_stdin() -> None:
    text = (LOGS / "profiler_fp8_tpu7x_4x4x8.log").read_text()
    args = ["collect", "-", "--slice", "tpu7x-4x4x8", "--precision", "fp8", "--json"]
    result = RUNNER.invoke(cli_app(), args, input=text)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["precision"] == "fp8" and data["chips"] == 128
    assert data["steady_steps"] == [2, 3, 4, 8, 9, 10, 11, 12, 13, 14]
    assert "profiler window" in data["excluded_steps"]["6"]
    assert data["startup"]["num_devices"] == 256


def test_cli_no_step_lines_exits_1() -> None:
    result = RUNNER.invoke(
        cli_app(), ["collect", "-", "--slice", "v6e-4x4"], input="hello\nworld\n"
    )
    assert result.exit_code == 1
    assert "no MaxText step lines" in result.output


def test_cli_missing_file_is_an_input_error() -> None:
    result = RUNNER.invoke(cli_app(), ["collect", "/no/such.log", "--slice", "v6e-4x4"])
    assert isinstance(result.exception, InputError)
    assert "does not exist" in result.exception.message and "-" in result.exception.fix


def test_cli_bad_precision_is_an_input_error() -> None:
    args = ["collect", str(LOGS / "cpu_run.log"), "--slice", "v6e-1", "--precision", "fp4"]
    result = RUNNER.invoke(cli_app(), args)
    assert isinstance(result.exception, InputError)
    assert "--precision bf16" in result.exception.fix


def test_a_log_without_tflops_still_has_a_steady_state() -> None:
    # Tunix and Transformers print loss and time per step, never TFLOP/s.
    steps = [
        StepRecord(
            step=i,
            seconds=s,
            tflops_per_device=None,
            tokens_per_device=None,
            total_weights=None,
            loss=5.0 - i * 0.1,
        )
        for i, s in enumerate((30.0, 2.5, 1.0, 1.2, 1.1))
    ]
    metrics = summarize(
        steps,
        slice=Slice.parse("v6e-16"),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )
    assert metrics.steady_steps == (2, 3, 4)
    assert metrics.step_seconds == pytest.approx(1.1)
    assert metrics.tflops_per_chip is None
    mixed = [
        *steps[:4],
        StepRecord(
            step=5,
            seconds=1.0,
            tflops_per_device=100.0,
            tokens_per_device=None,
            total_weights=None,
            loss=4.0,
        ),
    ]
    only = summarize(
        mixed,
        slice=Slice.parse("v6e-16"),
        precision=Precision.BF16,
        profiler_skip=None,
        profiler_steps=None,
    )
    assert only.steady_steps == (5,)  # where the log has TFLOP/s, lines without it do not count
