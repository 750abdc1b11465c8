"""A run's ledger: its timeline, chip-hours and cost, read from the run store.

Glue between the store's rows and the pure computations (:mod:`metrics.timeline`,
:mod:`metrics.cost`); :func:`ledger_json` is what ``show --json`` and ``export`` print.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.config.prices import ChipPrice
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.metrics.cost import ChipRate, RunCost, chip_rate, run_cost
from tpu_trainer.metrics.goodput import Goodput, LogBadput, goodput
from tpu_trainer.metrics.log_badput import MeasuredBadput
from tpu_trainer.metrics.timeline import (
    ResourceSpan,
    RunClock,
    StageSpan,
    Timeline,
    timeline,
)
from tpu_trainer.report.timeline_plot import PhaseBar, write_timeline_plot
from tpu_trainer.store.db import RunRow, RunStore

SCHEDULED = frozenset({LaunchPath.XPK, LaunchPath.KUBERAY})
"""Launch paths whose programs wait for pods to be scheduled and their image pulled."""


@dataclass(frozen=True, slots=True)
class Ledger:
    line: Timeline
    cost: RunCost
    family: Family | None
    good: Goodput
    measured: LogBadput
    """What the log and the segments measured, before each figure is fitted into its phase."""


@dataclass(frozen=True, slots=True)
class _Shape:
    family: Family | None
    chips: int
    jax_devices: int


def shape_of(plan: Mapping[str, Any] | None) -> _Shape:
    """Family, chips and JAX devices of the run's slices, from its stored plan."""
    s = (plan or {}).get("slice") or {}
    try:
        family = Family(str(s.get("family")))
    except ValueError:
        family = None
    slices = int(s.get("num_slices") or 1)
    chips = 0 if family in (None, Family.CPU) else int(s.get("chips") or 0) * slices
    return _Shape(family, chips, int(s.get("jax_devices") or 1) * slices)


def tokens_trained(steps: Iterable[Mapping[str, Any]], jax_devices: int) -> float | None:
    """Tokens the steps trained: their ``total_weights`` (the batch's tokens), else
    Tokens/s/device × devices × seconds; None when the log gives neither."""
    return tokens_of(
        ((s.get("total_weights"), s.get("tokens_device"), s.get("seconds")) for s in steps),
        jax_devices,
    )


def tokens_of(
    figures: Iterable[tuple[float | None, float | None, float | None]], jax_devices: int
) -> float | None:
    """:func:`tokens_trained` of each step's ``(total_weights, tokens_device, seconds)``."""
    total = 0.0
    for weights, rate, seconds in figures:
        if weights is not None:
            total += float(weights)
        elif rate is not None and seconds is not None:
            total += float(rate) * jax_devices * float(seconds)
    return total or None


def run_clock(store: RunStore, row: RunRow, chips: int) -> RunClock:
    return RunClock(
        created_at=row.created_at,
        finished_at=row.finished_at,
        stages=[StageSpan(n, s, b, f) for n, s, b, f, _ in store.stages(row.id)],
        resources=[
            ResourceSpan(r.kind, r.state, r.created_at, r.updated_at)
            for r in store.resource_times(row.id)
        ],
        step_seconds=array(
            "d", (float(s or 0.0) for (s,) in store.step_figures(row.id, "seconds"))
        ),
        chips=chips,
    )


def run_ledger(store: RunStore, row: RunRow, prices: Mapping[str, ChipPrice]) -> Ledger:
    shape = shape_of(store.plan_of(row.id))
    line = timeline(run_clock(store, row, shape.chips))
    rate = (
        chip_rate(shape.family, row.region, prices)
        if shape.family is not None
        else ChipRate(None, None, "price unknown: the run has no stored plan")
    )
    figures = store.step_figures(row.id, "total_weights", "tokens_device", "seconds")
    tokens = tokens_of(figures, shape.jax_devices)
    measured = log_badput(store.metrics(row.id), wasted_seconds(store, row.id))
    good = goodput(line, measured, scheduled=row.launcher in SCHEDULED)
    return Ledger(line, run_cost(line, rate, tokens), shape.family, good, measured)


def log_badput(metrics: Mapping[str, Any] | None, wasted: float | None = None) -> LogBadput:
    """What the stored figures of the log measured: the program's start-up (its first log
    line to the first step starting: to step 0's line, less step 0 itself), the seconds its
    badput lines gave (``log_badput``: TPU initialisation, checkpoint restores and saves, data
    waits), and ``wasted`` step seconds (:func:`wasted_seconds`)."""
    m = metrics or {}
    startup, first = m.get("startup_seconds"), m.get("first_step_seconds")
    program = None if startup is None else max(0.0, float(startup) - float(first or 0.0))
    measured = MeasuredBadput.from_json(m.get("log_badput"))
    return LogBadput(
        program_startup=program,
        tpu_initialization=measured.tpu_initialization,
        checkpoint_restore=measured.checkpoint_restore,
        data_loading=measured.data_loading,
        checkpoint_save=measured.checkpoint_save,
        wasted_steps=wasted,
    )


def wasted_seconds(store: RunStore, run_id: str) -> float | None:
    """The step time an interruption threw away: the steps each interrupted segment ran after
    its last durable checkpoint (or the one it restored), which the next segment ran again; the
    log's first line of a step is the lost one. None when no segment was resumed."""
    segments = store.segments(run_id)
    redone: set[int] = set()
    for cut in segments[:-1]:  # a segment the next one resumed
        if cut.cause is None or cut.last_step is None:
            continue
        kept = cut.durable_step if cut.durable_step is not None else cut.restored_step
        redone.update(range(0 if kept is None else kept + 1, cut.last_step + 1))
    if not redone:
        return None
    return sum(s.seconds for s in store.iter_step_rows(run_id) if s.step in redone)


def _at(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="seconds")


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def ledger_json(ledger: Ledger) -> dict[str, Any]:
    """The ledger as ``show --json`` prints it."""
    line, cost = ledger.line, ledger.cost
    return {
        "chips": line.chips,
        "wall_seconds": round(line.wall_seconds, 3),
        "chip_hours": round(line.chip_hours, 6),
        "cost": _money(cost.total),
        "price": {
            "usd_per_chip_hour": cost.rate.usd_per_chip_hour,
            "spot_usd_per_chip_hour": cost.rate.spot_usd_per_chip_hour,
            "basis": "on-demand",
            "source": cost.rate.source,
        },
        "tokens": cost.tokens,
        "cost_per_million_tokens": _money(cost.per_million_tokens),
        **goodput_json(ledger.good),
        "log_measured": {
            f.name: None if (v := getattr(ledger.measured, f.name)) is None else round(v, 3)
            for f in fields(ledger.measured)
        },
        "phases": [
            {
                "name": p.name.value,
                "start": _at(p.start),
                "end": _at(p.end),
                "seconds": round(p.seconds, 3),
                "chip_hours": round(p.chip_hours, 6),
                "cost": _money(c),
            }
            for p, c in zip(line.phases, cost.phases, strict=True)
        ],
        "notes": list(line.notes),
    }


def goodput_json(good: Goodput) -> dict[str, Any]:
    """Goodput, the largest badput bucket and every bucket (seconds and share of wall time)."""
    worst = good.largest
    return {
        "goodput": None if good.goodput is None else round(good.goodput, 4),
        "productive_seconds": round(good.productive_seconds, 3),
        "largest_badput": None
        if worst is None
        else {
            "bucket": worst[0].value,
            "seconds": round(worst[1], 3),
            "share": round(good.share(worst[0]), 4),
        },
        "badput": {
            b.value: {"seconds": round(s, 3), "share": round(good.share(b), 4)}
            for b, s in good.badput.items()
        },
    }


def report_figures(ledger: Ledger) -> dict[str, Any]:
    """What a run's README row and section carry of its ledger."""
    worst, cost = ledger.good.largest, ledger.cost
    return {
        "goodput": ledger.good.goodput,
        "largest_badput": None if worst is None else worst[0].value,
        "cost_usd": cost.total,
        "cost_per_million_tokens": cost.per_million_tokens,
        "price_note": "" if cost.rate.known else cost.rate.source,
    }


def phase_bars(line: Timeline) -> list[PhaseBar]:
    """The timeline's phases as the Gantt chart's bars (seconds from the request)."""
    origin = line.phases[0].start if line.phases else 0.0
    return [PhaseBar(p.name.value, p.start - origin, p.seconds, p.chip_hours) for p in line.phases]


def draw_timeline(store: RunStore, row: RunRow, folder: Path) -> Path | None:
    """Write the run's Gantt chart into ``folder`` (beside its log); the chart needs no
    prices. Returns the file, or None when the run has no phases yet."""
    line = timeline(run_clock(store, row, shape_of(store.plan_of(row.id)).chips))
    title = f"{row.model} · {row.device_type} · run {row.id}"
    return write_timeline_plot(phase_bars(line), title, folder)


def timeline_chart(store: RunStore, row: RunRow | None, folder: Path) -> Path | None:
    """:func:`draw_timeline` at the end of a run: a chart that cannot be drawn is left out
    and never changes how the run ended."""
    if row is None:
        return None
    try:
        return draw_timeline(store, row, folder)
    except Exception:  # the run's outcome is recorded already; the chart is extra
        return None
