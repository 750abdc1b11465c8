"""A run's steps written to the store while its log streams, so a crash keeps them.

A follow loop hands each step it reads from worker 0's log to :class:`LiveSteps`, which keeps
at most ``every_steps`` of them and writes them (one transaction, ``executemany``) when it
holds that many or when ``every_seconds`` have passed since the last write, and once more when
the follow ends (:meth:`LiveSteps.flush`). ``show RUN`` during the run lists the steps so far.
When the run ends the collect stage stores every step again from the whole log, with why each
is or is not in the steady state: a step written here is replaced, never doubled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.store.steps import step_extra

EVERY_STEPS = 500
"""Steps held before they are written."""
EVERY_SECONDS = 30.0
"""Seconds at most between a step arriving and its write (checked as steps arrive)."""


class StepStore(Protocol):
    def record_step_values(self, values: list[tuple[object, ...]]) -> None: ...


class LiveSteps:
    """Steps of a running run, written to the store in batches."""

    def __init__(
        self,
        store: StepStore,
        run_id: str,
        *,
        every_steps: int = EVERY_STEPS,
        every_seconds: float = EVERY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store, self._run_id = store, run_id
        self._every_steps, self._every_seconds, self._clock = every_steps, every_seconds, clock
        self._held: list[tuple[object, ...]] = []
        self._last_write = clock()
        self._lock = threading.Lock()
        self.written = 0
        """Steps written so far."""

    def add(self, step: StepRecord) -> None:
        """Hold ``step``; write what is held when the batch is full or has waited long enough."""
        row = (
            self._run_id,
            step.step,
            step.seconds,
            step.tflops_per_device,
            step.tokens_per_device,
            step.total_weights,
            step.loss,
            _UNJUDGED,
        )
        with self._lock:
            self._held.append(row)
            due = len(self._held) >= self._every_steps
            if not due and self._clock() - self._last_write < self._every_seconds:
                return
        self.flush()

    def flush(self) -> None:
        """Write the steps held (nothing when none are)."""
        with self._lock:
            held, self._held = self._held, []
            self._last_write = self._clock()
            if held:
                self._store.record_step_values(held)
                self.written += len(held)


_UNJUDGED = step_extra(None)
"""A live step's ``extra``: the steady state is judged when the run ends."""
