"""A run's steps as :class:`~tpu_trainer.store.steps.StepRow`, each made when it is read from
the step columns: what a summary's ``rows`` are, so that a long run's views (JSON lines, the
store's rows, the bounded step table, the chart buckets) read the columns straight."""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping, Sequence
from typing import overload

from tpu_trainer.metrics.columns import Fig, StepColumns
from tpu_trainer.store.steps import StepRow


class LazyRows(Sequence[StepRow]):
    """The steps as :class:`StepRow`, each made when it is read."""

    def __init__(self, columns: StepColumns, per_chip: int, reasons: Mapping[int, str]) -> None:
        self._columns, self._per_chip, self._reasons = columns, per_chip, reasons

    @property
    def reasons(self) -> Mapping[int, str]:
        """Why each excluded step is excluded, by step (steady steps are not in it)."""
        return self._reasons

    def __len__(self) -> int:
        return len(self._columns)

    @overload
    def __getitem__(self, i: int) -> StepRow: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[StepRow]: ...
    def __getitem__(self, i: int | slice) -> StepRow | Sequence[StepRow]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return row_of(
            self._columns.fig(i), self._per_chip, self._reasons.get(self._columns.step(i))
        )

    def __iter__(self) -> Iterator[StepRow]:
        return self._columns.rows(self._per_chip, self._reasons)

    def json_lines(self) -> Iterator[str]:
        """Each row as one line of JSON (see :meth:`StepColumns.json_lines`)."""
        return self._columns.json_lines(self._per_chip, self._reasons)

    def store_values(self, run_id: str) -> Iterator[tuple[object, ...]]:
        """The rows as the store's ``steps`` table holds them (:meth:`StepColumns.store_values`)."""
        return self._columns.store_values(run_id, self._reasons)

    def json_chunks(self) -> Iterator[list[str]]:
        """The rows' JSON lines, some thousands at a time (:meth:`StepColumns.json_chunks`)."""
        return self._columns.json_chunks(self._per_chip, self._reasons)

    def excluded_positions(self) -> Iterator[tuple[int, str]]:
        """Each excluded step's position and why it is excluded, by position."""
        position = self._columns.position
        return ((position(step), why) for step, why in sorted(self._reasons.items()))

    def series(self) -> tuple[array[int], list[array[float]]]:
        """The steps and their charted figures as columns (:meth:`StepColumns.series`)."""
        return self._columns.series(self._per_chip)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def row_of(f: Fig, per_chip: int, excluded: str | None) -> StepRow:
    """One step's :class:`StepRow`: per-chip figures are per-device ones × ``per_chip``."""
    tflops, tokens = f.tflops_per_device, f.tokens_per_device
    return StepRow(
        step=f.step,
        seconds=f.seconds,
        tflops_per_device=tflops,
        tflops_per_chip=None if tflops is None else tflops * per_chip,
        tokens_per_device=tokens,
        tokens_per_chip=None if tokens is None else tokens * per_chip,
        total_weights=f.total_weights,
        loss=f.loss,
        excluded=excluded,
    )
