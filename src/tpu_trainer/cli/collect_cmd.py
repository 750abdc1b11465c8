"""``tpu-trainer collect LOG|- --slice ...``: per-step and steady-state metrics of a MaxText run."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from tpu_trainer.cli.common import JsonOpt
from tpu_trainer.cli.log_input import open_log
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
) -> None:
    """Per-step metrics, steady state (step 2 on, profiler steps left out), per chip, and MFU.

    Per-chip figures multiply MaxText's per-device ones by the JAX devices per chip (2 on
    TPU v7). Exits 1 when the log holds no step line.
    """
    from tpu_trainer.frameworks.maxtext.log import read_log
    from tpu_trainer.metrics.summary import summarize
    from tpu_trainer.plan.slices import Slice

    chosen = Slice.parse(slice_name)
    prec = _precision(precision)
    with _open_log(log) as stream:
        parsed = read_log(stream)
    source = "standard input" if log == "-" else log
    if not parsed.steps:
        sys.stderr.write(
            f"no MaxText step lines ('completed step: N, seconds: ...') in {parsed.lines} lines "
            f"of {source}: the run may not have reached step 0 (try `tpu-trainer diagnose`)\n"
        )
        raise typer.Exit(1)
    metrics = summarize(
        parsed.steps,
        slice=chosen,
        precision=prec,
        profiler_skip=profiler_skip,
        profiler_steps=profiler_steps,
        hidden_steps=parsed.hidden_steps,
        startup=parsed.startup,
    )
    if as_json:
        import json

        typer.echo(json.dumps(metrics.to_json(), indent=2))
        return
    _show(metrics, source)


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
def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _show(m: RunMetrics, source: str) -> None:
    """One table of the steps, one of the steady state, then the notes."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    chips = f"{m.chips} chip{'' if m.chips == 1 else 's'}"
    steps = Table(title=f"Steps in {escape(source)} ({m.device_type}, {chips})")
    for name in ("Step", "Seconds", "TFLOP/s/device", "TFLOP/s/chip", "Tokens/s/chip", "Loss"):
        steps.add_column(name, justify="right", no_wrap=True)
    steps.add_column("Steady state")
    for r in m.rows:
        used = "[green]yes[/]" if r.excluded is None else f"[dim]no: {escape(r.excluded)}[/]"
        steps.add_row(
            str(r.step),
            _num(r.seconds),
            _num(r.tflops_per_device),
            _num(r.tflops_per_chip),
            _num(r.tokens_per_chip, 1),
            _num(r.loss),
            used,
        )
    console.print(steps)
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
    steady = ", ".join(str(n) for n in m.steady_steps) or "none"
    rows = [
        ("Steps completed", str(m.steps_completed)),
        ("Steady-state steps", steady),
        ("Step time (s)", _num(m.step_seconds)),
        ("TFLOP/s/device", _num(m.tflops_per_device)),
        (f"TFLOP/s/chip (x{m.jax_devices_per_chip})", _num(m.tflops_per_chip)),
        ("Tokens/s/device", _num(m.tokens_per_device, 1)),
        (f"Tokens/s/chip (x{m.jax_devices_per_chip})", _num(m.tokens_per_chip, 1)),
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
        rows.append(("Step 0 (includes JIT compile) (s)", _num(m.first_step_seconds)))
    if m.startup_seconds is not None:
        rows.append(("First log line to step 0 (s)", _num(m.startup_seconds, 1)))
    rows.extend(_startup_rows(m))
    return rows


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
