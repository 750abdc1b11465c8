"""The watchdog in a follow loop: log lines fed as they arrive, a ticker thread that asks it on
the run's clock, and its settings from the configuration and the run store's history.

A follow loop makes one :class:`LogWatch`, feeds it every line (:meth:`LogWatch.feed`), and
runs :meth:`LogWatch.watch` in a thread beside its stream: on a hang it sets the loop's cancel
event (the stream stops at once) and keeps the :class:`~tpu_trainer.app.watchdog.Hang`. Hosts
whose logs are not streamed but looked at now and then (the last lines of another pod's log)
are fed through :meth:`LogWatch.feed_tail`, which passes on the lines not seen at the previous
look, each at the time its log says it was written (``kubectl logs --timestamps``), so a host's
silence is measured from its own last line, not from when the tool happened to read it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tpu_trainer.app.watchdog import (
    DEFAULT_FIRST_STEP_DEADLINE_S,
    DEFAULT_K,
    Hang,
    Watchdog,
    WatchdogSettings,
)
from tpu_trainer.frameworks.maxtext.log import parse_completed
from tpu_trainer.infra.kubectl import split_timestamp
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock
from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.plan.plan import Plan
from tpu_trainer.store.db import RunStore

TICK_S = 5.0
"""How often (on the run's clock) the watchdog is asked: a hang is seen at most this late."""
COMPILE_FACTOR = 3.0
"""The start-up deadline from history: the longest first step seen × this."""
HISTORY_RUNS = 5
_STEP_WORD = "completed "


def maxtext_step(line: str) -> StepRecord | None:
    """A MaxText ``completed step:`` line's step (one substring search for other lines)."""
    event = parse_completed(line) if _STEP_WORD in line else None
    return event if isinstance(event, StepRecord) else None


@dataclass
class LogWatch:
    settings: WatchdogSettings
    clock: Clock = SYSTEM_CLOCK
    tick_s: float = TICK_S
    parse: Callable[[str], StepRecord | None] = maxtext_step
    """The program's step lines (MaxText's unless told otherwise)."""
    confirm: Callable[[], None] | None = None
    """Called when the watchdog sees a hang, before it decides: a fresh look at the hosts
    whose logs are not streamed (their new lines fed through :meth:`feed_tail`), so the
    verdict, and the host it names, rest on every host's latest lines."""
    hang: Hang | None = None
    dog: Watchdog = field(init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _tails: dict[str, str] = field(default_factory=dict)
    """The last line of each host's log at the previous look."""

    def __post_init__(self) -> None:
        self.dog = Watchdog(self.settings, self.clock.now())

    def feed(self, host: str, line: str, at: float | None = None) -> None:
        """One line of ``host``'s log, written at ``at`` (the clock's time; now when the
        log does not say)."""
        now = self.clock.now() if at is None else at
        event = self.parse(line)
        with self._lock:
            if event is not None:
                self.dog.step(now, host, event.step, event.seconds)
            else:
                self.dog.line(now, host)

    def feed_tail(self, host: str, lines: Sequence[str]) -> None:
        """The last lines of ``host``'s log as read now, each behind the time it was written
        when the log gives it (``kubectl logs --timestamps``): those after the previous look's
        last line (all of them when it is no longer among them) are fed, at their own time
        (now for a line without one)."""
        if not lines:
            return
        new = lines_after(self._tails.get(host), lines)
        self._tails[host] = lines[-1]
        for line in new:
            at, text = split_timestamp(line)
            self.feed(host, text, at)

    def check(self) -> Hang | None:
        with self._lock:
            return self.dog.check(self.clock.now())

    def watch(self, cancel: threading.Event, done: threading.Event) -> None:
        """Until ``done``: ask every ``tick_s``; on a hang keep it and set ``cancel``."""
        while not done.is_set() and not cancel.is_set():
            self.clock.sleep(self.tick_s)
            if done.is_set() or cancel.is_set():
                return
            found = self.check()
            if found is not None and self.confirm is not None:
                self.confirm()
                found = self.check()
            if found is not None:
                self.hang = found
                cancel.set()
                return

    def start(self, cancel: threading.Event, done: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.watch, args=(cancel, done), daemon=True)
        thread.start()
        return thread


def lines_after(last: str | None, lines: Sequence[str]) -> Sequence[str]:
    """The lines after the last occurrence of ``last`` (all of them when it is not there)."""
    if last is None:
        return lines
    for at in range(len(lines) - 1, -1, -1):
        if lines[at] == last:
            return lines[at + 1 :]
    return lines


def watchdog_settings(
    store: RunStore | None,
    model: str,
    device_type: str,
    *,
    k: float | None = None,
    first_step_deadline_s: float | None = None,
) -> WatchdogSettings:
    """The settings for a run of ``model`` on ``device_type``: ``k`` and the start-up deadline
    as configured, else the deadline from the store's history (the longest first step of this
    model's last runs on this slice × :data:`COMPILE_FACTOR`), else the default."""
    k = DEFAULT_K if k is None else k
    if first_step_deadline_s is not None:
        return WatchdogSettings(k, first_step_deadline_s, "configured")
    seen = _compile_seconds(store, model, device_type) if store is not None else None
    if seen is None:
        return WatchdogSettings(k, DEFAULT_FIRST_STEP_DEADLINE_S)
    deadline = max(seen * COMPILE_FACTOR, 300.0)
    source = f"{COMPILE_FACTOR:g} × first step {seen:.0f} s seen for {model} on {device_type}"
    return WatchdogSettings(k, deadline, source)


def plan_watchdog(
    store: RunStore | None, plan: Plan, device_type: str | None = None
) -> WatchdogSettings:
    """:func:`watchdog_settings` for a run of ``plan`` (on ``device_type`` when it runs on
    another slice than the plan's, e.g. this machine's CPU), as its configuration says."""
    return watchdog_settings(
        store,
        plan.model,
        device_type or plan.slice.device_type,
        k=plan.config.watchdog_k,
        first_step_deadline_s=plan.config.first_step_deadline,
    )


def _compile_seconds(store: RunStore, model: str, device_type: str) -> float | None:
    """The longest first step (compile included) of the latest runs of this model and slice."""
    seen: list[float] = []
    for row in store.runs(limit=1000):
        if (row.model, row.device_type) != (model, device_type) or row.mode is not store.mode:
            continue
        first = next(iter(store.iter_step_rows(row.id)), None)
        if first is not None and first.seconds > 0:
            seen.append(first.seconds)
        if len(seen) == HISTORY_RUNS:
            break
    return max(seen) if seen else None
