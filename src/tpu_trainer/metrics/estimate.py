"""What a run is expected to take and cost, before anything is created.

Wall time = the overheads (provisioning, scheduling, compile, teardown) + the steps after the
first × the expected step time. The step time comes from this model's history on this slice
in the run store (its runs' steady-state step time), else a published table
(``catalog/step_times.yaml``), else it is unknown; the overheads are the medians measured on
this cluster's earlier runs, else stated defaults. Each figure says where it came from.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.catalog.step_times import OVERHEADS, STEP_TIMES
from tpu_trainer.config.prices import ChipPrice
from tpu_trainer.metrics.cost import chip_rate
from tpu_trainer.metrics.ledger import run_clock, shape_of
from tpu_trainer.metrics.timeline import PhaseName, timeline
from tpu_trainer.store.db import RunMode, RunRow, RunStore

HISTORY_RUNS = 5
"""At most this many of the latest runs are averaged."""
_PHASES: Mapping[str, tuple[PhaseName, ...]] = {
    "provisioning": (PhaseName.CAPACITY, PhaseName.PROVISIONING),
    "scheduling": (PhaseName.SETUP, PhaseName.STARTUP),
    "compile": (PhaseName.COMPILE,),
    "teardown": (PhaseName.WIND_DOWN, PhaseName.TEARDOWN),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """What is about to run."""

    model: str
    device_type: str
    precision: str
    family: Family | None
    chips: int
    steps: int | None
    seq: int | None
    region: str | None
    cluster: str | None


@dataclass(frozen=True, slots=True)
class Figure:
    seconds: float | None
    source: str


@dataclass(frozen=True, slots=True)
class Estimate:
    steps: int | None
    step: Figure
    overheads: Mapping[str, Figure]
    wall_seconds: float | None
    chip_hours: float | None
    usd_per_chip_hour: float | None
    cost: float | None
    price_source: str

    def to_json(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "step_seconds": self.step.seconds,
            "step_source": self.step.source,
            "overheads": {
                k: {"seconds": v.seconds, "source": v.source} for k, v in self.overheads.items()
            },
            "wall_seconds": self.wall_seconds,
            "chip_hours": self.chip_hours,
            "usd_per_chip_hour": self.usd_per_chip_hour,
            "cost": None if self.cost is None else round(self.cost, 2),
            "price_source": self.price_source,
        }


def estimate(
    store: RunStore,
    target: Target,
    prices: Mapping[str, ChipPrice],
    mode: RunMode = RunMode.REAL,
) -> Estimate:
    """The estimate for ``target`` from ``store``'s runs of ``mode`` (see the module)."""
    runs = [r for r in store.runs(limit=10_000) if r.mode is mode]
    step = _history_step(store, runs, target) or _published_step(target)
    overheads = _overheads(store, runs, target)
    wall: float | None = None
    held: float | None = None
    if step.seconds is not None and target.steps is not None:
        training = max(0, target.steps - 1) * step.seconds
        fixed = {k: v.seconds or 0.0 for k, v in overheads.items()}
        wall = training + sum(fixed.values())
        held = wall - fixed["provisioning"]
    rate = chip_rate(target.family, target.region, prices) if target.family is not None else None
    chip_hours = None if held is None else target.chips * held / 3600
    price = rate.usd_per_chip_hour if rate is not None else None
    return Estimate(
        target.steps,
        step,
        overheads,
        wall,
        chip_hours,
        price,
        None if chip_hours is None or price is None else chip_hours * price,
        rate.source if rate is not None else "price unknown: unknown TPU family",
    )


def _history_step(store: RunStore, runs: list[RunRow], target: Target) -> Figure | None:
    same = [
        r
        for r in runs
        if (r.model, r.device_type, r.precision)
        == (target.model, target.device_type, target.precision)
    ]
    found: list[tuple[str, float]] = []
    for row in same:
        seconds = (store.metrics(row.id) or {}).get("step_seconds")
        if isinstance(seconds, int | float) and seconds > 0:
            found.append((row.id, float(seconds)))
        if len(found) == HISTORY_RUNS:
            break
    if not found:
        return None
    ids = ", ".join(i for i, _ in found)
    mean = statistics.fmean(s for _, s in found)
    return Figure(mean, f"history: steady-state step time of {len(found)} run(s) ({ids})")


def _published_step(target: Target) -> Figure:
    rows = [
        r
        for r in STEP_TIMES.rows
        if (r.model, r.family, r.chips, r.precision)
        == (target.model, target.family, target.chips, target.precision)
    ]
    if target.seq is not None:
        rows = [r for r in rows if r.seq == target.seq] or rows
    if not rows:
        return Figure(
            None,
            f"unknown: no run of {target.model} on {target.device_type} ({target.precision}) "
            "in the store and no published step time",
        )
    row = rows[0]
    other = "" if target.seq in (None, row.seq) else f"; this run's seq is {target.seq}"
    return Figure(
        row.step_seconds,
        f"published: {row.model}, {row.chips} chips, seq {row.seq}, {row.precision} "
        f"({row.source}, {row.date}{other})",
    )


def _overheads(store: RunStore, runs: list[RunRow], target: Target) -> dict[str, Figure]:
    measured: dict[str, list[float]] = {k: [] for k in OVERHEADS}
    used = 0
    for row in runs:
        if used == HISTORY_RUNS:
            break
        if row.cluster != target.cluster or row.finished_at is None:
            continue
        line = timeline(run_clock(store, row, shape_of(store.plan_of(row.id)).chips))
        if line.phase(PhaseName.TRAINING) is None:
            continue
        used += 1
        for name, phases in _PHASES.items():
            measured[name].append(sum(p.seconds for p in line.phases if p.name in phases))
    where = target.cluster or "this machine"
    return {
        name: (
            Figure(
                statistics.median(values),
                f"median of {len(values)} run(s) on {where}",
            )
            if values
            else Figure(STEP_TIMES.default_overheads[name], "default (no run measured yet)")
        )
        for name, values in measured.items()
    }
