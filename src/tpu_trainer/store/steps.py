"""One training step as the summary computes it, the run store keeps it and the README shows it.

:class:`StepRow` is the one per-step row: ``metrics.summary`` derives it from a log's
``StepRecord`` (adding per-chip figures and why a step is not steady), the store saves and
loads it (:func:`to_columns` / :func:`from_columns`, the ``steps`` table), and ``report``
renders it. It lives here, in the lowest layer that uses it, so that the store and the report
need nothing from the layers above them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from tpu_trainer.store.file import StoreFile

_COLUMNS = ("step", "seconds", "tflops_device", "tokens_device", "total_weights", "loss")
"""The ``steps`` table's figure columns, in table order; anything else goes to ``extra``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StepRow:
    """One step as reported, with per-chip figures and whether it counts as steady."""

    step: int
    seconds: float
    tflops_per_device: float | None
    tflops_per_chip: float | None
    """TFLOP/s/device × JAX devices per chip (2 on TPU v7: two TensorCores per chip)."""
    tokens_per_device: float | None
    tokens_per_chip: float | None
    total_weights: float | None
    loss: float | None
    excluded: str | None = None
    """Why the step is not in the steady state; None when it is."""


def to_columns(row: StepRow) -> dict[str, Any]:
    """``row`` as the store's ``steps`` table holds it (per-device figures; ``excluded`` in
    ``extra``)."""
    return {
        "step": row.step,
        "seconds": row.seconds,
        "tflops_device": row.tflops_per_device,
        "tokens_device": row.tokens_per_device,
        "total_weights": row.total_weights,
        "loss": row.loss,
        "excluded": row.excluded,
    }


def from_columns(columns: Mapping[str, Any], jax_devices_per_chip: int) -> StepRow:
    """A row of the ``steps`` table (:func:`to_columns`) as a :class:`StepRow`; per-chip figures
    are the per-device ones × ``jax_devices_per_chip``."""

    def figure(key: str) -> float | None:
        value = columns.get(key)
        return None if value is None else float(value)

    tflops, tokens = figure("tflops_device"), figure("tokens_device")
    excluded = columns.get("excluded")
    return StepRow(
        step=int(columns["step"]),
        seconds=float(columns["seconds"]),
        tflops_per_device=tflops,
        tflops_per_chip=None if tflops is None else tflops * jax_devices_per_chip,
        tokens_per_device=tokens,
        tokens_per_chip=None if tokens is None else tokens * jax_devices_per_chip,
        total_weights=figure("total_weights"),
        loss=figure("loss"),
        excluded=None if excluded is None else str(excluded),
    )


_STEADY = json.dumps({"excluded": None})
BATCH = 2000
"""Step rows written per ``executemany`` call."""


def step_extra(excluded: str | None) -> str:
    """The ``extra`` column of a step row: why the step is not steady (null when it is)."""
    return _STEADY if excluded is None else json.dumps({"excluded": excluded})


def _values(run_id: str, step: StepRow | Mapping[str, Any]) -> tuple[Any, ...]:
    if isinstance(step, StepRow):
        extra = step_extra(step.excluded)
        return (
            run_id,
            step.step,
            step.seconds,
            step.tflops_per_device,
            step.tokens_per_device,
            step.total_weights,
            step.loss,
            extra,
        )
    rec = step
    rest = {k: v for k, v in rec.items() if k not in _COLUMNS}
    return (run_id, *(rec.get(k) for k in _COLUMNS), json.dumps(rest))


class StepsTable(StoreFile):
    """The ``steps`` table and a run's figures (``runs.metrics_json``)."""

    def record_steps(self, run_id: str, steps: Iterable[StepRow | Mapping[str, Any]]) -> None:
        """Store step rows (or their columns: ``step``, ``seconds``, ``tflops_device``,
        ``tokens_device``, ``total_weights``, ``loss``, anything else into ``extra``); a step
        seen again replaces the earlier record. ``steps`` is read as a stream and written in
        batches of :data:`BATCH` rows, in one transaction."""
        self.record_step_values(_values(run_id, step) for step in steps)

    def record_step_values(self, values: Iterable[tuple[Any, ...]]) -> None:
        """Store ``steps`` table rows given as tuples in table order (``run_id``, ``step``,
        ``seconds``, ``tflops_device``, ``tokens_device``, ``total_weights``, ``loss``,
        ``extra``), in batches of :data:`BATCH`, in one transaction."""
        values = iter(values)
        with self._tx() as db:
            while batch := list(islice(values, BATCH)):
                db.executemany("INSERT OR REPLACE INTO steps VALUES (?,?,?,?,?,?,?,?)", batch)

    def step_count(self, run_id: str) -> int:
        row = self._db.execute("SELECT count(*) FROM steps WHERE run_id = ?", (run_id,)).fetchone()
        return int(row[0]) if row else 0

    def iter_step_rows(self, run_id: str) -> Iterator[StepRow]:
        """A run's steps as :class:`StepRow`, by step, read from a cursor (not all at once)."""
        per_chip = (self.metrics(run_id) or {}).get("jax_devices_per_chip")
        devices = per_chip if isinstance(per_chip, int) and per_chip > 0 else 1
        for columns in self.iter_steps(run_id):
            yield from_columns(columns, devices)

    def iter_steps(self, run_id: str) -> Iterator[dict[str, Any]]:
        """:meth:`steps` read from a cursor, one at a time (a long run's are not all held)."""
        cursor = self._db.execute(
            "SELECT step, seconds, tflops_device, tokens_device, total_weights, loss, extra "
            "FROM steps WHERE run_id = ? ORDER BY step",
            (run_id,),
        )
        for r in cursor:
            yield {**dict(zip(_COLUMNS, r[:6], strict=True)), **json.loads(r[6] or "{}")}

    def step_figures(self, run_id: str, *names: str) -> Iterator[tuple[Any, ...]]:
        """Some figure columns of a run's steps (of ``step``, ``seconds``, ``tflops_device``,
        ``tokens_device``, ``total_weights``, ``loss``), by step, read from a cursor: what a
        sum over a long run's steps needs, without a dict per step."""
        unknown = [n for n in names if n not in _COLUMNS]
        if unknown or not names:
            raise ValueError(f"not step figure columns: {unknown or 'none given'}")
        query = f"SELECT {', '.join(names)} FROM steps WHERE run_id = ? ORDER BY step"  # noqa: S608
        return iter(self._db.execute(query, (run_id,)))

    def steps(self, run_id: str) -> list[dict[str, Any]]:
        """A run's steps as their columns, by step (what ``show --json`` prints)."""
        return list(self.iter_steps(run_id))

    def step_rows(self, run_id: str) -> list[StepRow]:
        """A run's steps as :class:`StepRow`, by step; per-chip figures use the JAX devices
        per chip of its stored figures (1 without them)."""
        per_chip = (self.metrics(run_id) or {}).get("jax_devices_per_chip")
        devices = per_chip if isinstance(per_chip, int) and per_chip > 0 else 1
        return [from_columns(columns, devices) for columns in self.steps(run_id)]

    def set_metrics(self, run_id: str, metrics: dict[str, Any]) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE runs SET metrics_json = ?, updated_at = ? WHERE id = ?",
                (json.dumps(metrics), time.time(), run_id),
            )

    def metrics(self, run_id: str) -> dict[str, Any] | None:
        row = self._db.execute("SELECT metrics_json FROM runs WHERE id = ?", (run_id,)).fetchone()
        return json.loads(row[0]) if row and row[0] else None
