"""A run's steps held as columns of numbers, not as one Python object per step.

A pretraining log has hundreds of thousands of steps; a :class:`StepRecord` per step costs
about half a kilobyte, a row here 41 bytes (five ``array('d')`` figures, the step as
``array('q')`` and one byte of flags), so 500 000 steps take 20 MB. Steps are added as the
log is read (:meth:`StepColumns.add`, the first line of a step wins, as several workers or Ray
without dedup repeat them), put in step order once at the end (:meth:`StepColumns.seal`), and
read back one at a time (:meth:`StepColumns.fig`), by slices (a
:class:`~tpu_trainer.metrics.positions.Positions`), or as :class:`StepRow` on demand
(:class:`~tpu_trainer.metrics.lazy_rows.LazyRows`).
"""

from __future__ import annotations

import json
import math
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from tpu_trainer.metrics.json_text import FloatTexts
from tpu_trainer.metrics.positions import Positions
from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.store.steps import StepRow, step_extra

_TFLOPS, _TOKENS, _WEIGHTS, _LOSS, _RAMPUP = 1, 2, 4, 8, 16
_ALL = _TFLOPS | _TOKENS | _WEIGHTS | _LOSS
_BITS = {"tflops": _TFLOPS, "tokens": _TOKENS, "weights": _WEIGHTS, "loss": _LOSS}
_BITMAP_LIMIT = 1 << 26
"""Steps below this are remembered in a byte map (1 byte a step); higher ones in a set."""


@dataclass(frozen=True, slots=True)
class Fig:
    """One step's figures, read back from the columns."""

    step: int
    seconds: float
    tflops_per_device: float | None
    tokens_per_device: float | None
    total_weights: float | None
    loss: float | None
    rampup: bool


class StepColumns:
    """The unique steps of a log, in columns."""

    def __init__(self) -> None:
        self._step = array("q")
        self._seconds = array("d")
        self._tflops = array("d")
        self._tokens = array("d")
        self._weights = array("d")
        self._loss = array("d")
        self._flags = bytearray()
        self._seen = bytearray()
        self._seen_high: set[int] = set()
        self._ordered = True
        self.duplicates = 0
        """Step lines dropped because their step was seen before."""
        self.ray_merged = False
        """Some line carried Ray's ``[repeated Nx across cluster]``."""
        self.has_tflops = False
        self.step0_timestamp: float | None = None
        """The absl time of step 0's line (seconds since 1 January)."""

    def add(self, s: StepRecord) -> None:
        """Keep ``s`` unless its step was seen before (then count a duplicate)."""
        if s.repeated > 0:
            self.ray_merged = True
        if self._mark(s.step):
            self.duplicates += 1
            return
        if self._step and s.step < self._step[-1]:
            self._ordered = False
        if s.step == 0:
            self.step0_timestamp = s.timestamp
        tflops, tokens, weights, loss = (
            s.tflops_per_device,
            s.tokens_per_device,
            s.total_weights,
            s.loss,
        )
        flags = _RAMPUP if s.rampup else 0
        self._step.append(s.step)
        self._seconds.append(s.seconds)
        if tflops is None:
            self._tflops.append(0.0)
        else:
            self._tflops.append(tflops)
            flags |= _TFLOPS
            self.has_tflops = True
        if tokens is None:
            self._tokens.append(0.0)
        else:
            self._tokens.append(tokens)
            flags |= _TOKENS
        if weights is None:
            self._weights.append(0.0)
        else:
            self._weights.append(weights)
            flags |= _WEIGHTS
        if loss is None:
            self._loss.append(0.0)
        else:
            self._loss.append(loss)
            flags |= _LOSS
        self._flags.append(flags)

    def add_fields(
        self,
        step: int,
        seconds: float,
        tflops: float,
        tokens: float,
        weights: float,
        loss: float,
        timestamp: float | None,
    ) -> None:
        """:meth:`add` of a plain step line (every figure present, no rampup, no Ray prefix)
        from its numbers, without a :class:`StepRecord`."""
        if self._mark(step):
            self.duplicates += 1
            return
        if self._step and step < self._step[-1]:
            self._ordered = False
        if step == 0:
            self.step0_timestamp = timestamp
        self._step.append(step)
        self._seconds.append(seconds)
        self._tflops.append(tflops)
        self._tokens.append(tokens)
        self._weights.append(weights)
        self._loss.append(loss)
        self._flags.append(_ALL)
        self.has_tflops = True

    def extend_plain(
        self,
        steps: array[int],
        seconds: array[float],
        tflops: array[float],
        tokens: array[float],
        weights: array[float],
        loss: array[float],
    ) -> None:
        """:meth:`add_fields` of many plain step lines (none of them step 0) at once: appended
        column by column when the steps rise and none was seen before, else one at a time."""
        n = len(steps)
        if not n:
            return
        first, last = steps[0], steps[-1]
        run = last - first == n - 1 and steps == array("q", range(first, last + 1))
        fresh = (
            first >= 0
            and last < _BITMAP_LIMIT
            and (run or all(a < b for a, b in pairwise(steps)))
            and self._seen.find(1, first, last + 1) < 0
        )
        if not fresh:
            for s, sec, tf, tk, w, lo in zip(
                steps, seconds, tflops, tokens, weights, loss, strict=True
            ):
                self.add_fields(s, sec, tf, tk, w, lo, None)
            return
        if len(self._seen) <= last:
            self._seen.extend(bytes(max(last + 1 - len(self._seen), len(self._seen))))
        if run:
            self._seen[first : last + 1] = b"\x01" * n
        else:
            for step in steps:
                self._seen[step] = 1
        if self._step and first < self._step[-1]:
            self._ordered = False
        self._step.extend(steps)
        self._seconds.extend(seconds)
        self._tflops.extend(tflops)
        self._tokens.extend(tokens)
        self._weights.extend(weights)
        self._loss.extend(loss)
        self._flags.extend(bytes((_ALL,)) * n)
        self.has_tflops = True

    def _mark(self, step: int) -> bool:
        """Remember ``step``; whether it was already there."""
        if not 0 <= step < _BITMAP_LIMIT:
            found = step in self._seen_high
            self._seen_high.add(step)
            return found
        if step >= len(self._seen):
            self._seen.extend(bytes(max(step + 1 - len(self._seen), len(self._seen))))
        found = self._seen[step] == 1
        self._seen[step] = 1
        return found

    def seal(self) -> None:
        """Put the steps in step order (a no-op when they came in order, as they do)."""
        if self._ordered:
            return
        order = sorted(range(len(self._step)), key=self._step.__getitem__)
        for name in ("_step", "_seconds", "_tflops", "_tokens", "_weights", "_loss"):
            column: array[float] = getattr(self, name)
            setattr(self, name, array(column.typecode, (column[i] for i in order)))
        self._flags = bytearray(self._flags[i] for i in order)
        self._ordered = True

    def missing(self, hidden: Sequence[int]) -> list[int]:
        """Steps up to the highest seen (hidden ones count as seen) that no line reported."""
        top = max([*self._step, *hidden], default=-1) if not self._step else self._top(hidden)
        if top >= _BITMAP_LIMIT:
            every = {*self._step, *hidden}
            return [n for n in range(top + 1) if n not in every]
        seen = bytearray(self._seen[: top + 1])
        seen.extend(bytes(top + 1 - len(seen)))
        for h in hidden:
            if h >= 0:
                seen[h] = 1
        found: list[int] = []
        at = seen.find(0)
        while at >= 0:
            found.append(at)
            at = seen.find(0, at + 1)
        return found

    def _top(self, hidden: Sequence[int]) -> int:
        highest = self._step[-1] if self._ordered else max(self._step)
        return max(highest, *hidden) if hidden else highest

    def __len__(self) -> int:
        return len(self._step)

    def step(self, i: int) -> int:
        return self._step[i]

    def position(self, step: int) -> int:
        """Where ``step`` is among the (sealed) steps."""
        return bisect_left(self._step, step)

    def seconds(self, i: int) -> float:
        return self._seconds[i]

    def fig(self, i: int) -> Fig:
        flags = self._flags[i]
        return Fig(
            step=self._step[i],
            seconds=self._seconds[i],
            tflops_per_device=self._tflops[i] if flags & _TFLOPS else None,
            tokens_per_device=self._tokens[i] if flags & _TOKENS else None,
            total_weights=self._weights[i] if flags & _WEIGHTS else None,
            loss=self._loss[i] if flags & _LOSS else None,
            rampup=bool(flags & _RAMPUP),
        )

    def figs(self) -> Iterator[Fig]:
        return (self.fig(i) for i in range(len(self._step)))

    def step_flags(self) -> Iterator[tuple[int, bool, bool]]:
        """Each step's number, whether it was in the rampup, whether it has TFLOP/s."""
        for step, flags in zip(self._step, self._flags, strict=True):
            yield step, bool(flags & _RAMPUP), bool(flags & _TFLOPS)

    def plain(self) -> bool:
        """Every step logged every figure, and none was in a batch-size rampup."""
        return self._flags.count(_ALL) == len(self._flags)

    def present(self, name: str, index: Positions) -> array[float]:
        """The ``tflops``, ``tokens``, ``weights`` or ``seconds`` of the steps at ``index``
        that logged it."""
        column: array[float] = getattr(self, f"_{name}")
        if name == "seconds" or self.plain():
            return index.gather(column)
        bit = _BITS[name]
        flags = self._flags
        return array("d", [column[i] for i in index if flags[i] & bit])

    def steps_at(self, index: Positions) -> tuple[int, ...]:
        """The step numbers at ``index``."""
        return tuple(index.gather(self._step))

    def rows(self, per_chip: int, reasons: Mapping[int, str]) -> Iterator[StepRow]:
        """Each step as a :class:`StepRow` (see :func:`row_of`), made straight from the columns."""
        columns = (self._step, self._seconds, self._tflops, self._tokens, self._weights)
        for step, seconds, tflops, tokens, weights, loss, flags in zip(
            *columns, self._loss, self._flags, strict=True
        ):
            has_tflops, has_tokens = flags & _TFLOPS, flags & _TOKENS
            yield StepRow(
                step=step,
                seconds=seconds,
                tflops_per_device=tflops if has_tflops else None,
                tflops_per_chip=tflops * per_chip if has_tflops else None,
                tokens_per_device=tokens if has_tokens else None,
                tokens_per_chip=tokens * per_chip if has_tokens else None,
                total_weights=weights if flags & _WEIGHTS else None,
                loss=loss if flags & _LOSS else None,
                excluded=reasons.get(step),
            )

    def series(self, per_chip: int) -> tuple[array[int], list[array[float]]]:
        """The steps and, as columns, their seconds, TFLOP/s/device, TFLOP/s/chip,
        Tokens/s/chip and loss, NaN where a step did not log the figure (what
        ``report.downsample.bucket_series`` reads)."""
        tflops, tokens = self._or_nan(self._tflops, _TFLOPS), self._or_nan(self._tokens, _TOKENS)
        return self._step, [
            self._seconds,
            tflops,
            array("d", [t * per_chip for t in tflops]),
            array("d", [t * per_chip for t in tokens]),
            self._or_nan(self._loss, _LOSS),
        ]

    def _or_nan(self, column: array[float], bit: int) -> array[float]:
        if self.plain():
            return column
        flags = self._flags
        return array("d", [v if f & bit else math.nan for v, f in zip(column, flags, strict=True)])

    def weights_per_second(self, index: Positions) -> array[float]:
        """``total_weights / seconds`` of the steps at ``index`` that logged a non-zero
        ``total_weights`` and took time."""
        if self.plain():
            weights, seconds = self.present("weights", index), self.present("seconds", index)
            return array("d", [w / s for w, s in zip(weights, seconds, strict=True) if w and s > 0])
        weights, seconds, flags = self._weights, self._seconds, self._flags
        return array(
            "d",
            [
                weights[i] / seconds[i]
                for i in index
                if flags[i] & _WEIGHTS and weights[i] and seconds[i] > 0
            ],
        )

    def json_lines(self, per_chip: int, reasons: Mapping[int, str]) -> Iterator[str]:
        """Each step as ``json.dumps`` writes its row (``dataclasses.asdict(StepRow)`` and
        ``steady``), made straight from the columns."""
        for chunk in self.json_chunks(per_chip, reasons):
            yield from chunk

    def store_values(self, run_id: str, reasons: Mapping[int, str]) -> Iterator[tuple[object, ...]]:
        """Each step as the store's ``steps`` table row (``store.steps.step_values``), made
        straight from the columns."""
        steady = step_extra(None)
        columns = (self._step, self._seconds, self._tflops, self._tokens, self._weights)
        for step, seconds, tflops, tokens, weights, loss, flags in zip(
            *columns, self._loss, self._flags, strict=True
        ):
            why = reasons.get(step)
            yield (
                run_id,
                step,
                seconds,
                tflops if flags & _TFLOPS else None,
                tokens if flags & _TOKENS else None,
                weights if flags & _WEIGHTS else None,
                loss if flags & _LOSS else None,
                steady if why is None else step_extra(why),
            )

    def json_chunks(
        self, per_chip: int, reasons: Mapping[int, str], size: int = 2_000
    ) -> Iterator[list[str]]:
        """:meth:`json_lines` ``size`` steps at a time, each column's numbers formatted at once
        (:class:`~tpu_trainer.metrics.json_text.FloatTexts`)."""
        texts = [FloatTexts() for _ in range(7)]
        for at in range(0, len(self._step), size):
            end = at + size
            steps = self._step[at:end]
            tflops, tokens = self._tflops[at:end], self._tokens[at:end]
            text = [
                write(c)
                for write, c in zip(
                    texts,
                    (
                        self._seconds[at:end],
                        tflops,
                        [t * per_chip for t in tflops],
                        tokens,
                        [t * per_chip for t in tokens],
                        self._weights[at:end],
                        self._loss[at:end],
                    ),
                    strict=True,
                )
            ]
            _nulls(self._flags[at:end], text)
            why = list(map(reasons.get, steps))
            if why.count(None) == len(why):
                ends = [_STEADY_END] * len(why)
            else:
                ends = [_STEADY_END if w is None else _excluded_end(w) for w in why]
            yield list(map(_JSON_ROW.__mod__, zip(map(str, steps), *text, ends, strict=True)))


_JSON_ROW = (
    '{"step": %s, "seconds": %s, "tflops_per_device": %s, "tflops_per_chip": %s, '
    '"tokens_per_device": %s, "tokens_per_chip": %s, "total_weights": %s, "loss": %s, %s'
)
_STEADY_END = '"excluded": null, "steady": true}'
"""How a steady step's JSON line ends."""


def _excluded_end(why: str) -> str:
    return f'"excluded": {json.dumps(why)}, "steady": false}}'


_NULLABLE = ((1, _TFLOPS), (2, _TFLOPS), (3, _TOKENS), (4, _TOKENS), (5, _WEIGHTS), (6, _LOSS))
"""Which formatted column (after ``seconds``) a missing figure's flag makes ``null``."""


def _nulls(flags: bytearray, text: list[list[str]]) -> None:
    """``null`` in ``text`` where a row's flags say the figure was not logged."""
    if flags.count(_ALL) == len(flags):
        return
    for i, f in enumerate(flags):
        if f & _ALL != _ALL:
            for column, bit in _NULLABLE:
                if not f & bit:
                    text[column][i] = "null"
