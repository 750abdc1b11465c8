"""The step table ``collect`` and ``show`` print: bounded for a long run, with gaps marked."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.table import Table

    from tpu_trainer.store.steps import StepRow


def num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def step_table(title: str, rows: Iterable[StepRow], limit: int | None) -> Table:
    """A table of ``rows`` (read once, as a stream): every row up to ``limit``, else the first
    and last steps and the outliers between, with a row saying what each gap leaves out."""
    from rich.markup import escape
    from rich.table import Table

    from tpu_trainer.report.step_table import Gap, bounded

    table = Table(title=title)
    for name in ("Step", "Seconds", "TFLOP/s/device", "TFLOP/s/chip", "Tokens/s/chip", "Loss"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("Steady state")
    for r in bounded(rows, limit):
        if isinstance(r, Gap):
            table.add_row("", "", "", "", "", "", f"[dim italic]{escape(r.describe())}[/]")
            continue
        used = "[green]yes[/]" if r.excluded is None else f"[dim]no: {escape(r.excluded)}[/]"
        table.add_row(
            str(r.step),
            num(r.seconds),
            num(r.tflops_per_device),
            num(r.tflops_per_chip),
            num(r.tokens_per_chip, 1),
            num(r.loss),
            used,
        )
    return table
