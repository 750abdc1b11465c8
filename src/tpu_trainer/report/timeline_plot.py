"""A run's timeline as a Gantt-style PNG: one bar per phase, placed at its start, as long as
it lasted, labelled with its chip-hours.

Drawn like the step charts (:mod:`report.plots`): a private Agg canvas, matplotlib's default
style, no "Software" metadata, written atomically. The bars are plain data
(:class:`PhaseBar`), so this module needs nothing from the layers that compute them.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tpu_trainer.infra.files import atomic_write

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TIMELINE_PNG = "timeline.png"


@dataclass(frozen=True, slots=True)
class PhaseBar:
    name: str
    start: float
    """Seconds from the run's request."""
    seconds: float
    chip_hours: float


def timeline_figure(bars: Sequence[PhaseBar], title: str) -> Figure:
    """The chart: phases top to bottom in order, time in seconds from the request."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.0, 0.5 * len(bars) + 1.6), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    rows = list(range(len(bars)))[::-1]
    colors = ["tab:green" if b.name == "training" else "tab:gray" for b in bars]
    ax.barh(rows, [b.seconds for b in bars], left=[b.start for b in bars], color=colors)
    ax.set_yticks(rows, [b.name for b in bars])
    end = max((b.start + b.seconds for b in bars), default=0.0)
    for row, bar in zip(rows, bars, strict=True):
        ax.annotate(
            f"{bar.seconds:.0f} s · {bar.chip_hours:.2f} chip-h",
            (bar.start + bar.seconds + end * 0.01, row),
            va="center",
            fontsize=8,
        )
    ax.set_xlim(0, end * 1.3 if end > 0 else 1.0)
    ax.set_xlabel("seconds since the request")
    ax.set_title(title)
    ax.grid(visible=True, axis="x", alpha=0.3)
    return fig


def write_timeline_plot(bars: Sequence[PhaseBar], title: str, folder: Path) -> Path | None:
    """Write ``folder/timeline.png``; None when there is nothing to draw."""
    if not bars:
        return None
    from matplotlib import style

    with style.context("default"):
        fig = timeline_figure(bars, title)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", metadata={"Software": None})
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / TIMELINE_PNG
    atomic_write(path, buffer.getvalue())
    return path
