"""``tpu-trainer estimate``: a run's expected wall time and cost, before anything is created;
and the estimate ``train`` prints and records before it asks for capacity."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

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
    from tpu_trainer.config.model import Config
    from tpu_trainer.metrics.estimate import Estimate, Target
    from tpu_trainer.plan.plan import Plan
    from tpu_trainer.store.db import RunMode, RunStore


def estimate(
    request: RequestArg,
    config: ConfigOpt = None,
    precision: PrecisionOpt = None,
    topology: TopologyOpt = None,
    seq: SeqOpt = None,
    variant: VariantOpt = None,
    sets: plan_cmd.SetOpt = None,
    vars_: plan_cmd.VarOpt = None,
    num_slices: plan_cmd.SlicesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Expected wall time, chip-hours and cost of a run, from this model's history in the run
    store, else a published step-time table; overheads measured on this cluster, else defaults.
    Nothing is created."""
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.cli.services_cli import open_store
    from tpu_trainer.metrics.estimate import estimate as compute
    from tpu_trainer.recipes.resolve import Filters

    plan = plan_request(
        Request(request, Filters(precision, topology, seq, variant), config),
        plan_cmd._options(sets, vars_, False, 3, 5, None, num_slices, None),
    )
    found = compute(open_store(), target_of(plan), plan.config.prices)
    if as_json:
        typer.echo(json.dumps(found.to_json(), indent=2))
        return
    for line in estimate_lines(found, plan):
        typer.echo(line)


def target_of(plan: Plan) -> Target:
    """What the plan would run, as the estimate needs it."""
    from tpu_trainer.app.ending import steps_of
    from tpu_trainer.metrics.estimate import Target

    seq: int | None = None
    for text in plan.program_arg_texts:
        key, eq, value = plan.expand(text).partition("=")
        if eq and key == "max_target_length" and value.isdigit():
            seq = int(value)
    return Target(
        model=plan.model,
        device_type=plan.slice.device_type,
        precision=plan.precision.value,
        family=plan.slice.family,
        chips=plan.slice.chips * plan.num_slices,
        steps=steps_of(plan),
        seq=seq,
        region=plan.config.region or None,
        cluster=plan.config.cluster_name or None,
    )


def estimate_lines(found: Estimate, plan: Plan) -> list[str]:
    """The estimate in a few lines, each figure with where it came from."""
    step = found.step
    lines = [
        f"estimate for {plan.model} on {plan.slice.device_type} x{plan.num_slices} "
        f"({plan.precision.value}), {found.steps if found.steps is not None else '?'} steps:",
        "  step time: "
        + ("unknown" if step.seconds is None else f"{step.seconds:.2f} s")
        + f" — {step.source}",
    ]
    lines += [
        f"  {name}: {figure.seconds or 0:.0f} s — {figure.source}"
        for name, figure in found.overheads.items()
    ]
    if found.wall_seconds is None:
        lines.append("  wall time and cost: unknown (no step time, or the recipe sets no steps)")
        return lines
    cost = "unknown" if found.cost is None else f"${found.cost:,.2f}"
    lines.append(
        f"  wall {found.wall_seconds / 3600:.2f} h, {found.chip_hours or 0:,.2f} chip-hours, "
        f"cost {cost} ({found.price_source})"
    )
    return lines


def announce_estimate(
    store: RunStore, run_id: str, plan: Plan, config: Config, mode: RunMode
) -> None:
    """Print the run's estimate and record it for ``show``, before capacity is asked for."""
    from tpu_trainer.metrics.estimate import estimate as compute

    found = compute(store, target_of(plan), config.prices, mode)
    for line in estimate_lines(found, plan):
        typer.echo(line)
    store.record_estimate(run_id, found.to_json())
