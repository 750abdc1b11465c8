"""``tpu-trainer show``, ``compare``, ``report`` and ``export``: the run history."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import datetime
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tpu_trainer.cli.collect_cmd import StepsOpt
from tpu_trainer.cli.common import JsonOpt, LangOpt
from tpu_trainer.cli.ledger_view import (
    estimate_and_actual,
    ledger_columns,
    ledger_of,
    print_estimate,
    print_ledger,
    timeline_of,
)
from tpu_trainer.errors import InputError
from tpu_trainer.report.model import ReportLang
from tpu_trainer.store.db import RunMode

if TYPE_CHECKING:
    from tpu_trainer.metrics.ledger import Ledger
    from tpu_trainer.store.db import RunRow, RunStore

RunArg = Annotated[str, typer.Argument(help="A run id (see `tpu-trainer runs`).")]
_SUMMARY_KEYS = ("step_seconds", "tflops_per_device", "tflops_per_chip", "tokens_per_chip", "mfu")


def _store() -> RunStore:
    from tpu_trainer.cli.services_cli import open_store

    return open_store()


def _run(store: RunStore, run_id: str) -> RunRow:
    row = store.run(run_id)
    if row is None:
        raise InputError(f"no run {run_id} in {store.path}", fix="see `tpu-trainer runs`")
    return row


def run_summary(store: RunStore, row: RunRow) -> dict[str, Any]:
    metrics = store.metrics(row.id) or {}
    loss = metrics.get("loss") or {}
    return {
        "id": row.id,
        "model": row.model,
        "device_type": row.device_type,
        "precision": row.precision,
        "status": row.status.value,
        "mode": row.mode.value,
        "zone": row.zone,
        "created": datetime.fromtimestamp(row.created_at).isoformat(timespec="seconds"),
        **{k: metrics.get(k) for k in _SUMMARY_KEYS},
        "steady_steps": metrics.get("steady_steps"),
        "loss_first": loss.get("first"),
        "loss_last": loss.get("last"),
        "error": row.error,
        **ledger_columns(store, row),
    }


def show(run_id: RunArg, as_json: JsonOpt = False, steps: StepsOpt = "60") -> None:
    """One run: stages and their times, resources, capacity attempts, steady-state figures,
    and its steps (a long run's first and last ones and the outliers between)."""
    from tpu_trainer.cli.collect_cmd import steps_limit

    limit = steps_limit(steps)
    store = _store()
    row = _run(store, run_id)
    ledger = ledger_of(store, row)
    if not as_json:
        _show_text(store, row, limit, ledger)
        return
    data = {**_details(store, row, ledger), "commands": len(store.commands(run_id))}
    _echo_with_steps(data, store.iter_steps(run_id))


_STEPS = "\u0000steps\u0000"
"""Where the steps go in ``show --json``'s indented document (written in pieces)."""
_STEPS_AT_ONCE = 1_000


def _echo_with_steps(data: dict[str, Any], steps: Iterator[dict[str, Any]]) -> None:
    """``json.dumps({**data, "steps": [*steps]}, indent=2)`` and a newline, written some
    steps at a time: a long run's steps are never all held."""
    head = json.dumps({**data, "steps": _STEPS}, indent=2, default=str)
    before, after = head.split(json.dumps(_STEPS))
    typer.echo(before, nl=False)
    opening = "[\n"
    while part := list(islice(steps, _STEPS_AT_ONCE)):
        text = json.dumps(part, indent=2, default=str)  # "[\n  {...},\n  {...}\n]"
        typer.echo(opening + "  " + text[2:-2].replace("\n", "\n  "), nl=False)
        opening = ",\n"
    typer.echo(("[]" if opening == "[\n" else "\n  ]") + after)


def _details(store: RunStore, row: RunRow, ledger: Ledger) -> dict[str, Any]:
    """A run's summary, timeline and estimate, stages, resources and capacity attempts."""
    from tpu_trainer.metrics.ledger import ledger_json

    return {
        **run_summary(store, row),
        "timeline": ledger_json(ledger),
        "estimate": estimate_and_actual(store, row, ledger),
        "stages": [
            {"name": n, "status": s, "seconds": (f - b) if f else None, "detail": d}
            for n, s, b, f, d in store.stages(row.id)
        ],
        "resources": [
            {"kind": r.kind, "name": r.name, "state": r.state.value}
            for r in store.resources(row.id)
        ],
        "attempts": store.attempts(row.id),
        "segments": [
            {
                "n": g.n,
                "zone": g.zone,
                "ended": g.cause or ("finished" if g.ended_at else "running"),
                "last_step": g.last_step,
                "durable_step": g.durable_step,
                "restored_step": g.restored_step,
                "wasted_steps": g.wasted_steps,
                "recovery_s": g.recovery_s,
            }
            for g in store.segments(row.id)
        ],
    }


def _show_text(store: RunStore, row: RunRow, limit: int | None, ledger: Ledger) -> None:
    from rich.console import Console
    from rich.table import Table

    from tpu_trainer.cli.step_rows import step_table

    run_id = row.id
    data = _details(store, row, ledger)
    console = Console()
    console.print(
        f"[bold]run {row.id}[/]: {row.model} on {row.device_type} ({row.precision}), "
        f"{row.status.value}"
        + (", a rehearsal on the fake cloud" if row.mode is RunMode.REHEARSAL else "")
        + (f" — {row.error}" if row.error else "")
    )
    for title, rows in (
        ("stages", data["stages"]),
        ("resources", data["resources"]),
        ("capacity attempts", data["attempts"]),
        ("segments", data["segments"] if len(data["segments"]) > 1 else []),
    ):
        if not rows:
            continue
        table = Table(title=title)
        for col in rows[0]:
            table.add_column(col)
        for item in rows:
            table.add_row(
                *(
                    "" if v is None else (f"{v:.1f}" if isinstance(v, float) else str(v))
                    for v in item.values()
                )
            )
        console.print(table)
    if store.step_count(run_id):
        console.print(step_table(f"steps of {run_id}", store.iter_step_rows(run_id), limit))
    figures = ", ".join(f"{k} {data[k]:.3f}" for k in _SUMMARY_KEYS if isinstance(data[k], float))
    console.print(f"steady state (steps {_steady(data['steady_steps'])}): {figures or 'none'}")
    print_ledger(console, ledger)
    print_estimate(console, data["estimate"])


def _steady(chosen: object) -> str:
    """The steady steps as stored; a long run's as ranges and a count."""
    from tpu_trainer.metrics.stream import LONG_RUN_STEPS
    from tpu_trainer.report.step_table import ranges

    if isinstance(chosen, list) and len(chosen) > LONG_RUN_STEPS:
        return f"{ranges(chosen)} ({len(chosen):,} steps)"
    return str(chosen)


def compare(
    run_a: RunArg,
    run_b: Annotated[str, typer.Argument(help="The run to compare against.")],
    as_json: JsonOpt = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Compare runs of different models or slices anyway."),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Where the overlay chart goes (default: compare/<a>-vs-<b>.png beside the "
            "run store); its numbers go beside it as .json.",
        ),
    ] = None,
) -> None:
    """Ratios of two runs' steady states (e.g. fp8 against bf16), their goodput and cost, and
    an overlay chart of their loss and step time. Runs of different models or slices are
    refused unless --force."""
    from tpu_trainer.cli.compare_view import (
        check_comparable,
        default_plot,
        goodput_line,
        write_plot,
    )
    from tpu_trainer.metrics.summary import compare_figures

    store = _store()
    a, b = _run(store, run_a), _run(store, run_b)
    warning = check_comparable(store, a, b, force=force)
    if warning:
        typer.secho(warning, err=True, fg="red", bold=True)
    ma, mb = store.metrics(a.id), store.metrics(b.id)
    if not ma or not mb:
        missing = a.id if not ma else b.id
        raise InputError(f"run {missing} has no metrics", fix="compare runs that reached training")
    c = compare_figures(ma, mb)
    png, sidecar = write_plot(store, a, b, plot or default_plot(store, a, b))
    data: dict[str, Any] = {
        "a": run_summary(store, a),
        "b": run_summary(store, b),
        "step_time_ratio": c.step_time_ratio,
        "speedup_percent": c.speedup_percent,
        "tflops_per_chip_ratio": c.tflops_per_chip_ratio,
        "tokens_per_chip_ratio": c.tokens_per_chip_ratio,
        "comparable": warning is None,
        "plot": str(png),
        "plot_data": str(sidecar),
    }
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    for label, row in (("a", a), ("b", b)):
        s = data[label]
        typer.echo(
            f"{label}: {row.id} {row.model} {row.device_type} {row.precision}: "
            f"{_fmt(s['step_seconds'])} s/step, {_fmt(s['tflops_per_chip'])} TFLOP/s/chip"
        )
    typer.echo(
        f"step time a/b = {_fmt(c.step_time_ratio)}; a is {_fmt(c.speedup_percent)} % "
        f"faster; TFLOP/s/chip a/b = {_fmt(c.tflops_per_chip_ratio)}"
    )
    for label in ("a", "b"):
        typer.echo(goodput_line(label, data[label]))
    typer.echo(f"overlay of loss and step time: {png} (numbers: {sidecar})")


def _fmt(value: object) -> str:
    return f"{value:.3f}" if isinstance(value, float) else "—"


def report(
    run_id: RunArg,
    lang: LangOpt = ReportLang.ZH,
    to_recipe: Annotated[
        bool,
        typer.Option(
            "--to-recipe",
            help="Write a rehearsal's report into the recipes tree (marked as a rehearsal) "
            "instead of beside the run store.",
        ),
    ] = False,
) -> None:
    """Write (again) a run's section into its model's README; a run is never added twice."""
    from tpu_trainer.app.results import write_stored_report

    readme, plots, changed, why = write_stored_report(
        _store(), run_id, lang.value, to_recipe=to_recipe
    )
    if why:
        typer.echo(f"report: {why}")
    typer.echo(
        f"{'updated' if changed else 'already has this run:'} {readme} (+{len(plots)} plots)"
    )


def export(
    fmt: Annotated[str, typer.Option("--format", help="csv or json.")] = "csv",
    output: Annotated[Path | None, typer.Option("--output", help="File (default: stdout).")] = None,
) -> None:
    """Every run with its steady-state figures, as CSV or JSON."""
    if fmt not in ("csv", "json"):
        raise InputError(f"--format {fmt}: unknown", fix="use --format csv or --format json")
    store = _store()
    runs = store.runs(limit=1_000_000)
    rows = [run_summary(store, r) for r in runs]
    if fmt == "json":
        rows = [
            {**r, "timeline": timeline_of(store, run)} for r, run in zip(rows, runs, strict=True)
        ]
        text = json.dumps(rows, indent=2, default=str) + "\n"
    else:
        buf = io.StringIO()
        keys = list(rows[0]) if rows else ["id"]
        writer = csv.DictWriter(buf, fieldnames=keys)
        writer.writeheader()
        writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
        text = buf.getvalue()
    if output is None:
        typer.echo(text, nl=False)
    else:
        output.write_text(text, encoding="utf-8")
        typer.echo(f"wrote {len(rows)} runs to {output}")
