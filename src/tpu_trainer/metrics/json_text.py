"""Numbers as ``json.dumps`` writes them, a column at a time: what a long run's ``--json``
lines are made of.

A run of 500 000 steps prints 3.5 million figures; formatting each float (``repr``) is most of
the work. MaxText logs its figures with three decimals, so a column repeats few values (a few
hundred step times, some thousands of losses): :class:`FloatTexts` remembers the text of each
value it has seen and formats only new ones; a column whose values rarely repeat is formatted in
bulk instead (``json.dumps`` of the list). Both give ``json.dumps``'s text, to the byte.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

KNOWN_LIMIT = 50_000
"""Values a column remembers at most (about 5 MB); past it, or when a part of the column past
its first values is still mostly new ones, the column is formatted in bulk."""
MOSTLY_NEW = 0.4
"""The share of new values in a part above which looking values up costs more than
formatting them all."""
JUDGED_AFTER = 30_000
"""Values a column fills its memory with before its share of new values is judged (the first
values of any column are mostly new)."""


def floats(values: Sequence[float]) -> list[str]:
    """Each float as ``json.dumps`` writes it (``repr``, ``NaN``, ``Infinity``, ``-Infinity``)."""
    text = json.dumps(list(values))[1:-1]
    return text.split(", ") if text else []


def float_text(value: float) -> str:
    """One float as ``json.dumps`` writes it."""
    if math.isfinite(value):
        return float.__repr__(value)
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


class _Known(dict[float, str]):
    """Texts of the values seen. Zeros are not kept (``0.0`` and ``-0.0`` are equal keys with
    different texts), nor NaN (never equal to itself)."""

    def __missing__(self, value: float) -> str:
        text = float_text(value)
        if value != 0 and not math.isnan(value):
            self[value] = text
        return text


class FloatTexts:
    """One column's floats as ``json.dumps`` writes them, part after part."""

    def __init__(self) -> None:
        self._known: _Known | None = _Known()
        self._seen = 0

    def __call__(self, values: Sequence[float]) -> list[str]:
        known = self._known
        if known is None:
            return floats(values)
        before = len(known)
        text = list(map(known.__getitem__, values))
        self._seen += len(values)
        new = len(known) - before
        judged = self._seen > JUDGED_AFTER and new > len(values) * MOSTLY_NEW
        if judged or len(known) > KNOWN_LIMIT:
            self._known = None  # the values rarely repeat: remembering them does not pay
        return text
