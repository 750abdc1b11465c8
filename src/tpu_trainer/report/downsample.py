"""Per-N-steps summaries of a run's steps: what a long run's README table and charts show.

A bucket holds ``width`` consecutive step numbers and keeps, for each figure, the mean, the
minimum and the maximum of its steps: a chart drawn from the buckets' minimum and maximum
still shows a one-step spike (a loss spike, a slow checkpoint step), which plain averaging or
taking every Nth step would hide. :func:`bucket_series` reads a run's figures as columns
(a long run's summary has them so); :func:`bucket_steps` reads rows, once, as a stream.
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import add
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


def bucket_series(
    steps: Sequence[int], series: Sequence[Sequence[float]], widths: Sequence[int]
) -> list[list[StepBucket]]:
    """Steps (ascending) and their five figures (seconds, TFLOP/s/device, TFLOP/s/chip,
    Tokens/s/chip, loss; NaN where a step has none) cut into buckets of each of ``widths``
    step numbers (steps ``k·width`` to ``(k+1)·width - 1``). A figure's mean adds its finite
    values in step order, as one running total."""
    if len(series) != _SERIES:
        raise ValueError(f"{_SERIES} series of figures expected, got {len(series)}")
    found: list[list[StepBucket]] = []
    for width in widths:
        out: list[StepBucket] = []
        at, n = 0, len(steps)
        while at < n:
            end = bisect_left(steps, (steps[at] // width + 1) * width, at)
            seconds, device, chip, tokens, loss = (_stat(s[at:end]) for s in series)
            out.append(
                StepBucket(
                    width,
                    steps[at],
                    steps[end - 1],
                    end - at,
                    seconds or _NAN,
                    device,
                    chip,
                    tokens,
                    loss,
                )
            )
            at = end
        found.append(out)
    return found


def _stat(values: Sequence[float]) -> Stat | None:
    """Mean, minimum and maximum of the finite ``values`` (None when there is none)."""
    total = reduce(add, values, 0.0)
    if not math.isfinite(total):  # an infinite or NaN value among them (or an overflow)
        values = [v for v in values if math.isfinite(v)]
        total = reduce(add, values, 0.0)
    if not values:
        return None
    return Stat(total / len(values), min(values), max(values))


def bucket_steps_by(rows: Iterable[StepRow], widths: Sequence[int]) -> list[list[StepBucket]]:
    """``rows`` (in step order) cut into buckets of each of ``widths`` step numbers (steps
    ``k·width`` to ``(k+1)·width - 1``): :func:`bucket_series` of their figures."""
    steps: array[int] = array("q")
    series: list[array[float]] = [array("d") for _ in range(_SERIES)]
    seconds, device, chip, tokens, loss = series
    for row in rows:
        steps.append(row.step)
        seconds.append(_figure(row.seconds))
        device.append(_figure(row.tflops_per_device))
        chip.append(_figure(row.tflops_per_chip))
        tokens.append(_figure(row.tokens_per_chip))
        loss.append(_figure(row.loss))
    return bucket_series(steps, series, widths)


def _figure(value: float | None) -> float:
    return math.nan if value is None else value


def bucket_steps(rows: Iterable[StepRow], width: int) -> list[StepBucket]:
    """:func:`bucket_steps_by` for one width."""
    return bucket_steps_by(rows, [width])[0]
