"""The hang watchdog: told when each host logged and which steps completed, it says whether the
run still makes progress, or that it hangs and since when.

A run hangs when:

- no first step came within the start-up deadline (``first_step_deadline_s``, measured from
  when the follow began: the compile time seen for this model in the run store × a factor, or
  a generous default), or
- no new step came for ``k`` × the steady step time (the median of the last steps' times after
  the first, compile, step), never less than ``min_stall_s`` (a checkpoint save may pause a fast
  run for a while). Until a step after the first is seen, the start-up deadline applies again.

Pure: the caller gives every time (a :class:`~tpu_trainer.infra.poll.Clock` reading), so the
same timeline always gives the same answer. Known hang texts (a megascale barrier timeout,
``DEADLINE_EXCEEDED`` heartbeats) are the error catalog's, caught as fatal lines by the follow
loops; this module answers for the silence.
"""

from __future__ import annotations

import math
import statistics
from collections import deque
from dataclasses import dataclass, field
from enum import StrEnum

DEFAULT_K = 5.0
DEFAULT_FIRST_STEP_DEADLINE_S = 1800.0
"""30 minutes: without history, the first step (compiling) gets this long."""
DEFAULT_MIN_STALL_S = 60.0
STEADY_WINDOW = 20
"""The steady step time is the median of at most this many recent step times."""


class HangKind(StrEnum):
    NO_FIRST_STEP = "no-first-step"
    STALLED = "stalled"


@dataclass(frozen=True, slots=True)
class WatchdogSettings:
    k: float = DEFAULT_K
    first_step_deadline_s: float = DEFAULT_FIRST_STEP_DEADLINE_S
    deadline_source: str = "default (30 min)"
    """Where the start-up deadline came from, for the message."""
    min_stall_s: float = DEFAULT_MIN_STALL_S


@dataclass(frozen=True, slots=True)
class Hang:
    kind: HangKind
    last_step: int | None
    quiet_host: str
    """The host that went quiet first (its last line is the oldest)."""
    since: float
    """When the last progress was seen (the clock's time)."""
    decided: float
    """When the watchdog decided (the clock's time)."""
    limit_s: float
    message: str

    @property
    def quiet_s(self) -> float:
        return self.decided - self.since


@dataclass
class Watchdog:
    """Fed events as they happen; :meth:`check` answers None (making progress) or a
    :class:`Hang`."""

    settings: WatchdogSettings
    started: float
    """When the follow began (the pods run): the start-up deadline counts from here."""
    last_step: int | None = None
    last_step_at: float | None = None
    first_step_at: float | None = None
    _step_times: deque[float] = field(default_factory=lambda: deque(maxlen=STEADY_WINDOW))
    _last_line: dict[str, float] = field(default_factory=dict)
    _step_at_line: dict[str, int | None] = field(default_factory=dict)
    """The last step seen when each host last logged."""
    _own_step: dict[str, int] = field(default_factory=dict)
    """The last step each host reported itself (hosts that print step lines)."""
    _steps_seen: int = 0

    def line(self, now: float, host: str) -> None:
        """``host`` logged something at ``now``."""
        self._last_line[host] = now
        self._step_at_line[host] = self._own_step.get(host, self.last_step)

    def step(self, now: float, host: str, step: int, seconds: float | None = None) -> None:
        """``host`` reported step ``step`` at ``now``; ``seconds`` is the step time the log
        gives (else the time since the previous step is used)."""
        self.line(now, host)
        self._own_step[host] = max(step, self._own_step.get(host, step))
        self._step_at_line[host] = self._own_step[host]
        if self.last_step is not None and step <= self.last_step:
            return
        if self._steps_seen and self.last_step_at is not None:
            took = (
                seconds if seconds is not None and math.isfinite(seconds) and seconds > 0 else None
            )
            self._step_times.append(took if took is not None else max(0.0, now - self.last_step_at))
        elif self.first_step_at is None:
            self.first_step_at = now
        self._steps_seen += 1
        self.last_step, self.last_step_at = step, now
        self._step_at_line[host] = step

    @property
    def steady_step_s(self) -> float | None:
        """The median of the recent step times after the first step; None before there is one."""
        return statistics.median(self._step_times) if self._step_times else None

    def check(self, now: float) -> Hang | None:
        """None while the run makes progress, else the hang."""
        s = self.settings
        if self.last_step is None or self.last_step_at is None:
            if now - self.started < s.first_step_deadline_s:
                return None
            quiet = self._quiet_host()
            return self._hang(
                HangKind.NO_FIRST_STEP,
                now,
                self.started,
                s.first_step_deadline_s,
                f"no first step within {s.first_step_deadline_s:.0f} s "
                f"(start-up deadline: {s.deadline_source}; {quiet} quiet",
                quiet,
            )
        steady = self.steady_step_s
        if steady is None:
            limit, why = s.first_step_deadline_s, f"start-up deadline: {s.deadline_source}"
        else:
            limit = max(s.k * steady, s.min_stall_s)
            why = f"limit {s.k:g} × steady step {steady:.1f} s"
            if limit > s.k * steady:
                why += f", at least {s.min_stall_s:.0f} s"
        if now - self.last_step_at < limit:
            return None
        quiet = self._quiet_host()
        return self._hang(
            HangKind.STALLED,
            now,
            self.last_step_at,
            limit,
            f"hung after step {self.last_step} ({quiet} quiet since {self._since(quiet)}, "
            f"{now - self.last_step_at:.0f} s without a new step; {why}",
            quiet,
        )

    def _quiet_host(self) -> str:
        """The host that went quiet first. Where hosts print their own step lines and one
        stopped at an earlier step than the others, that host (the oldest of those); else the
        host whose last line is the oldest (ties: the first told of), among the hosts that
        still logged once training began (a host that only prints at start-up is not one
        that went quiet)."""
        if not self._last_line:
            return "every host"
        own = self._own_step
        if len(set(own.values())) > 1:
            lowest = min(own.values())
            behind = [h for h in own if own[h] == lowest]
            return min(behind, key=lambda h: self._last_line[h])
        begun = self.first_step_at
        active = {
            h: t for h, t in self._last_line.items() if begun is None or t >= begun
        } or self._last_line
        return min(active, key=lambda h: active[h])

    def _since(self, host: str) -> str:
        step = self._step_at_line.get(host)
        return "the start" if step is None else f"step {step}"

    def _hang(
        self, kind: HangKind, now: float, since: float, limit: float, text: str, quiet: str
    ) -> Hang:
        return Hang(kind, self.last_step, quiet, since, now, limit, text + ")")
