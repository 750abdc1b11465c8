"""The scenario's clock as a :class:`~tpu_trainer.infra.poll.Clock`: what a rehearsal's hang
watchdog reads, so that a silence of minutes passes in a fraction of a second.

``now`` is the state file's clock (which the emulated APIs move on as well), read again at
most every ``fresh_s`` real seconds; ``sleep`` moves it on by the seconds asked for and sleeps
only ``real_sleep_s`` for real, which gives the stand-ins (a ``kubectl logs -f`` printing its
lines) time to answer between two looks.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.fakecloud.state import advance, clock, read_state, transaction

REAL_SLEEP_S = 0.02
FRESH_S = 0.02
"""Real seconds a read of the clock is answered again without reading the state file: a
followed log's lines, which arrive together, do not each read the file under its lock (that
made a rehearsal follow about 4 lines a second). No longer than :data:`REAL_SLEEP_S`, so a
read is at most one ``sleep`` behind."""


@dataclass(frozen=True)
class ScenarioClock:
    state_path: Path
    real_sleep_s: float = REAL_SLEEP_S
    fresh_s: float = FRESH_S
    _seen: list[tuple[float, float]] = field(
        default_factory=lambda: [(-math.inf, 0.0)], compare=False, repr=False
    )
    """When (``time.monotonic``) the clock was last read or set, and what it said."""

    def now(self) -> float:
        read_at, value = self._seen[0]
        if time.monotonic() - read_at < self.fresh_s:
            return value
        value = clock(read_state(self.state_path))
        self._seen[0] = (time.monotonic(), value)
        return value

    def sleep(self, seconds: float) -> None:
        time.sleep(self.real_sleep_s)
        with transaction(self.state_path) as state:
            value = advance(state, seconds)
        self._seen[0] = (time.monotonic(), value)
