"""``tpu-trainer diagnose LOG|-``: known errors in a saved log, their cause and their fix."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, TextIO

import typer

from tpu_trainer.cli.common import JsonOpt
from tpu_trainer.cli.log_input import open_log

if TYPE_CHECKING:
    from tpu_trainer.plan.diagnose import Match

LogArg = Annotated[
    str,
    typer.Argument(
        help="A saved training or cluster log (plain or .gz), or - to read standard input "
        "(e.g. `kubectl logs <pod> | tpu-trainer diagnose -`).",
    ),
]


def diagnose(log: LogArg, as_json: JsonOpt = False) -> None:
    """Known errors in a log: what happened, why, and the command or setting that fixes it.

    Matches are ranked: fatal before warnings, then the earliest line (the first error usually
    caused the rest), then the most specific. When no known message explains the failure, an
    error line is put in its family by its wording (`<family>-classified`, with a confidence).
    `--json` prints `{"log", "lines", "matches"}`, each match with its family, line, extracted
    fields, cause, fix, source, specificity and confidence.

    Exits 1 when a fatal error was found, 0 otherwise (warnings only, or nothing known), 2 when
    the input is missing, unreadable, empty or binary.
    """
    from tpu_trainer.plan.diagnose import diagnose as scan
    from tpu_trainer.plan.diagnose import has_fatal, matches_to_json

    lines = _LineCounter()
    with _open_log(log) as stream:
        matches = scan(lines.count(stream))
    source = "standard input" if log == "-" else log
    if as_json:
        import json

        doc = {"log": source, "lines": lines.seen, "matches": matches_to_json(matches)}
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        _show(matches, lines.seen, source)
    if has_fatal(matches):
        raise typer.Exit(1)


class _LineCounter:
    """Counts the lines that pass through it, for the summary (the scan stays streaming)."""

    def __init__(self) -> None:
        self.seen = 0

    def count(self, lines: Iterable[str]) -> Iterator[str]:
        for line in lines:
            self.seen += 1
            yield line


def _open_log(log: str) -> AbstractContextManager[TextIO]:
    return open_log(log, "diagnose", "kubectl logs <pod> -c jax-tpu-1 | tpu-trainer diagnose -")


def _show(matches: list[Match], lines_seen: int, source: str) -> None:
    """A Rich table of the matches in rank order, or one line saying nothing known was found."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    if not matches:
        console.print(f"No known error in {lines_seen} lines of {escape(source)}.")
        return
    table = Table(title=f"Known problems in {escape(source)}", show_lines=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("Line", justify="right", no_wrap=True)
    table.add_column("Problem")
    table.add_column("Cause")
    table.add_column("Fix")
    for rank, m in enumerate(matches, start=1):
        style = "bold red" if m.severity == "fatal" else "yellow"
        times = f" (×{m.count})" if m.count > 1 else ""
        sure = f", confidence {m.confidence:.2f}" if m.confidence is not None else ""
        problem = (
            f"[{style}]{escape(m.title)}[/]\n[dim]{escape(m.family)} / {escape(m.signature)}"
            f"{times}{sure}[/]\n[dim italic]{escape(m.excerpt)}[/]"
        )
        table.add_row(str(rank), str(m.line), problem, escape(m.cause), escape(m.fix))
    console.print(table)
    fatal = sum(m.severity == "fatal" for m in matches)
    console.print(f"{len(matches)} known problem(s) in {lines_seen} lines; {fatal} fatal.")
    if any(m.classified for m in matches):
        console.print(
            "[dim]'by its wording': no known message matched; the family was recognised from "
            "the line's words (a guess, never fatal).[/]"
        )
