"""What ``tpu-trainer compare`` adds to the ratios: whether the two runs can be compared
(same model, same slice), their goodput side by side, and the overlay chart of their loss and
step time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tpu_trainer.errors import InputError

if TYPE_CHECKING:
    from tpu_trainer.store.db import RunRow, RunStore


def _slice_of(store: RunStore, row: RunRow) -> str:
    """The device type, with the number of slices when there are several."""
    stored = (store.plan_of(row.id) or {}).get("slice") or {}
    slices = int(stored.get("num_slices") or 1)
    return row.device_type if slices == 1 else f"{row.device_type} x{slices}"


def differences(store: RunStore, a: RunRow, b: RunRow) -> list[str]:
    """How the runs differ in what makes step times and losses incomparable."""
    found = []
    if a.model != b.model:
        found.append(f"model ({a.model} against {b.model})")
    slice_a, slice_b = _slice_of(store, a), _slice_of(store, b)
    if slice_a != slice_b:
        found.append(f"slice ({slice_a} against {slice_b})")
    return found


def check_comparable(store: RunStore, a: RunRow, b: RunRow, *, force: bool) -> str | None:
    """Refuse two runs of different models or slices; with ``force``, the warning to print."""
    found = differences(store, a, b)
    if not found:
        return None
    what = f"runs {a.id} and {b.id} differ in {' and '.join(found)}"
    if not force:
        raise InputError(
            f"{what}: their step times and losses do not measure the same thing",
            fix=f"compare runs of one model on one slice, or `tpu-trainer compare {a.id} {b.id} "
            "--force` to compare them anyway",
        )
    return f"WARNING: {what}; the ratios and the overlay compare unlike runs"


def goodput_line(label: str, summary: dict[str, Any]) -> str:
    """``a: goodput 12.5 % (largest badput PROVISIONING), cost $3.20``."""
    good, worst, cost = summary["goodput"], summary["largest_badput"], summary["cost_usd"]
    text = "n/a" if good is None else f"{good:.1%}"
    badput = f" (largest badput {worst})" if worst else ""
    money = "unknown" if cost is None else f"${cost:,.2f}"
    return f"{label}: goodput {text}{badput}, cost {money}"


def default_plot(store: RunStore, a: RunRow, b: RunRow) -> Path:
    """``compare/<a>-vs-<b>.png`` beside the run store."""
    return store.path.parent / "compare" / f"{a.id}-vs-{b.id}.png"


def write_plot(store: RunStore, a: RunRow, b: RunRow, png: Path) -> tuple[Path, Path]:
    """The overlay chart of both runs' loss and step time, and its numbers as JSON."""
    from tpu_trainer.report.compare_plot import series_of, write_overlay

    series = [
        series_of(
            f"{r.id} {r.model} {r.device_type} {r.precision}",
            store.iter_step_rows(r.id),
            store.step_count(r.id),
        )
        for r in (a, b)
    ]
    title = f"run {a.id} against run {b.id}"
    return write_overlay(series[0], series[1], title, png)
