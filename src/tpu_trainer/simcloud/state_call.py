"""One call of an emulated API over a rehearsal's state file.

Each call runs inside the state file's ``transaction`` (so the ``train`` process, a later
``cleanup``/``gc`` and the stand-ins see one cloud) and first moves the scenario's clock
(``fakecloud.state.clock``) on by :data:`TICK`. GKE and Compute go through here; Cloud TPU
(``tpu.py``) keeps its own part of the state and its own tick (``tpu_state.TICK_SECONDS``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tpu_trainer.fakecloud.state import State, advance, transaction

TICK = 1.0
"""Seconds of the scenario's clock one GKE or Compute call takes."""


@contextmanager
def state_call(path: Path, lock: threading.Lock) -> Iterator[State]:
    """The state for one call (saved when the block ends, even when it raises), a tick on."""
    with lock, transaction(path) as state:
        advance(state, TICK)
        yield state
