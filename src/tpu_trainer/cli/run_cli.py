"""Starting a run from the CLI: its id (made here, once), the services recording under it, the
TPU VM runs ``train``, ``grpo`` and ``hf`` share, and the last line every run prints."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from tpu_trainer.app.outcome import RunOutcome
    from tpu_trainer.app.services import Services
    from tpu_trainer.cli.services_cli import Setup
    from tpu_trainer.frameworks.vm_program import VmProgram
    from tpu_trainer.launchers.tpu_vm.run import TpuVmRun
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
    run_id, services = run_services(setup, plan)
    vm = VmRunSpec(program, slice_, model, label, zone or setup.config.default_zone)
    return tpu_vm_run(setup, services, run_id, vm, poll, plan, lang, retries).start()


@dataclass(frozen=True, slots=True)
class VmRunSpec:
    """What runs on a TPU VM, and where."""

    program: VmProgram
    slice: Slice
    model: str
    label: str
    zone: str


def tpu_vm_run(
    setup: Setup,
    services: Services,
    run_id: str,
    spec: VmRunSpec,
    poll: float,
    plan: Plan | None,
    lang: str,
    retries: tuple[int, int],
) -> TpuVmRun:
    """The TPU VM launcher for run ``run_id`` (a new run, or one ``resume`` carries on)."""
    from tpu_trainer.app.watchdog_run import watchdog_settings
    from tpu_trainer.catalog.accelerators import Precision
    from tpu_trainer.launchers.tpu_vm.run import TpuVmRun
    from tpu_trainer.launchers.tpu_vm.spec import tpu_vm_spec

    vm = tpu_vm_spec(
        run_id=run_id,
        model=spec.model,
        project=setup.config.project_id,
        zone=spec.zone,
        slice=spec.slice,
    )
    return TpuVmRun(
        services.store,
        services.runner,
        services.display,
        vm,
        spec.program,
        spec.label,
        spec.model,
        plan.precision if plan else Precision.BF16,
        plan=plan,
        lang=lang,
        run_id=run_id,
        poll_seconds=poll,
        watchdog=watchdog_settings(
            services.store,
            spec.model,
            spec.slice.device_type,
            k=setup.config.watchdog_k,
            first_step_deadline_s=setup.config.first_step_deadline,
        ),
        clock=services.clock,
        auto_resume=retries[0],
        error_retries=retries[1],
    )


def finish(outcome: RunOutcome) -> None:
    """The run's last line; a run that did not succeed exits 1."""
    typer.echo(
        f"run {outcome.run_id}: {outcome.status.value}"
        + (f" ({outcome.error})" if outcome.error else "")
    )
    if outcome.status.value != "succeeded":
        raise typer.Exit(1)
