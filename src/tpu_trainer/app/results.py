"""From a finished run's log to numbers in the store and a section in the model's README."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from tpu_trainer.app.stages import Stages
from tpu_trainer.frameworks.maxtext_log import read_log
from tpu_trainer.plan.metrics import RunMetrics, summarize
from tpu_trainer.plan.plan import Plan
from tpu_trainer.report.model import RunReport, StepRow
from tpu_trainer.store.db import RunStore


def _int_arg(plan: Plan, key: str) -> int | None:
    for text in plan.program_arg_texts:
        k, _, v = text.partition("=")
        if k == key and v.lstrip("-").isdigit():
            return int(v)
    return None


def metrics_from_log(log: Path, plan: Plan) -> RunMetrics:
    """Parse ``log`` (streamed) and summarize it for the plan's slice, precision and profiler."""
    with log.open(encoding="utf-8", errors="replace") as f:
        parsed = read_log(f)
    has_profiler = any(
        t.startswith("profiler=") and t != "profiler=" for t in plan.program_arg_texts
    )
    return summarize(
        parsed.steps,
        slice=plan.slice,
        precision=plan.precision,
        profiler_skip=_int_arg(plan, "skip_first_n_steps_for_profiler") if has_profiler else None,
        profiler_steps=_int_arg(plan, "profiler_steps") if has_profiler else None,
        hidden_steps=parsed.hidden_steps,
        startup=parsed.startup,
    )


def store_metrics(store: RunStore, run_id: str, metrics: RunMetrics) -> None:
    store.record_steps(
        run_id,
        [
            {
                "step": r.step,
                "seconds": r.seconds,
                "tflops_device": r.tflops_per_device,
                "tokens_device": r.tokens_per_device,
                "total_weights": r.total_weights,
                "loss": r.loss,
                "excluded": r.excluded,
            }
            for r in metrics.rows
        ],
    )
    store.set_metrics(run_id, metrics.to_json())


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
    rows = tuple(
        StepRow(
            step=r.step,
            seconds=r.seconds,
            tflops_device=r.tflops_per_device or 0.0,
            tflops_chip=r.tflops_per_chip or 0.0,
            tokens_chip=r.tokens_per_chip or 0.0,
            loss=r.loss if r.loss is not None else float("nan"),
        )
        for r in metrics.rows
    )
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
        steps=rows,
        framework="MaxDiffusion" if plan.recipe.framework.value == "maxdiffusion" else "MaxText",
        framework_version=versions.framework or (plan.config.maxtext_branch or ""),
        jax_version=versions.jax or (plan.config.jax_version or ""),
        libtpu_version=versions.libtpu or (plan.config.libtpu_version or ""),
        xpk_version=versions.xpk,
        hardware=plan.slice.accelerator.name,
    )


def write_report(
    report: RunReport, model_dir: Path, lang: str = "zh"
) -> tuple[Path, list[Path], bool]:
    """Append ``report`` to ``model_dir/README.md`` (with its plots); returns the README, the
    plots, and whether the README changed."""
    from tpu_trainer.report.plots import write_plots
    from tpu_trainer.report.readme import update_readme

    readme = model_dir / "README.md"
    plots = write_plots(report, model_dir)
    changed = update_readme(readme, report, lang="en" if lang == "en" else "zh", plots=plots)
    return readme, plots, changed


def report_to_json(report: RunReport, model_dir: Path) -> dict[str, Any]:
    """What ``tpu-trainer report RUN`` needs to write the README again later."""
    from dataclasses import asdict

    return {**asdict(report), "model_dir": str(model_dir)}


def report_from_json(data: Mapping[str, Any]) -> tuple[RunReport, Path]:
    """The report and model folder stored by :func:`report_to_json`."""
    fields: dict[str, Any] = dict(data)
    model_dir = Path(str(fields.pop("model_dir")))
    steps = tuple(StepRow(**s) for s in fields.pop("steps", None) or ())
    fields["steady_steps"] = tuple(fields.get("steady_steps") or ())
    return RunReport(**fields, steps=steps), model_dir


@dataclass(frozen=True, slots=True)
class Recorded:
    metrics: dict[str, Any]
    readme: Path | None


def record_results(
    stages: Stages,
    plan: Plan,
    log: Path,
    lang: str,
    versions: Versions | None = None,
    note: str = "",
) -> Recorded | None:
    """The collect and report stages: metrics of ``log`` into the store, and, when there is a
    steady state, the run's row and section in the model's README (with plots). ``note`` goes
    before the report's own note (e.g. what a scaled-down run was)."""
    if not log.exists():
        return None
    store, run_id, display = stages.store, stages.run_id, stages.display
    stages.start("collect")
    metrics = metrics_from_log(log, plan)
    store_metrics(store, run_id, metrics)
    stages.done("collect", detail=f"{metrics.steps_completed} steps")
    report = run_report(metrics, plan, run_id, date.today(), versions or Versions())
    if report is None:
        display.info("no steady-state steps: nothing to add to the README")
        return Recorded(metrics.to_json(), None)
    if note:
        report = replace(report, note="; ".join(n for n in (note, report.note) if n))
    stages.start("report")
    store.set_metrics(
        run_id, {**metrics.to_json(), "report": report_to_json(report, plan.model_dir)}
    )
    readme, plots, changed = write_report(report, plan.model_dir, lang)
    stages.done("report", detail=str(readme))
    display.info(
        f"{'updated' if changed else 'already has this run:'} {readme} (+{len(plots)} plots)"
    )
    return Recorded(metrics.to_json(), readme)
