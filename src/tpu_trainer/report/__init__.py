"""Training reports: a run's results written into the model's README, with charts.

* :class:`RunReport` and its steps' :class:`StepRow` (the run store's per-step row) are the
  input (``report.model``).
* :func:`update_readme` creates or extends the README; it never rewrites what is there, and
  its "my runs" table is the history of every run of the model (``report.readme``); the
  row and section a run adds are rendered by ``report.sections``.
* :func:`write_plots` draws step time, loss and TFLOP/s per chip as PNG files next to the
  README (``report.plots``; matplotlib is only imported when it is called).
"""

from __future__ import annotations

from tpu_trainer.report.model import RunReport
from tpu_trainer.report.plots import plot_paths, write_plots
from tpu_trainer.report.readme import add_run, update_readme
from tpu_trainer.report.sections import marker, render_readme
from tpu_trainer.store.steps import StepRow

__all__ = [
    "RunReport",
    "StepRow",
    "add_run",
    "marker",
    "plot_paths",
    "render_readme",
    "update_readme",
    "write_plots",
]
