"""The README figures once the run is over: a run's goodput, cost and chip-hours are written
into its README row and section when its report stage ends, before the teardown; once the
teardown has ended they are worked out again from the whole timeline and put in their place,
so the time spent giving the TPUs back is counted."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from tpu_trainer.app.results import (
    locks_dir,
    report_folder,
    report_from_json,
    report_to_json,
)
from tpu_trainer.config.prices import ChipPrice
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.metrics.ledger import report_figures, run_ledger
from tpu_trainer.report.readme import refresh_figures
from tpu_trainer.store.db import RunStatus, RunStore


def refresh_report(store: RunStore, run_id: str, prices: Mapping[str, ChipPrice]) -> bool:
    """Work the stored report's figures out again from the finished run's timeline, keep them
    with the run and put them in its README; True when the README changed. A run still
    running, without a report, or whose README cannot be written is left as it is (the
    stored figures are still updated; `tpu-trainer report RUN` writes them)."""
    row = store.run(run_id)
    if row is None or row.status is RunStatus.RUNNING:
        return False
    metrics = store.metrics(run_id) or {}
    stored = metrics.get("report")
    if not stored:
        return False
    old, model_dir = report_from_json(stored)
    new = replace(old, **report_figures(run_ledger(store, row, prices)))
    if new == old:
        return False
    store.set_metrics(run_id, {**metrics, "report": report_to_json(new, model_dir)})
    try:
        folder, _ = report_folder(store, run_id, model_dir, row.mode, to_recipe=False)
        return refresh_figures(folder / "README.md", old, new, lock_dir=locks_dir(store))
    except (TpuTrainerError, OSError):
        return False
