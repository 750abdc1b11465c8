"""Starting a run from the CLI: its id (made here, once), the services recording under it, the
TPU VM runs ``train``, ``grpo`` and ``hf`` share, and the last line every run prints."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from tpu_trainer.app.outcome import RunOutcome
    from tpu_trainer.app.services import Services
    from tpu_trainer.cli.services_cli import Setup
    from tpu_trainer.frameworks.vm_program import VmProgram
    from tpu_trainer.plan.plan import Plan
    from tpu_trainer.plan.slices import Slice


def run_services(setup: Setup, plan: Plan | None = None) -> tuple[str, Services]:
    """A new run's id and the services that record its commands under it; a recipe's run
    (``plan``) gets its estimate printed and recorded, before capacity is asked for."""
    from tpu_trainer.app.services import new_run_id

    run_id = new_run_id()
    services = setup.services.for_run(run_id)
    if plan is not None:
        from tpu_trainer.cli.estimate_cmd import announce_estimate

        announce_estimate(services.store, run_id, plan, setup.config, services.store.mode)
    return run_id, services


def run_on_tpu_vm(
    setup: Setup,
    program: VmProgram,
    slice_: Slice,
    model: str,
    label: str,
    zone: str | None,
    poll: float,
    *,
    plan: Plan | None = None,
    lang: str = "zh",
    retries: tuple[int, int] = (0, 0),
) -> RunOutcome:
    """``program`` on every worker of a TPU VM made for the run (zone: the configured one unless
    given); with a recipe's ``plan`` the run also gets its model README section. ``retries``:
    the preemptions it resumes after, and the transient errors it retries."""
    from tpu_trainer.app.watchdog_run import watchdog_settings
    from tpu_trainer.catalog.accelerators import Precision
    from tpu_trainer.launchers.tpu_vm.run import TpuVmRun
    from tpu_trainer.launchers.tpu_vm.spec import tpu_vm_spec

    run_id, services = run_services(setup, plan)
    vm = tpu_vm_spec(
        run_id=run_id,
        model=model,
        project=setup.config.project_id,
        zone=zone or setup.config.default_zone,
        slice=slice_,
    )
    run = TpuVmRun(
        services.store,
        services.runner,
        services.display,
        vm,
        program,
        label,
        model,
        plan.precision if plan else Precision.BF16,
        plan=plan,
        lang=lang,
        run_id=run_id,
        poll_seconds=poll,
        watchdog=watchdog_settings(
            services.store,
            model,
            slice_.device_type,
            k=setup.config.watchdog_k,
            first_step_deadline_s=setup.config.first_step_deadline,
        ),
        clock=services.clock,
        auto_resume=retries[0],
        error_retries=retries[1],
    )
    return run.start()


def finish(outcome: RunOutcome) -> None:
    """The run's last line; a run that did not succeed exits 1."""
    typer.echo(
        f"run {outcome.run_id}: {outcome.status.value}"
        + (f" ({outcome.error})" if outcome.error else "")
    )
    if outcome.status.value != "succeeded":
        raise typer.Exit(1)
