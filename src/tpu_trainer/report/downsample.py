"""Per-N-steps summaries of a run's steps: what a long run's README table and charts show.

A bucket holds ``width`` consecutive step numbers and keeps, for each figure, the mean, the
minimum and the maximum of its steps: a chart drawn from the buckets' minimum and maximum
still shows a one-step spike (a loss spike, a slow checkpoint step), which plain averaging or
taking every Nth step would hide. :func:`bucket_steps` reads the rows once, as a stream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_trainer.store.steps import StepRow

_NICE = (1, 2, 5)


@dataclass(frozen=True, slots=True)
class Stat:
    """Mean, minimum and maximum of one figure over a bucket's steps."""

    mean: float
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class StepBucket:
    """The steps from ``first`` to ``last`` (``count`` of them logged), summarised."""

    width: int
    """Step numbers a bucket spans (``k·width`` to ``(k+1)·width - 1``)."""
    first: int
    last: int
    count: int
    seconds: Stat
    tflops_device: Stat | None
    tflops_chip: Stat | None
    tokens_chip: Stat | None
    loss: Stat | None

    def to_json(self) -> dict[str, Any]:
        def stat(s: Stat | None) -> list[float] | None:
            return None if s is None else [s.mean, s.low, s.high]

        return {
            "width": self.width,
            "first": self.first,
            "last": self.last,
            "count": self.count,
            "seconds": stat(self.seconds),
            "tflops_device": stat(self.tflops_device),
            "tflops_chip": stat(self.tflops_chip),
            "tokens_chip": stat(self.tokens_chip),
            "loss": stat(self.loss),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StepBucket:
        def stat(v: Any) -> Stat | None:
            return None if v is None else Stat(float(v[0]), float(v[1]), float(v[2]))

        seconds = stat(data["seconds"])
        return cls(
            width=int(data["width"]),
            first=int(data["first"]),
            last=int(data["last"]),
            count=int(data["count"]),
            seconds=seconds if seconds is not None else Stat(math.nan, math.nan, math.nan),
            tflops_device=stat(data.get("tflops_device")),
            tflops_chip=stat(data.get("tflops_chip")),
            tokens_chip=stat(data.get("tokens_chip")),
            loss=stat(data.get("loss")),
        )


def nice_width(steps: int, most: int) -> int:
    """The smallest width of 1, 2 or 5 × 10^k steps that cuts ``steps`` into ``most``
    buckets or fewer."""
    need = max(1, math.ceil(steps / max(most, 1)))
    scale = 1
    while True:
        for n in _NICE:
            if n * scale >= need:
                return n * scale
        scale *= 10


_SERIES = 5
"""Seconds, TFLOP/s/device, TFLOP/s/chip, Tokens/s/chip, loss."""
_NAN = Stat(math.nan, math.nan, math.nan)


class _Bucketer:
    """Buckets of one width, filled one step at a time."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.out: list[StepBucket] = []
        self._key: int | None = None
        self._first = self._last = self._count = 0
        self._reset()

    def _reset(self) -> None:
        self._total = [0.0] * _SERIES
        self._n = [0] * _SERIES
        self._low = [math.inf] * _SERIES
        self._high = [-math.inf] * _SERIES

    def add(self, step: int, values: tuple[float | None, ...]) -> None:
        key = step // self.width
        if key != self._key:
            self.close()
            self._key, self._first, self._count = key, step, 0
        self._last, self._count = step, self._count + 1
        total, n, low, high = self._total, self._n, self._low, self._high
        for i, value in enumerate(values):
            if value is None or not math.isfinite(value):
                continue
            total[i] += value
            n[i] += 1
            low[i] = min(low[i], value)
            high[i] = max(high[i], value)

    def close(self) -> None:
        if self._key is None:
            return
        stats = [
            Stat(self._total[i] / self._n[i], self._low[i], self._high[i]) if self._n[i] else None
            for i in range(_SERIES)
        ]
        seconds, device, chip, tokens, loss = stats
        self.out.append(
            StepBucket(
                self.width,
                self._first,
                self._last,
                self._count,
                seconds or _NAN,
                device,
                chip,
                tokens,
                loss,
            )
        )
        self._key = None
        self._reset()


def bucket_steps_by(rows: Iterable[StepRow], widths: Sequence[int]) -> list[list[StepBucket]]:
    """``rows`` (in step order) cut into buckets of each of ``widths`` step numbers (steps
    ``k·width`` to ``(k+1)·width - 1``), in one pass."""
    bucketers = [_Bucketer(w) for w in widths]
    for row in rows:
        values = (
            row.seconds,
            row.tflops_per_device,
            row.tflops_per_chip,
            row.tokens_per_chip,
            row.loss,
        )
        for bucketer in bucketers:
            bucketer.add(row.step, values)
    for bucketer in bucketers:
        bucketer.close()
    return [b.out for b in bucketers]


def bucket_steps(rows: Iterable[StepRow], width: int) -> list[StepBucket]:
    """:func:`bucket_steps_by` for one width."""
    return bucket_steps_by(rows, [width])[0]
