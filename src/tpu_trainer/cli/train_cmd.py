"""``tpu-trainer train``: the whole run on GKE through xpk (or a rehearsal on the fake cloud), or
on this machine's CPU (cpu-1 recipes, and any MaxText recipe scaled down)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli import plan_cmd
from tpu_trainer.cli.common import (
    Backend,
    BackendOpt,
    ConfigOpt,
    LangOpt,
    PrecisionOpt,
    RehearseOpt,
    RequestArg,
    ScaleDownOpt,
    SeqOpt,
    SubmitterOpt,
    TopologyOpt,
    VariantOpt,
)
from tpu_trainer.cli.run_cli import finish as _finish
from tpu_trainer.cli.run_cli import run_on_tpu_vm, run_services
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.report.model import ReportLang

if TYPE_CHECKING:
    from tpu_trainer.app.outcome import RunOutcome
    from tpu_trainer.cli.services_cli import Setup
    from tpu_trainer.plan.plan import Finding, Plan

WaitOpt = Annotated[
    int, typer.Option("--wait-timeout", help="Seconds to wait for the workload to finish.")
]
PollOpt = Annotated[float, typer.Option("--poll", help="Seconds between status polls.")]
DEFAULT_RESUMES = 3
"""What a bare ``--auto-resume`` (no number) allows."""
AutoResumeOpt = Annotated[
    int,
    typer.Option(
        "--auto-resume",
        min=0,
        help="Resume after up to N preemptions (GKE, TPU VM, KubeRay; a bare --auto-resume: "
        f"{DEFAULT_RESUMES}): the capacity is found again as the first time and MaxText "
        "restores its last durable checkpoint. Errors draw on --max-error-retries instead.",
    ),
]
ErrorRetriesOpt = Annotated[
    int,
    typer.Option(
        "--max-error-retries",
        min=0,
        help="Retry up to N errors the diagnosis marks transient (a connection reset, a TPU "
        "worker briefly unavailable) on new capacity, on a budget apart from preemptions; any "
        "other error never retries.",
    ),
]


def with_bare_auto_resume(args: list[str]) -> list[str]:
    """The command line with a bare ``--auto-resume`` (no number after it) made
    ``--auto-resume=3`` (:data:`DEFAULT_RESUMES`)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        after = args[i + 1] if i + 1 < len(args) else ""
        bare = arg == "--auto-resume" and not after.isdigit()
        out.append(f"--auto-resume={DEFAULT_RESUMES}" if bare else arg)
    return out


ScheduleOpt = Annotated[
    int,
    typer.Option(
        "--schedule-timeout",
        min=1,
        help="Seconds the pods may stay unscheduled (Kueue has not admitted the workload, or "
        "the scheduler cannot place a pod) before the run fails with the last reason given.",
    ),
]


def train(
    request: RequestArg,
    config: ConfigOpt = None,
    precision: PrecisionOpt = None,
    topology: TopologyOpt = None,
    seq: SeqOpt = None,
    variant: VariantOpt = None,
    submitter: SubmitterOpt = None,
    sets: plan_cmd.SetOpt = None,
    vars_: plan_cmd.VarOpt = None,
    no_profiler: plan_cmd.NoProfilerOpt = False,
    profiler_steps: plan_cmd.ProfilerStepsOpt = 3,
    profiler_skip: plan_cmd.ProfilerSkipOpt = 5,
    priority: plan_cmd.PriorityOpt = None,
    num_slices: plan_cmd.SlicesOpt = None,
    rehearse: RehearseOpt = None,
    wait_timeout: WaitOpt = 24 * 3600,
    schedule_timeout: ScheduleOpt = 1800,
    poll: PollOpt = 30.0,
    lang: LangOpt = ReportLang.ZH,
    backend: BackendOpt = None,
    scale_down: ScaleDownOpt = False,
    skip_checks: SkipChecksOpt = False,
    unset: plan_cmd.UnsetOpt = None,
    maxtext_version: plan_cmd.MaxTextVersionOpt = None,
    skip_check: plan_cmd.SkipCheckOpt = None,
    ray_image: RayImageOpt = None,
    report_to_recipe: ReportToRecipeOpt = False,
    auto_resume: AutoResumeOpt = 0,
    error_retries: ErrorRetriesOpt = 1,
) -> None:
    """Provision, submit, follow and always clean up one training run (or run it on this
    machine's CPU: cpu-1 recipes, or any MaxText recipe with --backend local --scale-down).

    The fast pre-flight checks (`tpu-trainer check --fast`) run first: a failure stops the run
    before any capacity is asked for, unless --skip-checks (or --skip-check NAME for one)."""
    from tpu_trainer.app.planning import Request, plan_request, plan_with_config
    from tpu_trainer.cli.services_cli import build
    from tpu_trainer.errors import InputError
    from tpu_trainer.launchers.gke.run import GkeRun
    from tpu_trainer.recipes.resolve import Filters

    options = plan_cmd.with_args(
        plan_cmd._options(
            sets, vars_, no_profiler, profiler_steps, profiler_skip, priority, num_slices, None
        ),
        unset,
        maxtext_version,
        skip_check,
    )
    req = Request(request, Filters(precision, topology, seq, variant, submitter), config)
    if rehearse is not None and (backend is Backend.LOCAL or scale_down):
        raise InputError(
            "--rehearse rehearses a run on GKE, a TPU VM or KubeRay; --backend local and "
            "--scale-down run here",
            fix="drop --rehearse to run on this machine, or drop --backend local/--scale-down",
        )
    if report_to_recipe and rehearse is None:
        raise InputError(
            "--report-to-recipe is for rehearsals: a real run's report always goes into the "
            "model's folder of the recipes tree",
            fix="drop --report-to-recipe, or add --rehearse SCENARIO.yaml",
        )
    if backend is Backend.KUBERAY and not ray_image:
        raise InputError(
            "--backend kuberay needs --ray-image (an image with Ray and MaxText), in a "
            "rehearsal too",
            fix="add --ray-image IMAGE",
        )
    if rehearse is None:
        local_plan = plan_request(req, replace(options, profiler=None))
        if choose_backend(local_plan, backend, scale_down=scale_down) is Backend.LOCAL:
            _train_locally(local_plan, req.text, lang, scale_down=scale_down)
            return
    setup = build(config, rehearse, fresh=True)
    plan = plan_with_config(req, setup.config, options)  # once: a zone change is plan.with_zone
    if not skip_checks:
        preflight_gate(plan, request)
    label = request + (f" --rehearse {rehearse}" if rehearse else "")
    path = (backend or Backend.GKE).launch_path
    if path is LaunchPath.TPU_VM:
        retries = (auto_resume, error_retries)
        vm_outcome = _train_on_tpu_vm(setup, plan, label, lang, poll, retries)
        if report_to_recipe:
            _report_to_recipe(vm_outcome.run_id, lang)
        _finish(vm_outcome)
        return
    if path is LaunchPath.KUBERAY:
        retries = (auto_resume, error_retries)
        ray_outcome = _train_on_kuberay(setup, plan, label, (lang, ray_image or ""), retries, poll)
        if report_to_recipe:
            _report_to_recipe(ray_outcome.run_id, lang)
        _finish(ray_outcome)
        return
    run_id, services = run_services(setup, plan)
    run = GkeRun(
        services,
        setup.config,
        plan,
        label,
        run_id=run_id,
        wait_timeout_s=wait_timeout,
        schedule_timeout_s=schedule_timeout,
        poll_seconds=poll,
        lang=lang,
        auto_resume=auto_resume,
        error_retries=error_retries,
    )
    outcome = run.start()
    if report_to_recipe:
        _report_to_recipe(outcome.run_id, lang)
    _finish(outcome)


def _report_to_recipe(run_id: str, lang: str) -> None:
    """Write a rehearsal's report into the recipes tree as well (marked as a rehearsal)."""
    from tpu_trainer.app.results import write_stored_report
    from tpu_trainer.cli.services_cli import open_store
    from tpu_trainer.errors import TpuTrainerError

    try:
        readme, plots, _, _ = write_stored_report(open_store(), run_id, lang, to_recipe=True)
    except TpuTrainerError as exc:
        typer.echo(f"report not written into the recipes tree: {exc.message} — {exc.fix}", err=True)
        return
    typer.echo(f"rehearsal report (marked as such) in {readme} (+{len(plots)} plots)")


ReportToRecipeOpt = Annotated[
    bool,
    typer.Option(
        "--report-to-recipe",
        help="With --rehearse: write the run's README report into the recipes tree too, marked "
        "as a rehearsal (by default it stays beside the run store).",
    ),
]
RayImageOpt = Annotated[
    str | None,
    typer.Option(
        "--ray-image",
        help="With --backend kuberay: the image with Ray and MaxText (needed with --rehearse "
        "too: the RayCluster names it, the scenario's `ray:` plays the job).",
    ),
]
SkipChecksOpt = Annotated[
    bool,
    typer.Option("--skip-checks", help="Submit even when a pre-flight check fails."),
]


def preflight_gate(plan: Plan, request: str) -> None:
    """Run the fast checks; stop before anything is created when one fails."""
    from tpu_trainer.checks.run import fast_findings
    from tpu_trainer.cli.check_cmd import render_checks
    from tpu_trainer.errors import TpuTrainerError

    report = fast_findings(plan)
    _warn_resumability(report.warned)
    if not report.failed:
        return
    from tpu_trainer.checks.run import CheckReport

    render_checks(CheckReport(report.failed, report.seconds), title="Failed pre-flight checks")
    names = ", ".join(f.name for f in report.failed)
    raise TpuTrainerError(
        f"{len(report.failed)} pre-flight check(s) failed ({names}); nothing was created",
        fix=f"apply the fixes above (all checks: `tpu-trainer check {request}`), "
        "or pass --skip-check NAME (one check) or --skip-checks (all) to submit anyway",
    )


def _warn_resumability(warned: Sequence[Finding]) -> None:
    """Say before any capacity is asked when the run could not continue after an interruption."""
    from tpu_trainer.checks.resumability import NAME
    from tpu_trainer.cli.console import RichDisplay

    display = RichDisplay()
    for finding in warned:
        if finding.name == NAME:
            display.warn(f"{finding.message} (fix: {finding.fix})")


def choose_backend(plan: Plan, requested: Backend | None, *, scale_down: bool) -> Backend:
    """Where ``train`` runs ``plan``: the requested backend, else local for cpu-1 recipes and
    GKE otherwise; combinations that cannot work are refused with the flag to change."""
    from tpu_trainer.catalog.accelerators import Family
    from tpu_trainer.errors import InputError
    from tpu_trainer.recipes.recipe import Framework

    device = plan.slice.device_type
    on_cpu = plan.slice.family is Family.CPU
    chosen = requested or (Backend.LOCAL if on_cpu else Backend.GKE)
    if scale_down and chosen is not Backend.LOCAL:
        raise InputError(
            "--scale-down runs a shrunk copy of the recipe on this machine's CPU, not on GKE",
            fix=f"add --backend local (or drop --scale-down to train on {device})",
        )
    if chosen is not Backend.LOCAL and on_cpu:
        raise InputError(
            f"{plan.model} is a {device} recipe: it runs on this machine, not on GKE",
            fix="drop --backend gke",
        )
    if scale_down and plan.recipe.framework is not Framework.MAXTEXT:
        raise InputError(
            f"--scale-down shrinks MaxText recipes; {plan.model} runs "
            f"{plan.recipe.framework.value}",
            fix="train it on TPUs (--backend gke), or pick a MaxText recipe",
        )
    if chosen is Backend.LOCAL and not on_cpu and not scale_down:
        raise InputError(
            f"{plan.model} is a {device} recipe: as written it does not fit this machine's CPU",
            fix="add --scale-down to smoke-test its arguments here with the model shrunk, "
            "or use --backend gke",
        )
    return chosen


def _train_on_tpu_vm(
    setup: Setup, plan: Plan, label: str, lang: str, poll: float, retries: tuple[int, int]
) -> RunOutcome:
    """The recipe's MaxText command on every worker of a TPU VM made for the run."""
    from tpu_trainer.frameworks.vm_program import maxtext_program

    zone = plan.value_of("ZONE") or None
    return run_on_tpu_vm(
        setup,
        maxtext_program(plan),
        plan.slice,
        plan.model,
        label,
        zone,
        poll,
        plan=plan,
        lang=lang,
        retries=retries,
    )


def _train_on_kuberay(
    setup: Setup,
    plan: Plan,
    label: str,
    lang_image: tuple[str, str],
    retries: tuple[int, int],
    poll: float,
) -> RunOutcome:
    """The recipe as a Ray Train job on a RayCluster made for the run (kubectl's context, or
    the rehearsal's cluster); ``retries``: the preemptions it resumes after, and the
    transient errors it retries."""
    from tpu_trainer.cli.kuberay_cli import KubeRayStart, run_on_kuberay

    run_id, services = run_services(setup, plan)
    lang, image = lang_image
    start = KubeRayStart(services, run_id, plan, label, image, lang, retries, poll)
    return run_on_kuberay(start, setup.rehearsal)


def _train_locally(plan: Plan, request: str, lang: str, *, scale_down: bool) -> None:
    """Train ``plan`` with the local launcher (scaled down first when asked)."""
    from tpu_trainer.app.services import new_run_id, recorder
    from tpu_trainer.cli.console import RichDisplay
    from tpu_trainer.cli.services_cli import open_store
    from tpu_trainer.infra.runner import SubprocessRunner
    from tpu_trainer.launchers.local.run import LocalRun, scaled_args

    scaled = scaled_args(plan) if scale_down else None
    label = request + (" --backend local --scale-down" if scale_down else "")
    store = open_store()
    run_id = new_run_id()
    runner = SubprocessRunner(recorder=recorder(store, run_id))
    run = LocalRun(
        store, runner, RichDisplay(), plan, label, lang=lang, scaled=scaled, run_id=run_id
    )
    _finish(run.start())
