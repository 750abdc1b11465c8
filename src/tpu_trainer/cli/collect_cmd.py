"""``tpu-trainer collect LOG|- --slice ...``: per-step and steady-state metrics of a MaxText run."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from tpu_trainer.cli.common import JsonOpt
from tpu_trainer.cli.log_input import open_log
from tpu_trainer.cli.step_rows import num
from tpu_trainer.errors import InputError

if TYPE_CHECKING:
    from rich.table import Table

    from tpu_trainer.catalog.accelerators import Precision
    from tpu_trainer.metrics.summary import RunMetrics

LogArg = Annotated[
    str,
    typer.Argument(
        help="A MaxText training log (plain or .gz), or - to read standard input "
        "(e.g. `kubectl logs <pod> | tpu-trainer collect - --slice tpu7x-4x4x8`).",
    ),
]
SliceOpt = Annotated[
    str,
    typer.Option(
        "--slice",
        help="The slice the run used, e.g. tpu7x-4x4x8 or v6e-4x4 (for per-chip figures).",
    ),
]
CollectPrecisionOpt = Annotated[
    str, typer.Option("--precision", help="bf16 or fp8: picks the peak TFLOP/s for MFU.")
]
SkipOpt = Annotated[
    int,
    typer.Option(
        "--profiler-skip",
        min=0,
        help="MaxText's skip_first_n_steps_for_profiler (first profiled step).",
    ),
]
StepsOpt = Annotated[
    str,
    typer.Option(
        "--steps",
        help="Step rows the table shows: N (the first and last steps, outliers between; "
        "default 60) or all.",
    ),
]
JsonlOpt = Annotated[
    bool,
    typer.Option(
        "--jsonl",
        help="JSON Lines: the summary on the first line, then one line per step.",
    ),
]
ProfilerStepsOpt = Annotated[
    int,
    typer.Option(
        "--profiler-steps", min=0, help="MaxText's profiler_steps; 0 when no profiler ran."
    ),
]


def collect(
    log: LogArg,
    slice_name: SliceOpt,
    precision: CollectPrecisionOpt = "bf16",
    profiler_skip: SkipOpt = 5,
    profiler_steps: ProfilerStepsOpt = 3,
    as_json: JsonOpt = False,
    jsonl: JsonlOpt = False,
    steps: StepsOpt = "60",
) -> None:
    """Per-step metrics, steady state (step 2 on, profiler steps left out), per chip, and MFU.

    Per-chip figures multiply MaxText's per-device ones by the JAX devices per chip (2 on
    TPU v7). A long run's table shows its first and last steps and the outliers between
    (`--steps all` for every one). Exits 1 when the log holds no step line.
    """
    from tpu_trainer.frameworks.maxtext.log_scan import scan_log
    from tpu_trainer.metrics.stream import LogTally, write_json, write_jsonl
    from tpu_trainer.plan.slices import Slice

    chosen = Slice.parse(slice_name)
    prec = _precision(precision)
    limit = steps_limit(steps)
    tally = LogTally()
    with _open_log(log) as stream:
        scan_log(stream, tally)
    source = "standard input" if log == "-" else log
    if not len(tally.columns):
        sys.stderr.write(
            f"no MaxText step lines ('completed step: N, seconds: ...') in {tally.lines} lines "
            f"of {source}: the run may not have reached step 0 (try `tpu-trainer diagnose`)\n"
        )
        raise typer.Exit(1)
    metrics = tally.summarize(
        slice=chosen,
        precision=prec,
        profiler_skip=profiler_skip,
        profiler_steps=profiler_steps,
    )
    if as_json or jsonl:
        (write_jsonl if jsonl else write_json)(metrics, sys.stdout)
        sys.stdout.flush()
        return
    _show(metrics, source, limit)


def steps_limit(text: str) -> int | None:
    """``--steps``: a row count, or None for ``all``."""
    value = text.strip().lower()
    if value == "all":
        return None
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise InputError(
        f"--steps {text!r} is neither a number of rows nor 'all'",
        fix="use --steps 60 (the default), --steps 200 or --steps all",
    )


def _precision(text: str) -> Precision:
    from tpu_trainer.catalog.accelerators import Precision

    try:
        return Precision(text.strip().lower())
    except ValueError:
        raise InputError(
            f"'{text}' is not a precision",
            fix=f"use --precision {' or --precision '.join(p.value for p in Precision)}",
        ) from None


def _open_log(log: str) -> AbstractContextManager[TextIO]:
    return open_log(
        log, "collect", "kubectl logs <pod> | tpu-trainer collect - --slice tpu7x-4x4x8"
    )


# ---- display ---------------------------------------------------------------------------------
def _show(m: RunMetrics, source: str, limit: int | None) -> None:
    """One table of the steps (bounded), one of the steady state, then the notes."""
    from rich.console import Console
    from rich.markup import escape

    from tpu_trainer.cli.step_rows import step_table

    console = Console(highlight=False)
    chips = f"{m.chips} chip{'' if m.chips == 1 else 's'}"
    title = f"Steps in {escape(source)} ({m.device_type}, {chips})"
    console.print(step_table(title, m.rows, limit))
    console.print(_summary_table(m))
    for note in m.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")


def _summary_table(m: RunMetrics) -> Table:
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Summary", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    for key, value in _summary_rows(m):
        table.add_row(key, escape(value))
    return table


def _summary_rows(m: RunMetrics) -> list[tuple[str, str]]:
    steady = _steady_text(m)
    rows = [
        ("Steps completed", str(m.steps_completed)),
        ("Steady-state steps", steady),
        ("Step time (s)", num(m.step_seconds)),
        ("TFLOP/s/device", num(m.tflops_per_device)),
        (f"TFLOP/s/chip (x{m.jax_devices_per_chip})", num(m.tflops_per_chip)),
        ("Tokens/s/device", num(m.tokens_per_device, 1)),
        (f"Tokens/s/chip (x{m.jax_devices_per_chip})", num(m.tokens_per_chip, 1)),
        (
            f"MFU ({m.precision}, peak {m.peak_tflops_per_chip:g} TFLOP/s/chip)",
            "-" if m.mfu is None else f"{m.mfu * 100:.3g} %",
        ),
    ]
    if m.tokens_check is not None:
        rows.append(("Tokens check", m.tokens_check.message))
    if m.loss is not None:
        loss = m.loss
        rows.append(
            (
                "Loss",
                f"{loss.first:.3f} (step {loss.first_step}) -> {loss.last:.3f} "
                f"(step {loss.last_step}), {loss.drop_percent:.1f} % lower",
            )
        )
    if m.first_step_seconds is not None:
        rows.append(("Step 0 (includes JIT compile) (s)", num(m.first_step_seconds)))
    if m.startup_seconds is not None:
        rows.append(("First log line to step 0 (s)", num(m.startup_seconds, 1)))
    rows.extend(_startup_rows(m))
    return rows


def _steady_text(m: RunMetrics) -> str:
    """The steady steps: every number for a short run, ranges and a count for a long one."""
    from tpu_trainer.metrics.stream import LONG_RUN_STEPS
    from tpu_trainer.report.step_table import ranges

    chosen = m.steady_steps
    if len(chosen) <= LONG_RUN_STEPS:
        return ", ".join(str(n) for n in chosen) or "none"
    return f"{ranges(chosen)} ({len(chosen):,} steps)"


def _startup_rows(m: RunMetrics) -> list[tuple[str, str]]:
    s = m.startup
    if s is None:
        return []
    rows: list[tuple[str, str]] = []
    if s.num_devices is not None:
        rows.append(("JAX devices (log)", str(s.num_devices)))
    if s.parameters_billion is not None:
        rows.append(("Parameters", f"{s.parameters_billion:g} billion"))
    if s.memory_estimate_gb is not None:
        rows.append(("Estimated memory", f"{s.memory_estimate_gb:g} GB"))
    return rows
