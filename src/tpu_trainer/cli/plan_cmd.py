"""``tpu-trainer plan`` and ``tpu-trainer scripts``."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli.common import (
    ConfigOpt,
    JsonOpt,
    PrecisionOpt,
    RequestArg,
    SeqOpt,
    SubmitterOpt,
    TopologyOpt,
    VariantOpt,
)
from tpu_trainer.errors import InputError

if TYPE_CHECKING:
    from tpu_trainer.plan.plan import Plan, PlanOptions

SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Set a MaxText argument KEY=VALUE (replaces the recipe's)."),
]
UnsetOpt = Annotated[
    list[str] | None,
    typer.Option("--unset", help="Drop a recipe argument KEY (repeatable)."),
]
MaxTextVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--maxtext-version",
        help="MaxText version the image runs (release, branch, tag or commit): the checks judge "
        "the arguments against it (default: the configuration's maxtext_branch, else the "
        "recipe README's pin, else the runtime's).",
    ),
]
SkipCheckOpt = Annotated[
    list[str] | None,
    typer.Option("--skip-check", help="Leave out one check, by the name `check` prints."),
]
VarOpt = Annotated[
    list[str] | None,
    typer.Option("--var", help="Value for a recipe variable NAME=VALUE."),
]
NoProfilerOpt = Annotated[
    bool, typer.Option("--no-profiler", help="Do not add the profiler arguments.")
]
ProfilerStepsOpt = Annotated[int, typer.Option("--profiler-steps", min=1, help="profiler_steps.")]
ProfilerSkipOpt = Annotated[
    int, typer.Option("--profiler-skip", min=0, help="skip_first_n_steps_for_profiler.")
]
PriorityOpt = Annotated[
    str | None, typer.Option("--priority", help="xpk priority (default: the recipe's).")
]
SlicesOpt = Annotated[int | None, typer.Option("--num-slices", min=1, help="Number of slices.")]
ZoneOpt = Annotated[str | None, typer.Option("--zone", help="Zone to submit to.")]


def _pairs(items: list[str] | None, what: str) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise InputError(f"{what} `{item}` is not KEY=VALUE", fix=f"write {what} KEY=VALUE")
        out.append((key, value))
    return tuple(out)


def _options(
    sets: list[str] | None,
    vars_: list[str] | None,
    no_profiler: bool,
    profiler_steps: int,
    profiler_skip: int,
    priority: str | None,
    num_slices: int | None,
    zone: str | None,
) -> PlanOptions:
    from tpu_trainer.app.planning import current_user
    from tpu_trainer.plan.plan import PlanOptions, ProfilerSettings

    return PlanOptions(
        user=current_user(),
        now=datetime.now(),
        profiler=None
        if no_profiler
        else ProfilerSettings(steps=profiler_steps, skip_first=profiler_skip),
        overrides=_pairs(sets, "--set"),
        variables=_pairs(vars_, "--var"),
        priority=priority,
        num_slices=num_slices,
        zone=zone,
    )


def with_args(
    opts: PlanOptions,
    unset: list[str] | None,
    maxtext_version: str | None = None,
    skip: list[str] | None = None,
) -> PlanOptions:
    """``opts`` with ``--unset``, ``--maxtext-version`` and ``--skip-check``."""
    from tpu_trainer.plan.plan import CheckOptions

    checks = CheckOptions(maxtext_version, tuple(skip or ()))
    return replace(opts, unset=tuple(unset or ()), checks=checks)


def plan(
    request: RequestArg,
    config: ConfigOpt = None,
    precision: PrecisionOpt = None,
    topology: TopologyOpt = None,
    seq: SeqOpt = None,
    variant: VariantOpt = None,
    submitter: SubmitterOpt = None,
    sets: SetOpt = None,
    vars_: VarOpt = None,
    no_profiler: NoProfilerOpt = False,
    profiler_steps: ProfilerStepsOpt = 3,
    profiler_skip: ProfilerSkipOpt = 5,
    priority: PriorityOpt = None,
    num_slices: SlicesOpt = None,
    zone: ZoneOpt = None,
    unset: UnsetOpt = None,
    maxtext_version: MaxTextVersionOpt = None,
    skip_check: SkipCheckOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show what the tool would do for a recipe, offline: slice, names, values, files, commands."""
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.recipes.resolve import Filters

    p = plan_request(
        Request(request, Filters(precision, topology, seq, variant, submitter), config),
        with_args(
            _options(
                sets, vars_, no_profiler, profiler_steps, profiler_skip, priority, num_slices, zone
            ),
            unset,
            maxtext_version,
            skip_check,
        ),
    )
    from tpu_trainer.app.plan_json import plan_findings, plan_json

    findings = plan_findings(p)
    if as_json:
        typer.echo(json.dumps(plan_json(p, findings), indent=2))
        return
    from tpu_trainer.cli.render_plan import render_plan

    render_plan(p, findings=findings)


def scripts(
    request: RequestArg,
    config: ConfigOpt = None,
    precision: PrecisionOpt = None,
    topology: TopologyOpt = None,
    seq: SeqOpt = None,
    variant: VariantOpt = None,
    submitter: SubmitterOpt = None,
    sets: SetOpt = None,
    vars_: VarOpt = None,
    no_profiler: NoProfilerOpt = False,
    profiler_steps: ProfilerStepsOpt = 3,
    profiler_skip: ProfilerSkipOpt = 5,
    priority: PriorityOpt = None,
    num_slices: SlicesOpt = None,
    zone: ZoneOpt = None,
    unset: UnsetOpt = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace files not written by the tool.")
    ] = False,
) -> None:
    """Write setup_training_env.sh and submit_<model>.sh into the recipe folder."""
    from tpu_trainer.app.files import write_generated
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.plan.scripts import render_setup, render_submit
    from tpu_trainer.recipes.resolve import Filters

    p: Plan = plan_request(
        Request(
            request,
            Filters(precision, topology, seq, variant, submitter),
            config,
            require_config=True,
        ),
        with_args(
            _options(
                sets, vars_, no_profiler, profiler_steps, profiler_skip, priority, num_slices, zone
            ),
            unset,
        ),
    )
    setup_path, submit_path = p.files
    for path, text in ((setup_path, render_setup(p)), (submit_path, render_submit(p))):
        changed = write_generated(path, text, executable=True, force=force)
        typer.echo(f"{'wrote' if changed else 'unchanged'} {path}")
