"""Charts of one run's per-step metrics, as PNG files to link from the README.

matplotlib is imported inside :func:`write_plots` only, so importing tpu_trainer stays fast.
The charts are drawn on a private Agg canvas (no pyplot, no global backend switch) with
matplotlib's default style (a user's matplotlibrc does not change them) and saved without
the "Software" metadata, so the same run and the same matplotlib give the same bytes.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.errors import InputError
from tpu_trainer.infra.files import atomic_write
from tpu_trainer.report.downsample import Stat, StepBucket
from tpu_trainer.report.model import RunReport, step_figures
from tpu_trainer.report.readme import check_writable

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass(frozen=True, slots=True)
class _Chart:
    name: str
    """File name suffix: ``<model>-<run_id>-<name>.png``."""
    title: str
    ylabel: str
    values: tuple[float, ...]
    steady: float | None
    """The steady-state mean, drawn as a dashed line."""


def plot_paths(run: RunReport, folder: Path) -> list[Path]:
    """The files :func:`write_plots` writes for ``run`` (step time, loss, TFLOP/s per chip)."""
    stem = f"{_slug(run.model)}-{run.run_id}"
    return [folder / f"{stem}-{name}.png" for name in ("step_time", "loss", "tflops_chip")]


def write_plots(run: RunReport, folder: Path) -> list[Path]:
    """Write PNG charts of step time, loss and TFLOP/s per chip into ``folder``.

    Returns the files written, in that order; an empty list when the run has no steps.
    Each file is replaced atomically, so a reader never sees half an image.
    """
    if not run.steps:
        return []
    if not folder.is_dir():
        raise InputError(
            f"cannot write charts: folder {folder} does not exist",
            fix="pass the folder that holds the model's README",
        )
    from matplotlib import style

    steady = run.steady_step_seconds, None, run.steady_tflops_chip
    charts = [
        _Chart(name, title, ylabel, tuple(values), mean)
        for (name, title, ylabel), values, mean in zip(
            (
                ("step_time", "Step time", "seconds per step"),
                ("loss", "Training loss", "loss"),
                ("tflops_chip", "Throughput", "TFLOP/s per chip"),
            ),
            (
                [s.seconds for s in run.steps],
                [step_figures(s)[3] for s in run.steps],
                [step_figures(s)[1] for s in run.steps],
            ),
            steady,
            strict=True,
        )
    ]
    paths = plot_paths(run, folder)
    for path in paths:
        check_writable(path, run.run_id)
    draw = _render_buckets if run.chart_buckets else _render
    with style.context("default"):
        for chart, path in zip(charts, paths, strict=True):
            atomic_write(path, draw(run, chart))
    return paths


def _render_buckets(run: RunReport, chart: _Chart) -> bytes:
    """A long run's chart: per bucket of steps, the min-max range as a vertical line (a
    one-step spike reaches its full height) and the mean as a line; the highest value marked."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.0, 4.0), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    picked = [(b, s) for b in run.chart_buckets if (s := _STAT[chart.name](b)) is not None]
    width = run.chart_buckets[0].width
    if picked:
        xs = [(b.first + b.last) / 2 for b, _ in picked]
        lows, highs = [s.low for _, s in picked], [s.high for _, s in picked]
        ax.vlines(xs, lows, highs, color="tab:blue", alpha=0.45, linewidth=0.8)
        ax.plot(
            xs,
            [s.mean for _, s in picked],
            color="tab:blue",
            linewidth=1.0,
            label=f"{chart.ylabel}: mean per {width:,} steps (bars: min-max)",
        )
        top, stat = max(picked, key=lambda p: p[1].high)
        ax.plot(
            [(top.first + top.last) / 2],
            [stat.high],
            "v",
            color="tab:red",
            label=f"highest: {stat.high:.3g} (steps {top.first:,}-{top.last:,})",
        )
        if _wide_range([*lows, *highs]):
            ax.set_yscale("log")
    if chart.steady is not None and math.isfinite(chart.steady):
        ax.axhline(
            chart.steady,
            linestyle="--",
            color="tab:gray",
            label=f"steady-state mean: {chart.steady:.2f}",
        )
    ax.set_title(f"{chart.title}\n{run.model} · {run.config_name} · {run.date}")
    ax.set_xlabel(f"step ({run.steps_logged:,} steps, {width:,} per bucket)")
    ax.set_ylabel(chart.ylabel)
    ax.ticklabel_format(axis="x", style="plain", useOffset=False)
    ax.grid(visible=True, alpha=0.3)
    ax.legend(fontsize="small")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


_STAT: dict[str, Callable[[StepBucket], Stat | None]] = {
    "step_time": lambda b: b.seconds,
    "loss": lambda b: b.loss,
    "tflops_chip": lambda b: b.tflops_chip,
}


def _render(run: RunReport, chart: _Chart) -> bytes:
    """One chart as PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    fig = Figure(figsize=(7.0, 4.0), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    steps = [s.step for s in run.steps]
    ax.plot(steps, chart.values, marker="o", color="tab:blue", label=chart.ylabel)
    chosen = set(run.steady_steps)
    picked = [(x, y) for x, y in zip(steps, chart.values, strict=True) if x in chosen]
    if picked and chart.steady is not None:
        xs, ys = zip(*picked, strict=True)
        ax.plot(xs, ys, "o", color="tab:orange", label="steady-state steps")
    if chart.steady is not None and math.isfinite(chart.steady):
        ax.axhline(
            chart.steady,
            linestyle="--",
            color="tab:gray",
            label=f"steady-state mean: {chart.steady:.2f}",
        )
    if _wide_range(chart.values):
        ax.set_yscale("log")
    ax.set_title(f"{chart.title}\n{run.model} · {run.config_name} · {run.date}")
    ax.set_xlabel("step")
    ax.set_ylabel(chart.ylabel)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(visible=True, alpha=0.3)
    ax.legend()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return buffer.getvalue()


def _wide_range(values: Sequence[float]) -> bool:
    """Whether the values span more than ten times (step 0 includes the compile), all positive."""
    finite = [v for v in values if math.isfinite(v)]
    return bool(finite) and min(finite) > 0 and max(finite) / min(finite) > 10


def _slug(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-") or "model"
