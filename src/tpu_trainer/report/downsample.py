"""Per-N-steps summaries of a run's steps: what a long run's README table and charts show.

A bucket holds ``width`` consecutive step numbers and keeps, for each figure, the mean, the
minimum and the maximum of its steps: a chart drawn from the buckets' minimum and maximum
still shows a one-step spike (a loss spike, a slow checkpoint step), which plain averaging or
taking every Nth step would hide. :func:`bucket_steps` reads the rows once, as a stream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
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


class _Acc:
    __slots__ = ("count", "high", "low", "total")

    def __init__(self) -> None:
        self.total, self.count, self.low, self.high = 0.0, 0, math.inf, -math.inf

    def add(self, value: float | None) -> None:
        if value is None or not math.isfinite(value):
            return
        self.total += value
        self.count += 1
        self.low = min(self.low, value)
        self.high = max(self.high, value)

    def stat(self) -> Stat | None:
        return Stat(self.total / self.count, self.low, self.high) if self.count else None


def _accs() -> tuple[_Acc, ...]:
    return (_Acc(), _Acc(), _Acc(), _Acc(), _Acc())


def bucket_steps(rows: Iterable[StepRow], width: int) -> list[StepBucket]:
    """``rows`` (in step order) cut into buckets of ``width`` step numbers
    (steps ``k·width`` to ``(k+1)·width - 1``)."""
    out: list[StepBucket] = []
    key: int | None = None
    first = last = count = 0
    accs = _accs()

    def close() -> None:
        seconds, device, chip, tokens, loss = (a.stat() for a in accs)
        nan = Stat(math.nan, math.nan, math.nan)
        out.append(
            StepBucket(width, first, last, count, seconds or nan, device, chip, tokens, loss)
        )

    for row in rows:
        k = row.step // width
        if k != key:
            if key is not None:
                close()
            key, first, count = k, row.step, 0
            accs = _accs()
        last, count = row.step, count + 1
        values = (
            row.seconds,
            row.tflops_per_device,
            row.tflops_per_chip,
            row.tokens_per_chip,
            row.loss,
        )
        for acc, value in zip(accs, values, strict=True):
            acc.add(value)
    if key is not None:
        close()
    return out
