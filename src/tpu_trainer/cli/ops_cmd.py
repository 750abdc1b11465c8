"""``tpu-trainer preflight``, ``cleanup``, ``gc`` and ``runs``."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli.common import ConfigOpt, JsonOpt, RehearseOpt, RequestArg
from tpu_trainer.cli.plan_cmd import SlicesOpt

if TYPE_CHECKING:
    from collections.abc import Callable

    from tpu_trainer.app.services import Services
    from tpu_trainer.cli.services_cli import Setup
    from tpu_trainer.launchers.cleanup import Cleaner
    from tpu_trainer.launchers.gke.preflight import Check
    from tpu_trainer.store.db import RunStore

FixOpt = Annotated[bool, typer.Option("--fix", help="Apply the fixes of failed checks.")]
DryRunOpt = Annotated[
    bool,
    typer.Option("--dry-run", help="Print the commands that would change the cloud; run none."),
]


def preflight(
    request: RequestArg,
    config: ConfigOpt = None,
    fix: FixOpt = False,
    dry_run: DryRunOpt = False,
    rehearse: RehearseOpt = None,
    as_json: JsonOpt = False,
    num_slices: SlicesOpt = None,
) -> None:
    """The pre-training checklist, run concurrently, with the command that fixes each failure.

    With --fix, the failures that have a command are fixed and everything is checked again;
    the exit status is 1 while any check still fails. --fix --dry-run prints the commands (and
    the manifests they apply) and changes nothing."""
    from tpu_trainer.app.planning import Request, current_user, plan_with_config
    from tpu_trainer.launchers.gke import preflight as pf
    from tpu_trainer.plan.plan import Level, PlanOptions

    setup, svc = _services(config, rehearse, dry_run)
    options = PlanOptions(user=current_user(), now=datetime.now(), num_slices=num_slices)
    plan = plan_with_config(Request(request), setup.config, options)
    pf.require_account(svc.gcloud)

    def run_checks() -> list[Check]:
        return pf.checks(
            plan, setup.config, pf.observe(plan, setup.config, svc.gcloud, svc.kubectl)
        )

    results = run_checks()
    if fix:
        say = _sayer(as_json)
        failing = [c for c in results if c.status is Level.FAIL]
        if dry_run:
            _show_fixes(failing, say)
        elif _apply_fixes(failing, svc, say):
            results = run_checks()
            _say_outcome(failing, results, say)
    _show_checks(results, as_json)
    if any(c.status is Level.FAIL for c in results):
        raise typer.Exit(1)


def _sayer(as_json: bool) -> Callable[[str], None]:
    """Progress lines: on stdout, or on stderr when stdout carries JSON."""
    return lambda line: typer.echo(line, err=as_json)


def _show_fixes(failing: list[Check], say: Callable[[str], None]) -> None:
    """What --fix would run (each manifest in full), without running anything."""
    from tpu_trainer.infra.kube_check import DRY_RUN_ARGS

    if any(check.finding is not None and check.finding.manifest for check in failing):
        dry_run = " ".join(("kubectl", *DRY_RUN_ARGS))
        say(f"would first check every manifest below with the cluster: {dry_run}")
    for check in failing:
        if check.fix_argv:
            say(f"would run ({check.name}): {check.fix}")
        else:
            say(f"not fixed automatically ({check.name}): {check.fix or check.message}")


def _apply_fixes(failing: list[Check], svc: Services, say: Callable[[str], None]) -> bool:
    """Run the fix of every failing check that has one; returns whether any ran. The cluster
    checks every manifest first (one server-side dry run): when it refuses one, none is
    applied."""
    from tpu_trainer.errors import TpuTrainerError
    from tpu_trainer.launchers.gke.kueue_setup import apply_fix, check_fixes

    try:
        check_fixes([c.finding for c in failing if c.finding is not None], svc.kubectl)
    except TpuTrainerError as e:
        say(f"fixes not applied: {e.message}\n  fix: {e.fix}")
        return False
    ran = False
    for check in failing:
        if not check.fix_argv:
            say(f"not fixed automatically ({check.name}): {check.fix or check.message}")
            continue
        ran = True
        try:
            if check.finding is not None:
                apply_fix(check.finding, svc.kubectl, svc.runner)
            else:
                svc.runner.run(list(check.fix_argv), check=True)
        except TpuTrainerError as e:
            say(f"fix failed ({check.name}): {e.message}")
    return ran


def _say_outcome(before: list[Check], after: list[Check], say: Callable[[str], None]) -> None:
    """After fixing, what the second look found for each check that failed."""
    from tpu_trainer.plan.plan import Level

    now = {c.name: c.status for c in after}
    for check in before:
        if not check.fix_argv:
            continue
        passed = now.get(check.name, Level.FAIL) is not Level.FAIL
        say(f"{'fixed' if passed else 'still failing after its fix'}: {check.name}")


def _services(
    config: Path | None, rehearse: Path | None, dry_run: bool, store: RunStore | None = None
) -> tuple[Setup, Services]:
    """The configuration and services; with ``dry_run``, commands that would change the cloud
    are printed instead of run (read-only ones still run)."""
    from dataclasses import replace

    from tpu_trainer.cli.services_cli import build
    from tpu_trainer.infra.runner import DryRunRunner, SubprocessRunner

    setup = build(config, rehearse, store=store)
    svc = setup.services
    if dry_run:
        inner = svc.runner
        if isinstance(inner, SubprocessRunner):  # a dry run records nothing in the store
            inner = replace(inner, recorder=None)
        svc = replace(svc, runner=DryRunRunner(inner, on_record=_print_argv))
    return setup, svc


def _print_argv(argv: tuple[str, ...]) -> None:
    import shlex

    typer.echo("would run: " + shlex.join(argv))


def _show_checks(results: list[Check], as_json: bool) -> None:
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "checks": [
                        {
                            "name": c.name,
                            "status": c.status.value,
                            "message": c.message,
                            "fix": c.fix,
                        }
                        for c in results
                    ]
                },
                indent=2,
            )
        )
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Pre-training checks")
    for col in ("check", "status", "message", "fix"):
        table.add_column(col)
    colour = {"pass": "green", "warn": "yellow", "fail": "bold red"}
    for c in results:
        table.add_row(c.name, f"[{colour[c.status.value]}]{c.status.value}[/]", c.message, c.fix)
    Console().print(table)


PollSecondsOpt = Annotated[
    float,
    typer.Option("--poll", help="Seconds between looks while a node pool's create finishes."),
]


def cleanup(
    run_id: Annotated[str, typer.Argument(help="The run to clean up (see `tpu-trainer runs`).")],
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    rehearse: RehearseOpt = None,
    poll: PollSecondsOpt = 10.0,
) -> None:
    """Delete everything a run created that is still there (after a crash, or a failed teardown).
    A node pool still being created is waited for, then deleted."""
    from tpu_trainer.launchers.cleanup import Cleaner

    svc = _cleanup_services(config, rehearse, dry_run)
    cleaner = Cleaner(svc, dry_run=dry_run, poll_seconds=poll)
    cleaner.runs([run_id])
    _report(cleaner, dry_run)


def gc(
    config: ConfigOpt = None,
    dry_run: DryRunOpt = False,
    rehearse: RehearseOpt = None,
    poll: PollSecondsOpt = 10.0,
) -> None:
    """Clean up every run whose process is gone but whose resources are not, and node pools
    named by tpu-trainer (tpt-<run>-...) that belong to no live run. Node pools still being
    created are waited for, then deleted; every run and sweep is tried before the exit code
    says whether anything is left. Runs whose process died before making anything are marked
    failed."""
    from tpu_trainer.launchers.cleanup import Cleaner

    setup, svc = _cleanup_setup(config, rehearse, dry_run)
    cleaner = Cleaner(svc, dry_run=dry_run, poll_seconds=poll)
    cleaner.gc(setup.config.cluster_name, setup.config.region)
    _report(cleaner, dry_run)


def _cleanup_services(config: Path | None, rehearse: Path | None, dry_run: bool) -> Services:
    return _cleanup_setup(config, rehearse, dry_run)[1]


def _cleanup_setup(
    config: Path | None, rehearse: Path | None, dry_run: bool
) -> tuple[Setup, Services]:
    """Services on the run store, or, when its file is damaged, on what is readable of it (in
    memory: the damaged file is only read)."""
    from tpu_trainer.cli.services_cli import open_store_for_cleanup

    store = open_store_for_cleanup(lambda m: typer.echo(m, err=True))
    return _services(config, rehearse, dry_run, store=store)


def _report(cleaner: Cleaner, dry_run: bool) -> None:
    result = cleaner.result
    for run_id, report in result.reports.items():
        typer.echo(f"run {run_id}: {report.summary()}")
        if report.extra_pools:
            typer.echo(
                f"  pools not made by tpu-trainer, left alone: {', '.join(report.extra_pools)}"
            )
        for line in report.handed_over + report.left:
            typer.echo(f"  {line}")
    for name in result.orphans_deleted:
        typer.echo(f"deleted orphan node pool {name}")
    for name in result.orphans_planned:
        typer.echo(f"dry run: would delete orphan node pool {name}")
    for run_id in result.marked_gone:
        typer.echo(f"run {run_id}: its process had ended without finishing; marked failed")
    if not result.reports and not result.orphans_deleted and not result.orphans_planned:
        typer.echo("nothing to clean up")
    if dry_run:
        typer.echo("dry run: nothing was deleted and the run store was not changed")
    left = result.left()
    if left:
        typer.echo(f"{len(left)} left (`tpu-trainer gc` retries):", err=True)
        for line in left:
            typer.echo(f"  {line}", err=True)
        raise typer.Exit(1)


def runs(as_json: JsonOpt = False, limit: Annotated[int, typer.Option("--limit")] = 50) -> None:
    """The runs in the store, newest first."""
    from tpu_trainer.cli.history_cmd import run_summary
    from tpu_trainer.cli.services_cli import open_store
    from tpu_trainer.store.db import LIVE_STATES

    store = open_store()
    store.mark_gone_runs()
    rows = store.runs(limit=limit)
    data = [
        {**run_summary(store, r), "live_resources": len(store.resources(r.id, states=LIVE_STATES))}
        for r in rows
    ]
    if as_json:
        typer.echo(json.dumps(data, indent=2, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"runs ({store.path})")
    columns = ("id", "created", "model", "device type", "precision", "status", "mode")
    for col in (*columns, "live resources", "cost (USD)", "goodput"):
        table.add_column(col)
    for d in data:
        table.add_row(
            str(d["id"]),
            str(d["created"]),
            str(d["model"]),
            str(d["device_type"]),
            str(d["precision"]),
            str(d["status"]),
            str(d["mode"]),
            str(d["live_resources"]),
            "—" if d["cost_usd"] is None else f"{d['cost_usd']:.2f}",
            "—" if d["goodput"] is None else f"{d['goodput']:.1%}",
        )
    Console().print(table)
