"""A run's timeline, chip-hours and cost as ``show``, ``runs`` and ``export`` print them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from tpu_trainer.config.prices import ChipPrice
    from tpu_trainer.metrics.goodput import Goodput
    from tpu_trainer.metrics.ledger import Ledger
    from tpu_trainer.store.db import RunRow, RunStore


def configured_prices() -> Mapping[str, ChipPrice]:
    """The configuration's ``prices:`` (none without a configuration)."""
    from tpu_trainer.config.load import load_config

    config = load_config(None, require=False)
    return config.prices if config is not None else {}


def ledger_of(store: RunStore, row: RunRow) -> Ledger:
    from tpu_trainer.metrics.ledger import run_ledger

    return run_ledger(store, row, configured_prices())


def ledger_columns(store: RunStore, row: RunRow) -> dict[str, Any]:
    """The flat figures a run list or a CSV export carries."""
    ledger = ledger_of(store, row)
    line, cost, worst = ledger.line, ledger.cost, ledger.good.largest
    return {
        "wall_seconds": round(line.wall_seconds, 1),
        "chip_hours": round(line.chip_hours, 4),
        "cost_usd": None if cost.total is None else round(cost.total, 2),
        "cost_per_million_tokens": (
            None if cost.per_million_tokens is None else round(cost.per_million_tokens, 4)
        ),
        "goodput": None if ledger.good.goodput is None else round(ledger.good.goodput, 4),
        "largest_badput": None if worst is None else worst[0].value,
    }


def print_ledger(console: Console, ledger: Ledger) -> None:
    """The timeline table, then cost, tokens and goodput in a sentence each."""
    from rich.table import Table

    line, cost = ledger.line, ledger.cost
    if not line.phases:
        return
    table = Table(title=f"timeline ({line.chips} chips)")
    for col in ("phase", "start (UTC)", "seconds", "chip-hours", "cost (USD)"):
        table.add_column(col)
    origin = line.phases[0].start
    for phase, money in zip(line.phases, cost.phases, strict=True):
        table.add_row(
            phase.name.value,
            f"+{phase.start - origin:.1f} s",
            f"{phase.seconds:.1f}",
            f"{phase.chip_hours:.3f}",
            "—" if money is None else f"{money:.2f}",
        )
    console.print(table)
    total = "unknown" if cost.total is None else f"${cost.total:.2f}"
    console.print(
        f"wall {line.wall_seconds:.1f} s, {line.chip_hours:.3f} chip-hours, cost {total} "
        f"({cost.rate.source})"
    )
    if cost.per_million_tokens is not None and cost.tokens:
        console.print(
            f"{cost.tokens:,.0f} tokens trained: ${cost.per_million_tokens:.4f} per million"
        )
    print_goodput(console, ledger.good)
    for note in line.notes:
        console.print(f"note: {note}")


def print_goodput(console: Console, good: Goodput) -> None:
    """Goodput in a sentence, then the buckets that took time, largest first."""
    from rich.table import Table

    if good.goodput is None:
        return
    worst = good.largest
    named = f"; largest badput: {worst[0].value} ({worst[1]:.1f} s)" if worst else ""
    console.print(f"goodput {good.goodput:.1%} (productive step time ÷ wall time){named}")
    table = Table(title="badput (ml-goodput-measurement buckets; the tool's before the program)")
    for col in ("bucket", "seconds", "share of wall time"):
        table.add_column(col)
    for bucket, seconds in sorted(good.badput.items(), key=lambda kv: -kv[1]):
        if seconds > 0:
            table.add_row(bucket.value, f"{seconds:.1f}", f"{good.share(bucket):.1%}")
    console.print(table)


def timeline_of(store: RunStore, row: RunRow) -> dict[str, Any]:
    """The run's ledger as JSON (``export --format json``)."""
    from tpu_trainer.metrics.ledger import ledger_json

    return ledger_json(ledger_of(store, row))


def estimate_and_actual(store: RunStore, row: RunRow, ledger: Ledger) -> dict[str, Any] | None:
    """The estimate recorded before the run, beside what the run took (None without one)."""
    recorded = store.estimate_of(row.id)
    if recorded is None:
        return None
    line, cost = ledger.line, ledger.cost
    return {
        "estimate": recorded,
        "actual": {
            "wall_seconds": round(line.wall_seconds, 3),
            "step_seconds": (store.metrics(row.id) or {}).get("step_seconds"),
            "chip_hours": round(line.chip_hours, 6),
            "cost": None if cost.total is None else round(cost.total, 2),
        },
    }


def print_estimate(console: Console, side_by_side: dict[str, Any] | None) -> None:
    from rich.table import Table

    if side_by_side is None:
        return
    table = Table(title="estimate and actual")
    for col in ("", "estimate", "actual"):
        table.add_column(col)
    est, act = side_by_side["estimate"], side_by_side["actual"]
    for key, label in (
        ("wall_seconds", "wall seconds"),
        ("step_seconds", "step seconds"),
        ("chip_hours", "chip-hours"),
        ("cost", "cost (USD)"),
    ):
        table.add_row(label, _cell(est.get(key)), _cell(act.get(key)))
    console.print(table)
    console.print(f"estimated step time: {est.get('step_source')}")


def _cell(value: object) -> str:
    return f"{value:,.2f}" if isinstance(value, int | float) else "—"
