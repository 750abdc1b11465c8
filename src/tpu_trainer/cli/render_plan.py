"""Rendering a plan for people (Rich tables)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tpu_trainer.plan.plan import Finding, Level, Plan
from tpu_trainer.plan.plan_json import plan_findings
from tpu_trainer.plan.scripts import submitted_argv

_STYLE = {Level.PASS: "green", Level.WARN: "yellow", Level.FAIL: "bold red"}


def findings_table(findings: Sequence[Finding], title: str = "Checks") -> Table:
    """Checks as a table: name, status (coloured), message, fix."""
    table = Table(title=title, show_header=True)
    for col in ("check", "status", "message", "fix"):
        table.add_column(col)
    for f in findings:
        table.add_row(
            escape(f.name),
            f"[{_STYLE[f.status]}]{f.status.value}[/]",
            escape(f.message),
            escape(f.fix),
        )
    return table


def render_plan(
    plan: Plan, console: Console | None = None, findings: Sequence[Finding] | None = None
) -> None:
    """Print the plan with its findings (default: :func:`plan_findings`)."""
    out = console or Console()
    s = plan.slice
    out.print(f"[bold]{plan.model}[/] from {plan.recipe_script}")
    out.print(
        f"framework {plan.recipe.framework.value} ({plan.recipe.entry.module}), "
        f"precision {plan.precision.value}, workload [bold]{plan.workload_name}[/]"
    )

    table = Table(title="Slice", show_header=True)
    for col in (
        "device type",
        "number form",
        "chips",
        "JAX devices",
        "hosts",
        "slices",
        "machine type",
        "Kueue flavor",
        "quota",
        "configmap",
        "workload policy",
    ):
        table.add_column(col)
    key, value = s.configmap_entry(plan.num_slices)
    table.add_row(
        s.device_type,
        s.device_type_number,
        str(s.chips),
        str(s.jax_devices),
        str(s.hosts),
        str(plan.num_slices),
        plan.config.machine_type or s.machine_type,
        s.kueue_flavor(plan.num_slices),
        str(s.kueue_quota(plan.num_slices)),
        f"{key}={value}",
        s.workload_policy or "-",
    )
    out.print(table)

    values = Table(title="Values", show_header=True)
    values.add_column("variable")
    values.add_column("value")
    values.add_column("from")
    for v in plan.variables:
        values.add_row(v.name, v.value or "[red](unset)[/]", v.source)
    out.print(values)

    out.print(f"[bold]XLA flags[/] ({len(plan.xla_flags)}): " + " ".join(plan.xla_flags))
    out.print(
        f"[bold]{plan.args_variable}[/] ({len(plan.program_args)}): "
        + " ".join(shlex.quote(a) for a in plan.program_arg_texts)
    )
    for c in plan.arg_changes:
        before = c.before if c.before is not None else "(absent)"
        out.print(f"  changed {c.key}: {before} -> {c.after} ({c.why})")

    shown = plan_findings(plan) if findings is None else findings
    if shown:
        out.print(findings_table(shown))

    out.print("[bold]Files it would write[/]")
    for path in plan.files:
        out.print(f"  {path}")
    out.print("[bold]Commands it would run[/]")
    for path in plan.files:
        out.print(f"  bash {path}")
    out.print(
        "  " + shlex.join(submitted_argv(plan)), soft_wrap=True, markup=False, highlight=False
    )
