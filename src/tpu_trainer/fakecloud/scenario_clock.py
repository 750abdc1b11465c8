"""The scenario's clock as a :class:`~tpu_trainer.infra.poll.Clock`: what a rehearsal's hang
watchdog reads, so that a silence of minutes passes in a fraction of a second.

``now`` is the state file's clock (which the emulated APIs move on as well); ``sleep`` moves it
on by the seconds asked for and sleeps only ``real_sleep_s`` for real, which gives the stand-ins
(a ``kubectl logs -f`` printing its lines) time to answer between two looks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.fakecloud.state import advance, clock, read_state, transaction

REAL_SLEEP_S = 0.02


@dataclass(frozen=True)
class ScenarioClock:
    state_path: Path
    real_sleep_s: float = REAL_SLEEP_S

    def now(self) -> float:
        return clock(read_state(self.state_path))

    def sleep(self, seconds: float) -> None:
        time.sleep(self.real_sleep_s)
        with transaction(self.state_path) as state:
            advance(state, seconds)
