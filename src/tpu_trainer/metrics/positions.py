"""Which of a run's steps a figure is taken over, held as the few steps it leaves out.

The steady state of a long run is nearly every step: :class:`Positions` keeps the positions
(in the step columns) it does not hold, and reads a column at the rest by slices, not one
number at a time.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Positions:
    """Positions ``0`` to ``n - 1`` of a run's columns but the ascending ``left_out`` ones
    (the steady steps are nearly every step: held as the few they are not, read by slices)."""

    n: int
    left_out: tuple[int, ...] = ()

    def __len__(self) -> int:
        return self.n - len(self.left_out)

    def __iter__(self) -> Iterator[int]:
        for start, end in self.runs():
            yield from range(start, end)

    def runs(self) -> Iterator[tuple[int, int]]:
        """The positions as ``range`` bounds, in order."""
        start = 0
        for at in (*self.left_out, self.n):
            if at > start:
                yield start, at
            start = max(start, at + 1)

    def picked(self, counts: Iterable[int]) -> list[int]:
        """The positions that come ``counts``-th (ascending, from 0) among these."""
        wanted = iter(counts)
        k, seen, found = next(wanted, None), 0, []
        for start, end in self.runs():
            while k is not None and k < seen + end - start:
                found.append(start + k - seen)
                k = next(wanted, None)
            seen += end - start
        return found

    def without(self, positions: Iterable[int]) -> Positions:
        """These positions less ``positions``."""
        return Positions(self.n, tuple(sorted({*self.left_out, *positions})))

    def gather(self, column: array[Any]) -> array[Any]:
        """``column``'s entries at these positions."""
        out = array(column.typecode)
        for start, end in self.runs():
            out += column[start:end]
        return out
