"""Waiting for something in the cloud: one polling loop, with a clock that tests replace.

``wait_until`` asks ``check`` again every ``interval`` seconds until it answers with a value.
While it answers :class:`Pending`, the loop shows the pending label with the time waited
(``on_tick``, the live "waiting ... 42 s" line) and sleeps on the :class:`Clock`. With a
``timeout`` it stops once more than that has passed and returns :class:`Expired`, which
carries the last pending answer so the caller can say what it was still waiting for.

``check`` receives a :class:`Tick`: ``tick.elapsed`` is the time waited when the round
began, ``tick.now()`` the time waited at this moment (after a slow cloud call).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar, overload

T = TypeVar("T")


class Clock(Protocol):
    """Where a wait reads the time (seconds, monotonic) and sleeps."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


@dataclass(frozen=True)
class SystemClock:
    """The machine's monotonic clock; ``sleep`` may be replaced (a run that must not wait)."""

    sleeper: Callable[[float], None] = time.sleep

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        self.sleeper(seconds)


SYSTEM_CLOCK = SystemClock()


@dataclass
class FakeClock:
    """A clock that moves only when slept on (or told to): waits in tests take no time."""

    at: float = 0.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.at

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.at += seconds

    def advance(self, seconds: float) -> None:
        """Time passing without a sleep (a slow call)."""
        self.at += seconds


@dataclass(frozen=True)
class Pending:
    """Not there yet; ``label`` is what the live line shows (``node pool p PROVISIONING``)."""

    label: str
    status: str = ""
    """The state seen, for the caller's timeout message."""


@dataclass(frozen=True)
class Expired:
    """The timeout passed while still pending."""

    last: Pending
    elapsed: float


@dataclass(frozen=True)
class Tick:
    clock: Clock
    started: float
    elapsed: float
    """Seconds waited when this round began."""

    def now(self) -> float:
        """Seconds waited at this moment."""
        return self.clock.now() - self.started


@overload
def wait_until(
    check: Callable[[Tick], T | Pending],
    *,
    interval: float,
    timeout: None = None,
    on_tick: Callable[[str, float], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    started: float | None = None,
) -> T: ...


@overload
def wait_until(
    check: Callable[[Tick], T | Pending],
    *,
    interval: float,
    timeout: float,
    on_tick: Callable[[str, float], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    started: float | None = None,
) -> T | Expired: ...


def wait_until(
    check: Callable[[Tick], T | Pending],
    *,
    interval: float,
    timeout: float | None = None,
    on_tick: Callable[[str, float], None] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    started: float | None = None,
) -> T | Expired:
    """Call ``check`` every ``interval`` seconds until it returns something other than
    :class:`Pending`, and return that; or :class:`Expired` once more than ``timeout`` seconds
    have passed (judged after each check). ``started`` (a ``clock.now()`` reading) counts
    time already waited elsewhere."""
    begin = clock.now() if started is None else started
    while True:
        answer = check(Tick(clock, begin, clock.now() - begin))
        if not isinstance(answer, Pending):
            return answer
        elapsed = clock.now() - begin
        if timeout is not None and elapsed > timeout:
            return Expired(answer, elapsed)
        if on_tick is not None:
            on_tick(answer.label, elapsed)
        clock.sleep(interval)
