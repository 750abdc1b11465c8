"""``tpu-trainer train``: the whole run on GKE through xpk (or a rehearsal on the fake cloud)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli import plan_cmd
from tpu_trainer.cli.common import (
    ConfigOpt,
    PrecisionOpt,
    RehearseOpt,
    RequestArg,
    SeqOpt,
    TopologyOpt,
    VariantOpt,
)

if TYPE_CHECKING:
    from tpu_trainer.app.gke_run import RunOutcome
    from tpu_trainer.app.planning import Request
    from tpu_trainer.plan.plan import PlanOptions

WaitOpt = Annotated[
    int, typer.Option("--wait-timeout", help="Seconds to wait for the workload to finish.")
]
PollOpt = Annotated[float, typer.Option("--poll", help="Seconds between status polls.")]


def train(
    request: RequestArg,
    config: ConfigOpt = None,
    precision: PrecisionOpt = None,
    topology: TopologyOpt = None,
    seq: SeqOpt = None,
    variant: VariantOpt = None,
    sets: plan_cmd.SetOpt = None,
    vars_: plan_cmd.VarOpt = None,
    no_profiler: plan_cmd.NoProfilerOpt = False,
    profiler_steps: plan_cmd.ProfilerStepsOpt = 3,
    profiler_skip: plan_cmd.ProfilerSkipOpt = 5,
    priority: plan_cmd.PriorityOpt = None,
    num_slices: plan_cmd.SlicesOpt = None,
    rehearse: RehearseOpt = None,
    wait_timeout: WaitOpt = 24 * 3600,
    poll: PollOpt = 30.0,
    lang: Annotated[str, typer.Option("--lang", help="README headings: zh (seed) or en.")] = "zh",
) -> None:
    """Provision, submit, follow and always clean up one training run."""
    from tpu_trainer.app.gke_run import GkeRun
    from tpu_trainer.app.planning import Request, plan_with_config
    from tpu_trainer.app.resolve import Filters
    from tpu_trainer.cli.services_cli import build
    from tpu_trainer.plan.plan import Plan

    options = plan_cmd._options(
        sets, vars_, no_profiler, profiler_steps, profiler_skip, priority, num_slices, None
    )
    req = Request(request, Filters(precision, topology, seq, variant), config)
    if rehearse is None and _train_locally(req, options, lang):
        return
    setup = build(config, rehearse, fresh=True)

    def plan_for_zone(zone: str | None) -> Plan:
        return plan_with_config(req, setup.config, replace(options, zone=zone) if zone else options)

    label = request + (f" --rehearse {rehearse}" if rehearse else "")
    run = GkeRun(
        setup.services,
        setup.config,
        plan_for_zone,
        label,
        wait_timeout_s=wait_timeout,
        poll_seconds=poll,
        lang=lang,
    )
    _finish(run.start())


def _finish(outcome: RunOutcome) -> None:
    typer.echo(
        f"run {outcome.run_id}: {outcome.status.value}"
        + (f" ({outcome.error})" if outcome.error else "")
    )
    if outcome.status.value != "succeeded":
        raise typer.Exit(1)


def _train_locally(req: Request, options: PlanOptions, lang: str) -> bool:
    """Recipes for this machine's CPU (device type ``cpu-1``) run with the local launcher."""
    from tpu_trainer.app.local_run import LocalRun
    from tpu_trainer.app.planning import plan_request
    from tpu_trainer.catalog.accelerators import Family
    from tpu_trainer.cli.console import RichDisplay
    from tpu_trainer.cli.services_cli import open_store
    from tpu_trainer.infra.runner import SubprocessRunner

    plan = plan_request(req, replace(options, profiler=None))
    if plan.slice.family is not Family.CPU:
        return False
    store = open_store()
    display = RichDisplay()
    run_id_box: list[str] = []
    runner = SubprocessRunner(
        recorder=lambda r: store.record_command(run_id_box[0] if run_id_box else None, r)
    )
    run = LocalRun(store, runner, display, plan, req.text, lang=lang)
    run_id_box.append(run.run_id)
    _finish(run.start())
    return True


def resume(
    run_id: Annotated[str, typer.Argument(help="A run whose process died after submitting.")],
    config: ConfigOpt = None,
    rehearse: RehearseOpt = None,
    wait_timeout: WaitOpt = 24 * 3600,
    poll: PollOpt = 30.0,
    lang: Annotated[str, typer.Option("--lang", help="README headings: zh (seed) or en.")] = "zh",
) -> None:
    """Follow a crashed run's workload again, then collect, report and clean up as usual."""
    from datetime import datetime

    from tpu_trainer.app.gke_run import GkeRun
    from tpu_trainer.app.planning import Request, current_user, plan_with_config
    from tpu_trainer.cli.services_cli import build
    from tpu_trainer.errors import InputError
    from tpu_trainer.plan.plan import Plan, PlanOptions

    setup = build(config, rehearse)
    row = setup.services.store.run(run_id)
    stored = setup.services.store.plan_of(run_id) if row else None
    if row is None or not stored:
        raise InputError(f"no run {run_id} with a stored plan", fix="see `tpu-trainer runs`")
    recipe = str(stored["recipe"])

    def plan_for_zone(zone: str | None) -> Plan:
        opts = PlanOptions(user=current_user(), now=datetime.now(), zone=zone)
        return plan_with_config(Request(recipe), setup.config, opts)

    run = GkeRun(
        setup.services,
        setup.config,
        plan_for_zone,
        row.request,
        wait_timeout_s=wait_timeout,
        poll_seconds=poll,
        lang=lang,
        run_id=run_id,
    )
    outcome = run.resume()
    typer.echo(
        f"run {outcome.run_id}: {outcome.status.value}"
        + (f" ({outcome.error})" if outcome.error else "")
    )
    if outcome.status.value != "succeeded":
        raise typer.Exit(1)
