"""The run template every launch path fills in.

:meth:`Launcher.start` is the one public entry: it checks what must hold before anything is
recorded, writes the run to the store, says what is starting, then runs the launch path's steps
inside the guard (teardown on success, failure, Ctrl-C and SIGTERM; see :mod:`.guard`) and
returns one :class:`~tpu_trainer.app.outcome.RunOutcome` carrying the status the store ended
with. A launch path says what its run is (:meth:`Launcher._record`, :meth:`Launcher._headline`),
what it does (:meth:`Launcher._launch`) and how what it made is given back
(:meth:`Launcher._teardown`). The run id is made once by the caller and passed in.
"""

from __future__ import annotations

import contextlib
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from tpu_trainer.app.display import Display
from tpu_trainer.app.guard import RunTeardown, finish_on_error, teardown_always
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.stages import Stages
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.store.db import RunRow, RunStatus, RunStore


@dataclass(frozen=True, slots=True, kw_only=True)
class RunRecord:
    """What the store's row says of a run when it starts."""

    model: str
    device_type: str
    precision: str
    plan_json: dict[str, Any] | None
    project: str | None = None
    cluster: str | None = None
    region: str | None = None
    zone: str | None = None


class Launcher(ABC):
    """One launch path. Subclasses are dataclasses holding these attributes."""

    launch_path: ClassVar[LaunchPath]
    reports_stored_error: ClassVar[bool] = False
    """The outcome carries the store's error when the steps ended the run as failed."""
    run_id: str
    request: str
    store: RunStore
    display: Display
    _started_at: float | None = None

    # ---- the template --------------------------------------------------------------------
    def start(self) -> RunOutcome:
        """The whole run: record it, run its steps inside the guard, return how it ended."""
        self._check()
        record = self._record()
        self.store.create_run(
            self.run_id,
            model=record.model,
            request=self.request,
            launcher=self.launch_path,
            device_type=record.device_type,
            precision=record.precision,
            project=record.project,
            cluster=record.cluster,
            region=record.region,
            zone=record.zone,
            plan_json=record.plan_json,
        )
        self.display.info(self._headline())
        outcome = self._new_outcome()
        return self._guarded(outcome, lambda: self._launch(outcome=outcome))

    def _guarded(self, outcome: RunOutcome, body: Callable[[], None]) -> RunOutcome:
        """Run ``body`` inside the guard; the outcome carries the stored final status."""
        self._started_at = self._started_at or time.monotonic()
        teardown = self._teardown()
        guard = (
            finish_on_error(self.store, self.run_id)
            if teardown is None
            else teardown_always(self.store, self.run_id, teardown, self._stop)
        )
        try:
            with guard:
                body()
        except TpuTrainerError as e:
            outcome.error = e.message
            raise
        finally:
            row = self._explained(outcome, self.store.run(self.run_id))
            outcome.status = row.status if row else RunStatus.FAILED
            from tpu_trainer.metrics.ledger import timeline_chart

            timeline_chart(self.store, row, self.run_dir)
            self._refresh_report()
            if self.reports_stored_error and row and row.error and outcome.error is None:
                outcome.error = row.error
        return outcome

    def _explained(self, outcome: RunOutcome, row: RunRow | None) -> RunRow | None:
        """A failed run's error with the family classifier's explanation added, when its logs
        hold a line it recognises and no known fatal error (:mod:`tpu_trainer.app.explain`);
        read once, after the run. The row as the store has it then."""
        if row is None or row.status is not RunStatus.FAILED:
            return row
        from tpu_trainer.app.explain import explain

        # an explanation is a hint: a log it cannot read must not hide how the run ended
        with contextlib.suppress(Exception):
            found = explain(self.run_dir)
            if found is not None:
                note = found.describe()
                self.store.update_run(self.run_id, error=_joined(row.error, note))
                self.display.warn(f"no known error in the run's logs; {note}")
                if outcome.error is not None or not self.reports_stored_error:
                    outcome.error = _joined(outcome.error, note)
        return self.store.run(self.run_id)

    def _refresh_report(self) -> None:
        """The README figures again, now that the teardown has ended (it counts too)."""
        from tpu_trainer.app.report_refresh import refresh_report
        from tpu_trainer.plan.plan import Plan

        plan = getattr(self, "plan", None)
        prices = plan.config.prices if isinstance(plan, Plan) else {}
        # the run's outcome is recorded already: figures that cannot be redone stay as written
        with contextlib.suppress(Exception):
            refresh_report(self.store, self.run_id, prices)

    # ---- services the steps use ----------------------------------------------------------
    @property
    def run_dir(self) -> Path:
        """The run's folder beside the run store (its logs and generated files)."""
        return self.store.path.parent / "runs" / self.run_id

    @property
    def stages(self) -> Stages:
        """The stage record and display, timed from the start of the run."""
        if self._started_at is None:
            self._started_at = time.monotonic()
        return Stages(self.store, self.display, self.run_id, self._started_at)

    # ---- what a launch path says and does ------------------------------------------------
    def _check(self) -> None:
        """Refuse the run before anything is recorded (default: nothing to check)."""
        return

    @abstractmethod
    def _record(self) -> RunRecord:
        """What the store records of the run (its plan, device, project...)."""

    @abstractmethod
    def _headline(self) -> str:
        """The line that says what is starting."""

    def _new_outcome(self) -> RunOutcome:
        return RunOutcome(self.run_id, RunStatus.RUNNING)

    @abstractmethod
    def _launch(self, *, outcome: RunOutcome) -> None:
        """The launch path's steps, in order; each records its stage and fills ``outcome``."""

    @abstractmethod
    def _teardown(self) -> RunTeardown | None:
        """What gives back what the run made (None: it makes nothing to give back)."""

    def _stop(self) -> None:
        """Called before the teardown when the steps did not finish (default: nothing)."""
        return


def _joined(error: str | None, note: str) -> str:
    """``error`` and ``note`` in one message (the store keeps 4000 characters)."""
    return (f"{error}; {note}" if error else note)[:4000]
