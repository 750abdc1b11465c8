"""``tpu-trainer resume RUN``: carry on a run whose process died, or that ended interrupted,
on GKE (follow its workload again, or a new segment on new capacity), on a TPU VM (follow its
program again, or a new segment on its VM or on one made again) or on KubeRay (follow its Ray
job again, or a new segment on a RayCluster made again); MaxText restores its last durable
checkpoint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli.common import ConfigOpt, LangOpt, RehearseOpt
from tpu_trainer.cli.run_cli import finish
from tpu_trainer.cli.train_cmd import AutoResumeOpt, ErrorRetriesOpt, PollOpt, WaitOpt
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.report.model import ReportLang

if TYPE_CHECKING:
    from tpu_trainer.app.outcome import RunOutcome
    from tpu_trainer.cli.services_cli import Setup
    from tpu_trainer.config.model import Config
    from tpu_trainer.plan.plan import Plan
    from tpu_trainer.store.db import RunRow

RESUMABLE = (LaunchPath.XPK, LaunchPath.TPU_VM, LaunchPath.KUBERAY)


def resume(
    run_id: Annotated[
        str, typer.Argument(help="A run whose process died, or that was interrupted.")
    ],
    config: ConfigOpt = None,
    rehearse: RehearseOpt = None,
    wait_timeout: WaitOpt = 24 * 3600,
    poll: PollOpt = 30.0,
    lang: LangOpt = ReportLang.ZH,
    auto_resume: AutoResumeOpt = 0,
    error_retries: ErrorRetriesOpt = 1,
) -> None:
    """Carry on a run whose process died, or that ended interrupted (preempted), then collect,
    report and clean up as usual. GKE: follow its workload again, or a new segment on new
    capacity. TPU VM: while its VM is READY and the program it started still runs (or has ended)
    there, follow that program again in the same segment; else a new segment on the run's VM
    while it is READY, or on a VM made again. KubeRay: while its RayCluster's head is ready and
    Ray has the job, follow it again; else a new segment on a RayCluster made again. MaxText
    restores its last durable checkpoint."""
    from tpu_trainer.cli.services_cli import build
    from tpu_trainer.errors import InputError
    from tpu_trainer.launchers.gke.run import GkeRun

    setup = build(config, rehearse)
    row = setup.services.store.run(run_id)
    stored = setup.services.store.plan_of(run_id) if row else None
    if row is None or not stored:
        raise InputError(f"no run {run_id} with a stored plan", fix="see `tpu-trainer runs`")
    if row.launcher not in RESUMABLE:
        raise InputError(
            f"run {run_id} ran on {row.launcher}: `resume` carries on GKE, TPU VM and KubeRay runs",
            fix="train it again",
        )
    plan = stored_plan(setup.config, stored)
    retries = (auto_resume, error_retries)
    if row.launcher is LaunchPath.TPU_VM:
        finish(_resume_on_tpu_vm(setup, row, stored, plan, poll, lang, retries))
        return
    if row.launcher is LaunchPath.KUBERAY:
        finish(_resume_on_kuberay(setup, row, plan, lang, retries, poll))
        return
    run = GkeRun(
        setup.services,
        setup.config,
        plan,
        row.request,
        wait_timeout_s=wait_timeout,
        poll_seconds=poll,
        lang=lang,
        run_id=run_id,
        auto_resume=auto_resume,
        error_retries=error_retries,
    )
    finish(run.resume())


def stored_plan(config: Config, stored: Mapping[str, object]) -> Plan:
    """The run's plan made again from its recipe, with the arguments and slices it ran with
    and its workload name (MaxText's ``run_name``, so MaxText restores its checkpoints)."""
    from datetime import datetime

    from tpu_trainer.app.planning import Request, current_user, plan_with_config
    from tpu_trainer.plan.plan import PlanOptions

    name = stored.get("workload_name")
    opts = PlanOptions(
        user=current_user(),
        now=datetime.now(),
        num_slices=stored_num_slices(stored),
        overrides=stored_overrides(stored),
        workload_name=name if isinstance(name, str) and name else None,
    )
    return plan_with_config(Request(str(stored["recipe"])), config, opts)


def _resume_on_tpu_vm(
    setup: Setup,
    row: RunRow,
    stored: Mapping[str, object],
    plan: Plan,
    poll: float,
    lang: str,
    retries: tuple[int, int],
) -> RunOutcome:
    """A TPU VM run's next segment, in the zone its VM was in."""
    from tpu_trainer.cli.run_cli import VmRunSpec, tpu_vm_run
    from tpu_trainer.errors import InputError
    from tpu_trainer.frameworks.vm_program import maxtext_program

    vm = stored.get("tpu_vm")
    zone = vm.get("zone") if isinstance(vm, Mapping) else None
    if not isinstance(zone, str) or stored.get("program") is None:
        raise InputError(
            f"run {row.id} has no stored TPU VM plan", fix="train it again with --backend tpu-vm"
        )
    spec = VmRunSpec(maxtext_program(plan), plan.slice, plan.model, row.request, zone)
    services = setup.services.for_run(row.id)
    return tpu_vm_run(setup, services, row.id, spec, poll, plan, lang, retries).resume()


def _resume_on_kuberay(
    setup: Setup, row: RunRow, plan: Plan, lang: str, retries: tuple[int, int], poll: float
) -> RunOutcome:
    """A KubeRay run's job followed again, or its next segment, with the image its RayCluster
    was made with (kept in the run's ``raycluster.yaml``)."""
    from tpu_trainer.cli.kuberay_cli import KubeRayStart, run_on_kuberay
    from tpu_trainer.errors import InputError
    from tpu_trainer.launchers.kuberay.manifests import image_of

    services = setup.services.for_run(row.id)
    kept = services.store.path.parent / "runs" / row.id / "raycluster.yaml"
    image = image_of(kept.read_text(encoding="utf-8")) if kept.is_file() else None
    if image is None:
        raise InputError(
            f"run {row.id} has no RayCluster manifest with an image ({kept})",
            fix="train it again with --backend kuberay --ray-image IMAGE",
        )
    start = KubeRayStart(services, row.id, plan, row.request, image, lang, retries, poll)
    return run_on_kuberay(start, setup.rehearsal, resume=True)


def stored_num_slices(stored: Mapping[str, object]) -> int | None:
    """The number of slices a stored plan ran on (a resumed run follows all of them)."""
    slice_ = stored.get("slice")
    value = slice_.get("num_slices") if isinstance(slice_, Mapping) else None
    return value if isinstance(value, int) and value > 0 else None


def stored_overrides(stored: Mapping[str, object]) -> tuple[tuple[str, str], ...]:
    """The ``--set KEY=VALUE`` a stored plan was made with: a new segment of the run runs
    MaxText with the same arguments."""
    changes = stored.get("arg_changes")
    if not isinstance(changes, list):
        return ()
    return tuple(
        (str(c["key"]), str(c["after"]))
        for c in changes
        if isinstance(c, Mapping) and c.get("why") == "--set" and c.get("after") is not None
    )
