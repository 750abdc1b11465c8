"""``tpu-trainer check``: what would waste TPU hours, found on this machine before submitting."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli import plan_cmd
from tpu_trainer.cli.common import (
    ConfigOpt,
    JsonOpt,
    PrecisionOpt,
    RequestArg,
    SeqOpt,
    TopologyOpt,
    VariantOpt,
)

if TYPE_CHECKING:
    from rich.console import Console

    from tpu_trainer.checks.run import CheckReport

AotOpt = Annotated[
    bool,
    typer.Option(
        "--aot",
        help="Also compile the train step for the target topology on this CPU (MaxText's "
        "train_compile) and report the memory it needs per device; cached.",
    ),
]
FastOpt = Annotated[
    bool,
    typer.Option(
        "--fast", help="Only the instant checks (no MaxText or JAX started in the runtime)."
    ),
]


def check(
    request: RequestArg,
    config: ConfigOpt = None,
    precision: PrecisionOpt = None,
    topology: TopologyOpt = None,
    seq: SeqOpt = None,
    variant: VariantOpt = None,
    sets: plan_cmd.SetOpt = None,
    vars_: plan_cmd.VarOpt = None,
    num_slices: plan_cmd.SlicesOpt = None,
    zone: plan_cmd.ZoneOpt = None,
    unset: plan_cmd.UnsetOpt = None,
    maxtext_version: plan_cmd.MaxTextVersionOpt = None,
    skip_check: plan_cmd.SkipCheckOpt = None,
    aot: AotOpt = False,
    fast: FastOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Check a recipe before asking for capacity: MaxText configuration, mesh, sharding, memory
    fit, data, recipe sanity. Exits 1 when a check fails."""
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.checks.run import CheckReport, fast_findings, runtime_findings
    from tpu_trainer.recipes.resolve import Filters

    plan = plan_request(
        Request(request, Filters(precision, topology, seq, variant), config),
        plan_cmd.with_args(
            plan_cmd._options(sets, vars_, True, 3, 5, None, num_slices, zone),
            unset,
            maxtext_version,
            skip_check,
        ),
    )
    report = fast_findings(plan)
    if not fast:
        from tpu_trainer.infra.runner import SubprocessRunner
        from tpu_trainer.runtime.manager import MAXTEXT, is_installed

        if is_installed(MAXTEXT) or aot:
            extra = runtime_findings(plan, SubprocessRunner(), aot=aot)
            report = CheckReport(
                report.findings + extra.findings, {**report.seconds, **extra.seconds}
            )
        else:
            from tpu_trainer.plan.plan import Finding, Level

            report = CheckReport(
                (
                    *report.findings,
                    Finding(
                        "runtime-checks",
                        Level.WARN,
                        f"the {MAXTEXT.key} runtime is not installed: MaxText's own "
                        "configuration check and JAX's mesh mapping were not run",
                        fix="`tpu-trainer runtime install maxtext` (once, ~8 min), then check again",
                    ),
                ),
                report.seconds,
            )
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        render_checks(report)
    if report.failed:
        raise typer.Exit(1)


def render_checks(
    report: CheckReport, console: Console | None = None, title: str = "Checks"
) -> None:
    from tpu_trainer.cli.render_plan import console_for, findings_table

    out = console_for(console)
    out.print(findings_table(report.findings, title))
    failed, warned = len(report.failed), len(report.warned)
    total = sum(report.seconds.values())
    out.print(
        f"{len(report.findings)} checks: {failed} failed, {warned} warnings ({total:.2f} s)",
        style="bold red" if failed else "bold green",
    )
