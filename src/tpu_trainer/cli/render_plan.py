"""Rendering a plan for people (Rich tables).

Values come from recipes, flags and the configuration: they are printed as plain text (no
markup, no highlighting, which takes seconds on a long value), and a very long one is shortened
(``plan --json`` has every value whole). The columns that name things never wrap or shorten.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tpu_trainer.app.plan_json import plan_findings
from tpu_trainer.plan.plan import Finding, Level, Plan
from tpu_trainer.plan.scripts import submitted_argv

_STYLE = {Level.PASS: "green", Level.WARN: "yellow", Level.FAIL: "bold red"}
LONG = 300
"""Characters of one value shown before it is shortened."""
LONG_TEXT = 4000
"""Characters of a message, or of one word of the xpk command line, before it is shortened."""


def elide(text: str, limit: int = LONG) -> str:
    """``text``, or its start and its length when longer than ``limit``."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 40]}… ({len(text)} characters; `plan --json` shows it whole)"


def plain(text: str, style: str = "", limit: int = LONG) -> Text:
    """``text`` as it is: no markup, no highlighting, shortened when very long."""
    return Text(elide(text, limit), style=style)


def console_for(console: Console | None) -> Console:
    return console or Console(highlight=False)


def findings_table(findings: Sequence[Finding], title: str = "Checks") -> Table:
    """Checks as a table: name, status (coloured), message, fix."""
    table = Table(title=title, show_header=True)
    table.add_column("check", no_wrap=True, min_width=min(max(len(f.name) for f in findings), 30))
    table.add_column("status", no_wrap=True, min_width=6)
    table.add_column("message", overflow="fold", ratio=3)
    table.add_column("fix", overflow="fold", ratio=2)
    for f in findings:
        table.add_row(
            plain(f.name),
            plain(f.status.value, _STYLE[f.status]),
            plain(f.message, limit=LONG_TEXT),
            plain(f.fix, limit=LONG_TEXT),
        )
    return table


def slice_table(plan: Plan) -> Table:
    """The slice, one property a row: it fits any terminal width whole."""
    s = plan.slice
    key, value = s.configmap_entry(plan.num_slices)
    table = Table(title="Slice", show_header=False)
    table.add_column("property", no_wrap=True)
    table.add_column("value", overflow="fold")
    for name, text in (
        ("device type", s.device_type),
        ("number form", s.device_type_number),
        ("chips", str(s.chips)),
        ("JAX devices", str(s.jax_devices)),
        ("hosts", str(s.hosts)),
        ("slices", str(plan.num_slices)),
        ("machine type", plan.config.machine_type or s.machine_type),
        ("Kueue flavor", s.kueue_flavor(plan.num_slices)),
        ("quota", str(s.kueue_quota(plan.num_slices))),
        ("LocalQueue", plan.local_queue),
        ("configmap", f"{key}={value}"),
        ("workload policy", s.workload_policy or "-"),
    ):
        table.add_row(name, plain(text))
    return table


def values_table(plan: Plan) -> Table:
    table = Table(title="Values", show_header=True)
    table.add_column("variable", no_wrap=True)
    table.add_column("value", overflow="fold")
    table.add_column("from", overflow="fold")
    for v in plan.variables:
        value = plain(v.value) if v.value else Text("(unset)", style="red")
        table.add_row(plain(v.name), value, plain(v.source))
    return table


def render_plan(
    plan: Plan, console: Console | None = None, findings: Sequence[Finding] | None = None
) -> None:
    """Print the plan with its findings (default: :func:`plan_findings`)."""
    out = console_for(console)
    head = Text.assemble((plan.model, "bold"), f" from {elide(str(plan.recipe_script))}")
    out.print(head)
    out.print(
        Text.assemble(
            f"framework {plan.recipe.framework.value} ({elide(plan.recipe.entry.module)}), "
            f"precision {plan.precision.value}, workload ",
            (plan.workload_name, "bold"),
        )
    )
    out.print(slice_table(plan))
    out.print(values_table(plan))
    flags = " ".join(elide(f) for f in plan.xla_flags)
    out.print(Text.assemble(("XLA flags", "bold"), f" ({len(plan.xla_flags)}): {flags}"))
    args = " ".join(elide(shlex.quote(a)) for a in plan.program_arg_texts)
    out.print(Text.assemble((plan.args_variable, "bold"), f" ({len(plan.program_args)}): {args}"))
    for c in plan.arg_changes:
        before = c.before if c.before is not None else "(absent)"
        out.print(plain(f"  changed {c.key}: {elide(before)} -> {elide(c.after)} ({c.why})"))

    shown = plan_findings(plan) if findings is None else findings
    if shown:
        out.print(findings_table(shown))

    out.print(Text("Files it would write", style="bold"))
    for path in plan.files:
        out.print(plain(f"  {path}"))
    out.print(Text("Commands it would run", style="bold"))
    for path in plan.files:
        out.print(plain(f"  bash {path}"))
    argv = " ".join(elide(shlex.quote(a), LONG_TEXT) for a in submitted_argv(plan))
    out.print(Text("  " + argv), soft_wrap=True)
