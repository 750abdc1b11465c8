"""From a finished run's log to numbers in the store and a section in the model's README."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from tpu_trainer.app.stages import Stages
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.frameworks.maxtext.log_scan import scan_log
from tpu_trainer.metrics.lazy_rows import LazyRows
from tpu_trainer.metrics.ledger import report_figures, run_ledger
from tpu_trainer.metrics.stream import LONG_RUN_STEPS, LogTally
from tpu_trainer.metrics.summary import RunMetrics
from tpu_trainer.plan.plan import Plan
from tpu_trainer.recipes.resolve import report_dir
from tpu_trainer.report.downsample import (
    StepBucket,
    bucket_series,
    bucket_steps_by,
    nice_width,
)
from tpu_trainer.report.model import (
    Outcome,
    ReportLang,
    RunReport,
    steps_from_json,
    steps_to_json,
)
from tpu_trainer.report.readme import Lang
from tpu_trainer.store.db import RunMode, RunStatus, RunStore
from tpu_trainer.store.db import locks_dir as store_locks_dir


def _int_arg(plan: Plan, key: str) -> int | None:
    for text in plan.program_arg_texts:
        k, _, v = text.partition("=")
        if k == key and v.lstrip("-").isdigit():
            return int(v)
    return None


def metrics_from_log(log: Path, plan: Plan) -> RunMetrics:
    """Read ``log`` as a stream (steps into compact columns, nothing kept per line) and
    summarize it for the plan's slice, precision and profiler."""
    tally = LogTally()
    with log.open(encoding="utf-8", errors="replace") as f:
        scan_log(f, tally)
    has_profiler = any(
        t.startswith("profiler=") and t != "profiler=" for t in plan.program_arg_texts
    )
    return tally.summarize(
        slice=plan.slice,
        precision=plan.precision,
        profiler_skip=_int_arg(plan, "skip_first_n_steps_for_profiler") if has_profiler else None,
        profiler_steps=_int_arg(plan, "profiler_steps") if has_profiler else None,
    )


def stored_figures(metrics: RunMetrics) -> dict[str, Any]:
    """The figures kept with the run: a long run's per-step list stays in the steps table."""
    return metrics.to_json(steps=len(metrics.rows) <= LONG_RUN_STEPS)


def store_metrics(store: RunStore, run_id: str, metrics: RunMetrics) -> None:
    rows = metrics.rows
    if isinstance(rows, LazyRows):  # straight from the columns, no row objects
        store.record_step_values(rows.store_values(run_id))
    else:
        store.record_steps(run_id, rows)
    store.set_metrics(run_id, stored_figures(metrics))


REPORT_EDGE_STEPS = 5
"""A long run's README shows this many first and last steps as logged."""
README_ROWS = 50
"""At most this many per-N-steps rows in a long run's README table."""
CHART_BUCKETS = 1000
"""At most this many buckets (min/max/mean) in a long run's charts."""


def report_steps(metrics: RunMetrics) -> dict[str, Any]:
    """The steps a run's report holds: every one for a short run; a long run's first and last
    steps and its steps summarised per N steps (for the README) and per finer M (charts)."""
    rows = metrics.rows
    if len(rows) <= LONG_RUN_STEPS:
        return {"steps": tuple(rows), "steps_logged": len(rows)}
    span = rows[-1].step - rows[0].step + 1
    edge = REPORT_EDGE_STEPS
    widths = (nice_width(span, README_ROWS), nice_width(span, CHART_BUCKETS))
    if isinstance(rows, LazyRows):  # straight from the columns, no row objects
        readme, chart = bucket_series(*rows.series(), widths)
    else:
        readme, chart = bucket_steps_by(rows, widths)
    return {
        "steps": (*rows[:edge], *rows[-edge:]),
        "steps_logged": len(rows),
        "step_buckets": tuple(readme),
        "chart_buckets": tuple(chart),
    }


@dataclass(frozen=True, slots=True)
class Versions:
    framework: str = ""
    jax: str = ""
    libtpu: str = ""
    xpk: str = ""


def package_versions(paths: list[str]) -> dict[str, str]:
    """Installed distributions under ``paths`` (lower-cased name → version), read from their
    metadata without starting an interpreter."""
    from importlib.metadata import distributions

    return {d.metadata["Name"].lower(): d.version for d in distributions(path=paths)}


def run_report(
    metrics: RunMetrics, plan: Plan, run_id: str, day: date, versions: Versions = Versions()
) -> RunReport | None:
    """The README record of a run, or None when the run has no steady state to report."""
    if not metrics.has_steady_state or metrics.loss is None:
        return None
    notes = []
    if metrics.tokens_check is not None and metrics.tokens_check.mismatch:
        notes.append(metrics.tokens_check.message)
    return RunReport(
        run_id=run_id,
        date=day.isoformat(),
        model=plan.model,
        config_name=plan.folder.name if plan.folder else plan.recipe_script.parent.name,
        topology=plan.slice.topology_name,
        device_type=plan.slice.device_type,
        precision=plan.precision.value,
        chips=plan.slice.chips * plan.num_slices,
        steady_step_seconds=metrics.step_seconds or 0.0,
        steady_tflops_device=metrics.tflops_per_device or 0.0,
        steady_tflops_chip=metrics.tflops_per_chip or 0.0,
        steady_tokens_chip=metrics.tokens_per_chip or 0.0,
        steady_steps=metrics.steady_steps,
        loss_first=metrics.loss.first,
        loss_last=metrics.loss.last,
        final_loss=metrics.loss.last,
        note="; ".join(notes),
        **report_steps(metrics),
        framework="MaxDiffusion" if plan.recipe.framework.value == "maxdiffusion" else "MaxText",
        framework_version=versions.framework or (plan.config.maxtext_branch or ""),
        jax_version=versions.jax or (plan.config.jax_version or ""),
        libtpu_version=versions.libtpu or (plan.config.libtpu_version or ""),
        xpk_version=versions.xpk,
        hardware=plan.slice.accelerator.name,
    )


def model_folder(plan: Plan) -> Path | None:
    """The folder whose README.md keeps the model's runs (see ``recipes.resolve.report_dir``):
    the model's folder in a tpu-recipes layout, whatever the recipe's format. None for a lone
    ``run_recipe.sh`` outside them: then there is no model folder to write into."""
    return report_dir(plan.recipe_script, plan.folder, plan.model_dir)


_LAYOUTS = (
    "<model>/<seq>-<precision>-<device>/[xpk/]run_recipe.sh, or anything under "
    "training/<family>/<model>/"
)


def _run_folder(store: RunStore, run_id: str) -> Path:
    folder = store.path.parent / "runs" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def report_folder(
    store: RunStore, run_id: str, model_dir: Path | None, mode: RunMode, *, to_recipe: bool
) -> tuple[Path, str]:
    """Where a run's README report goes, and why when it is not the model's folder: a
    rehearsal's goes beside the run store (``runs/<run>/``) unless ``to_recipe``; so does the
    report of a recipe outside the tpu-recipes layout."""
    rehearsal = mode is RunMode.REHEARSAL
    if model_dir is None:
        if to_recipe:
            raise InputError(
                f"run {run_id}'s recipe is not in the tpu-recipes layout ({_LAYOUTS}): it has no "
                "model folder",
                fix=f"`tpu-trainer report {run_id}` writes it beside the run store",
            )
        return _run_folder(store, run_id), (
            f"the recipe is not in the tpu-recipes layout ({_LAYOUTS}), so it has no model folder"
        )
    if rehearsal and not to_recipe:
        return _run_folder(store, run_id), (
            "a rehearsal's report stays out of the recipes tree; "
            f"`tpu-trainer report {run_id} --to-recipe` writes it there, marked as a rehearsal"
        )
    return model_dir, ""


def report_lang(lang: str) -> Lang:
    """``lang`` checked: one of the README languages."""
    try:
        return "en" if ReportLang(lang) is ReportLang.EN else "zh"
    except ValueError:
        raise InputError(
            f"unknown README language {lang!r}",
            fix=f"use one of: {', '.join(ReportLang)}",
        ) from None


def write_report(
    report: RunReport,
    folder: Path,
    lang: str = "zh",
    lock_dir: Path | None = None,
    previous: RunReport | None = None,
) -> tuple[Path, list[Path], bool]:
    """Append ``report`` to ``folder/README.md`` (with its plots), or put it in place of
    ``previous`` (what the README was given for the same run before it was carried on);
    returns the README, the plots, and whether the README changed. Nothing is written when
    the README cannot be."""
    from tpu_trainer.report.plots import write_plots
    from tpu_trainer.report.readme import check_writable, update_readme

    readme = folder / "README.md"
    checked = report_lang(lang)
    check_writable(readme, report.run_id)
    try:
        plots = write_plots(report, folder)
    except OSError as exc:
        raise TpuTrainerError(
            f"cannot write the charts into {folder}: {exc.strerror or exc}",
            fix=f"make {folder} writable, then `tpu-trainer report {report.run_id}`",
        ) from exc
    changed = update_readme(
        readme, report, lang=checked, plots=plots, lock_dir=lock_dir, previous=previous
    )
    return readme, plots, changed


def report_to_json(report: RunReport, model_dir: Path | None) -> dict[str, Any]:
    """What ``tpu-trainer report RUN`` needs to write the README again later (the fields as
    they are: a long run's steady steps are not copied one by one)."""
    from dataclasses import fields

    return {
        **{f.name: getattr(report, f.name) for f in fields(report)},
        "steps": steps_to_json(report.steps),
        "step_buckets": [b.to_json() for b in report.step_buckets],
        "chart_buckets": [b.to_json() for b in report.chart_buckets],
        "model_dir": None if model_dir is None else str(model_dir),
    }


def report_from_json(data: Mapping[str, Any]) -> tuple[RunReport, Path | None]:
    """The report and model folder stored by :func:`report_to_json`."""
    fields: dict[str, Any] = dict(data)
    stored_dir = fields.pop("model_dir", None)
    steps = steps_from_json(fields.pop("steps", None) or ())
    for key in ("step_buckets", "chart_buckets"):
        fields[key] = tuple(StepBucket.from_json(b) for b in fields.get(key) or ())
    fields["steady_steps"] = tuple(fields.get("steady_steps") or ())
    fields["outcome"] = Outcome(fields.get("outcome") or Outcome.SUCCEEDED.value)
    model_dir = None if stored_dir is None else Path(str(stored_dir))
    return RunReport(**fields, steps=steps), model_dir


def outcome_of(status: RunStatus, error: str | None) -> Outcome:
    """How a run ended, for its README row."""
    if status is RunStatus.FAILED:
        timed_out = error is not None and TIMEOUT_MESSAGE in error
        return Outcome.TIMED_OUT if timed_out else Outcome.FAILED
    return {
        RunStatus.SUCCEEDED: Outcome.SUCCEEDED,
        RunStatus.CANCELLED: Outcome.CANCELLED,
        RunStatus.INTERRUPTED: Outcome.INTERRUPTED,
    }.get(status, Outcome.UNFINISHED)


TIMEOUT_MESSAGE = "did not finish within"
"""What the launchers say of a run stopped at its deadline."""


@dataclass(frozen=True, slots=True)
class Recorded:
    metrics: dict[str, Any]
    readme: Path | None


@dataclass(frozen=True, slots=True)
class Ending:
    """How a run ended, when the store does not say it yet (read from the store otherwise)."""

    status: RunStatus
    error: str | None = None


def record_results(
    stages: Stages,
    plan: Plan,
    log: Path,
    lang: str,
    versions: Versions | None = None,
    note: str = "",
    ending: Ending | None = None,
) -> Recorded | None:
    """The collect and report stages: metrics of ``log`` into the store, and, when there is a
    steady state, the run's row and section in the model's README (with plots). ``note`` goes
    before the report's own note (e.g. what a scaled-down run was). A run that did not
    succeed, or a rehearsal, is marked as such; a rehearsal's report stays out of the recipes
    tree. A README that cannot be written is reported, not raised: the metrics are stored."""
    if not log.exists():
        return None
    store, run_id, display = stages.store, stages.run_id, stages.display
    previous = _stored_report(store, run_id)
    stages.start("collect")
    metrics = metrics_from_log(log, plan)
    store_metrics(store, run_id, metrics)
    stages.done("collect", detail=f"{metrics.steps_completed} steps")
    report = run_report(metrics, plan, run_id, date.today(), versions or Versions())
    if report is None:
        display.info("no steady-state steps: nothing to add to the README")
        return Recorded(stored_figures(metrics), None)
    row = store.run(run_id)
    mode = row.mode if row is not None else store.mode
    if ending is None:
        ending = Ending(row.status, row.error) if row is not None else Ending(RunStatus.RUNNING)
    report = replace(
        report,
        note="; ".join(n for n in (note, report.note) if n),
        outcome=outcome_of(ending.status, ending.error),
        rehearsal=mode is RunMode.REHEARSAL,
    )
    if row is not None:
        report = replace(report, **report_figures(run_ledger(store, row, plan.config.prices)))
    stages.start("report")
    model_dir = model_folder(plan)
    figures = stored_figures(metrics)
    store.set_metrics(run_id, {**figures, "report": report_to_json(report, model_dir)})
    where = report_folder(store, run_id, model_dir, mode, to_recipe=False)
    readme = _write_or_warn(stages, report, where, lang, previous)
    return Recorded(figures, readme)


def _stored_report(store: RunStore, run_id: str) -> RunReport | None:
    """The report the run's README was given before (a run carried on), if any."""
    stored = (store.metrics(run_id) or {}).get("report")
    return report_from_json(stored)[0] if stored else None


def _write_or_warn(
    stages: Stages,
    report: RunReport,
    where: tuple[Path, str],
    lang: str,
    previous: RunReport | None = None,
) -> Path | None:
    folder, why = where
    if why:
        stages.display.info(f"report: {why}")
    try:
        readme, plots, changed = write_report(
            report, folder, lang, locks_dir(stages.store), previous
        )
    except TpuTrainerError as exc:
        stages.done("report", "failed", exc.message[:2000])
        stages.display.warn(f"README not written: {exc.message} — {exc.fix}")
        return None
    stages.done("report", detail=str(readme))
    stages.display.info(
        f"{'updated' if changed else 'already has this run:'} {readme} (+{len(plots)} plots)"
    )
    return readme


def locks_dir(store: RunStore) -> Path:
    """Where README locks are taken: beside the run store, never in the recipes tree."""
    return store_locks_dir(store.path)


def write_stored_report(
    store: RunStore, run_id: str, lang: str, *, to_recipe: bool
) -> tuple[Path, list[Path], bool, str]:
    """Write (again) the report stored with ``run_id``: the README, the plots, whether the
    README changed, and why it went where it did (``tpu-trainer report RUN``)."""
    row = store.run(run_id)
    if row is None:
        raise InputError(f"no run {run_id} in {store.path}", fix="see `tpu-trainer runs`")
    stored = (store.metrics(row.id) or {}).get("report")
    if not stored:
        raise InputError(
            f"run {row.id} has no report (no steady-state steps were recorded)",
            fix="`tpu-trainer show RUN` shows how far it got",
        )
    report, model_dir = report_from_json(stored)
    report = replace(report, rehearsal=row.mode is RunMode.REHEARSAL)
    folder, why = report_folder(store, row.id, model_dir, row.mode, to_recipe=to_recipe)
    readme, plots, changed = write_report(report, folder, lang, locks_dir(store))
    return readme, plots, changed, why
