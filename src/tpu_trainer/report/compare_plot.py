"""Two runs' loss and step time on shared axes (``tpu-trainer compare``), with the plotted
numbers beside the PNG as JSON.

Drawn like the other charts (:mod:`report.plots`): a private Agg canvas, matplotlib's default
style, no "Software" metadata, written atomically. A long run is drawn as the means of
per-N-steps buckets (at most :data:`MAX_POINTS` points a run), so both lines stay readable
and memory stays bounded.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpu_trainer.infra.files import atomic_write
from tpu_trainer.report.downsample import bucket_steps, nice_width
from tpu_trainer.store.steps import StepRow

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_POINTS = 2000
"""At most this many points per run and figure."""


@dataclass(frozen=True, slots=True)
class Series:
    """One run's points: step numbers (a bucket's middle for a long run), seconds, loss."""

    label: str
    steps: tuple[float, ...]
    seconds: tuple[float, ...]
    loss: tuple[float, ...]
    """NaN where a step logged no loss."""
    width: int = 1
    """Steps per point (1: every step as logged)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "steps_per_point": self.width,
            "steps": list(self.steps),
            "seconds": list(self.seconds),
            "loss": [None if math.isnan(v) else v for v in self.loss],
        }


def series_of(label: str, rows: Iterable[StepRow], steps_logged: int) -> Series:
    """A run's steps (in step order) as points; ``steps_logged`` sets the bucket width."""
    width = nice_width(steps_logged, MAX_POINTS)
    buckets = bucket_steps(rows, width)
    return Series(
        label=label,
        steps=tuple((b.first + b.last) / 2 if width > 1 else float(b.first) for b in buckets),
        seconds=tuple(b.seconds.mean for b in buckets),
        loss=tuple(math.nan if b.loss is None else b.loss.mean for b in buckets),
        width=width,
    )


def overlay_figure(a: Series, b: Series, title: str) -> Figure:
    """Loss above, step time below, both runs on each, the step axis shared."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.0, 6.5), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    loss_ax, time_ax = fig.subplots(2, 1, sharex=True)
    for series, color in ((a, "tab:blue"), (b, "tab:orange")):
        loss_ax.plot(series.steps, series.loss, label=series.label, color=color)
        time_ax.plot(series.steps, series.seconds, label=series.label, color=color)
    loss_ax.set_ylabel("loss")
    time_ax.set_ylabel("step time (s)")
    time_ax.set_xlabel("step")
    for ax in (loss_ax, time_ax):
        ax.grid(visible=True, alpha=0.3)
        ax.legend()
    loss_ax.set_title(title)
    return fig


def write_overlay(a: Series, b: Series, title: str, png: Path) -> tuple[Path, Path]:
    """Write the chart to ``png`` and its numbers to ``png`` with ``.json``; returns both."""
    from matplotlib import style

    with style.context("default"):
        fig = overlay_figure(a, b, title)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", metadata={"Software": None})
    png.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(png, buffer.getvalue())
    sidecar = png.with_suffix(".json")
    data = {"title": title, "runs": [a.to_json(), b.to_json()]}
    atomic_write(sidecar, (json.dumps(data, indent=2) + "\n").encode())
    return png, sidecar
