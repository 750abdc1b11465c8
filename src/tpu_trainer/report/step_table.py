"""Which steps a bounded step table shows: the first ones, notable ones, the last ones.

A long run's table would have a row per step (500 000 rows in a terminal help nobody). A
bounded table keeps the first steps (compile, warm-up, the start of the steady state), the
steps left out as outliers (a slow checkpoint step, a stall), up to a budget, and the last
steps, with a :class:`Gap` where steps are not shown. :func:`bounded` reads the rows once, as a
stream (from the run store's cursor), holding at most ``limit`` rows, or, from rows that can be
read at any position (:class:`IndexedRows`, a summary's columns), only the rows it shows; a run
of ``limit`` steps or fewer comes back whole.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import groupby, islice
from operator import lt
from typing import Protocol, runtime_checkable

from tpu_trainer.store.steps import StepRow

DEFAULT_LIMIT = 60
"""Rows a bounded table shows by default (``--steps N`` changes it, ``--steps all`` lifts it)."""


@dataclass(frozen=True, slots=True)
class Gap:
    """Rows not shown between two shown ones."""

    rows: int
    """How many step rows are not shown."""
    first_step: int
    last_step: int
    """The step numbers the gap spans (steps absent from the log included)."""
    absent: bool = False
    """The log reported no step there (nothing was left out of the table)."""

    def describe(self) -> str:
        span = (
            f"step {self.first_step}"
            if self.first_step == self.last_step
            else f"steps {self.first_step:,}–{self.last_step:,}"
        )
        if self.absent:
            return f"… {span} absent from the log …"
        return f"… {self.rows:,} steps not shown ({span}) …"


@runtime_checkable
class IndexedRows(Protocol):
    """Rows that can be read at any position, and that say where their excluded steps are
    (a long run's summary: its rows are made from columns only when read)."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int, /) -> StepRow: ...
    def excluded_positions(self) -> Iterable[tuple[int, str]]:
        """Each excluded step's position and why it is excluded, by position."""
        ...


def notable(row: StepRow) -> bool:
    """A step worth a row in a bounded table: one left out as an outlier."""
    return _notable(row.excluded)


def _notable(excluded: str | None) -> bool:
    return excluded is not None and excluded.startswith("outlier")


def bounded(rows: Iterable[StepRow], limit: int | None) -> list[StepRow | Gap]:
    """The rows to show, in step order, with gaps marked (``limit`` None: every row)."""
    if limit is None:
        return _with_absent([(i, r) for i, r in enumerate(rows)])
    limit = max(limit, 3)
    head_n = limit * 2 // 5
    tail_n = limit * 2 // 5
    budget = limit - head_n - tail_n
    if isinstance(rows, IndexedRows):
        return _picked(rows, limit, head_n, tail_n, budget)
    head: list[tuple[int, StepRow]] = []
    tail: deque[tuple[int, StepRow]] = deque(maxlen=limit - head_n)
    middle: list[tuple[int, StepRow]] = []
    count = 0
    for i, row in enumerate(rows):
        count = i + 1
        if len(head) < head_n:
            head.append((i, row))
            continue
        if len(tail) == tail.maxlen and len(middle) < budget and notable(tail[0][1]):
            middle.append(tail[0])
        tail.append((i, row))
    if count <= limit:
        return _with_absent([*head, *tail])
    kept = list(tail)
    for item in kept[:-tail_n]:
        if len(middle) < budget and notable(item[1]):
            middle.append(item)
    return _with_absent([*head, *middle, *kept[-tail_n:]])


def _picked(
    rows: IndexedRows, limit: int, head_n: int, tail_n: int, budget: int
) -> list[StepRow | Gap]:
    """What :func:`bounded` picks from a stream, picked by position: the first ``head_n``
    rows, the first ``budget`` notable rows between, the last ``tail_n`` rows."""
    n = len(rows)
    chosen: Iterable[int] = range(n)
    if n > limit:
        between = (
            i for i, why in rows.excluded_positions() if head_n <= i < n - tail_n and _notable(why)
        )
        middle = list(islice(between, budget))
        chosen = [*range(head_n), *middle, *range(n - tail_n, n)]
    return _with_absent([(i, rows[i]) for i in chosen])


def _with_absent(chosen: list[tuple[int, StepRow]]) -> list[StepRow | Gap]:
    out: list[StepRow | Gap] = []
    previous: tuple[int, StepRow] | None = None
    for at, row in chosen:
        if previous is not None:
            before, last = previous
            if at > before + 1:
                out.append(Gap(at - before - 1, last.step + 1, row.step - 1))
            elif row.step > last.step + 1:
                out.append(Gap(0, last.step + 1, row.step - 1, absent=True))
        out.append(row)
        previous = (at, row)
    return out


def ranges(numbers: Sequence[int], dash: str = "-") -> str:
    """``[1, 2, 3, 7]`` -> ``1-3, 7``."""
    return ", ".join(str(a) if a == b else f"{a}{dash}{b}" for a, b in _runs(numbers))


def _runs(numbers: Sequence[int]) -> Iterator[tuple[int, int]]:
    """The first and last number of each run of consecutive ``numbers``."""
    n = len(numbers)
    if not all(map(lt, numbers, islice(numbers, 1, None))):
        for _, group in groupby(enumerate(numbers), lambda p: p[1] - p[0]):
            run = [number for _, number in group]
            yield run[0], run[-1]
        return
    at = 0  # rising: along a run ``number - position`` stays the same, and it only grows
    while at < n:
        end = bisect_right(range(n), numbers[at] - at, lo=at, key=lambda k: numbers[k] - k)
        yield numbers[at], numbers[end - 1]
        at = end
