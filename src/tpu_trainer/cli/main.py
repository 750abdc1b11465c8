"""The ``tpu-trainer`` command line. The only place that prints errors and picks exit codes."""

from __future__ import annotations

import signal
import sqlite3
import sys
from typing import Annotated

import typer
from rich.markup import escape

from tpu_trainer import __version__
from tpu_trainer.cli import (
    check_cmd,
    collect_cmd,
    config_cmd,
    diagnose_cmd,
    estimate_cmd,
    history_cmd,
    ops_cmd,
    plan_cmd,
    resume_cmd,
    runtime_cmd,
    slice_cmd,
    train_cmd,
    vm_programs_cmd,
)
from tpu_trainer.errors import TpuTrainerError

app = typer.Typer(
    name="tpu-trainer",
    help="Run LLM training recipes on Cloud TPUs end to end: plan, check, provision, submit, "
    "follow, report and clean up.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(config_cmd.app, name="config")
app.add_typer(runtime_cmd.app, name="runtime")
app.command("plan")(plan_cmd.plan)
app.command("scripts")(plan_cmd.scripts)
app.command("slice")(slice_cmd.slice_info)
app.command("train")(train_cmd.train)
app.command("resume")(resume_cmd.resume)
app.command("check")(check_cmd.check)
app.command("grpo")(vm_programs_cmd.grpo)
app.command("hf")(vm_programs_cmd.hf)
app.command("preflight")(ops_cmd.preflight)
app.command("cleanup")(ops_cmd.cleanup)
app.command("gc")(ops_cmd.gc)
app.command("runs")(ops_cmd.runs)
app.command("diagnose")(diagnose_cmd.diagnose)
app.command("collect")(collect_cmd.collect)
app.command("show")(history_cmd.show)
app.command("compare")(history_cmd.compare)
app.command("report")(history_cmd.report)
app.command("export")(history_cmd.export)
app.command("estimate")(estimate_cmd.estimate)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tpu-trainer {__version__}")
        raise typer.Exit


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    version: Annotated[  # noqa: ARG001 (handled by its eager callback)
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """tpu-trainer."""
    _state["debug"] = debug


def run(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, turn tool errors into a message and exit code.

    Usage errors are Typer's own (exit 2); a :class:`TpuTrainerError` prints its message and the
    next step, without a traceback unless ``--debug``. Ctrl-C exits 130 and SIGTERM 143, each
    with a line saying so (a run in progress has torn itself down by then).
    """
    args = train_cmd.with_bare_auto_resume(sys.argv[1:] if argv is None else argv)
    from tpu_trainer.app.interrupt import Interrupted, on_sigterm

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        app(args=args, prog_name="tpu-trainer")
    except TpuTrainerError as e:
        if _state["debug"] or "--debug" in args:
            raise
        _error(e.message, e.fix)
        sys.exit(e.exit_code)
    except sqlite3.DatabaseError as e:
        if _state["debug"] or "--debug" in args:
            raise
        from tpu_trainer.store.damage import recovery_fix
        from tpu_trainer.store.db import default_path

        path = default_path()
        _error(f"run store {path} cannot be read: {e}", recovery_fix(path))
        sys.exit(1)
    except KeyboardInterrupt:
        _calm()
        _error("interrupted (Ctrl-C)", "`tpu-trainer runs` shows what each run left")
        sys.exit(130)
    except Interrupted:
        _calm()
        _error("terminated (SIGTERM)", "`tpu-trainer runs` shows what each run left")
        sys.exit(143)


def _calm() -> None:
    """Everything is torn down by now: a further Ctrl-C or SIGTERM only ends the message."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)


def _error(message: str, fix: str) -> None:
    from rich.console import Console

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    err.print(f"[bold red]error:[/] {escape(message)}", markup=True)
    if fix:
        err.print(f"[bold]next:[/] {escape(fix)}", markup=True)
