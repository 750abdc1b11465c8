"""Stage bookkeeping shared by every launcher: the store's record and the user's display."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.store.db import RunStore


@dataclass
class Stages:
    store: RunStore
    display: Display
    run_id: str
    started: float = field(default_factory=time.monotonic)

    def start(self, name: str) -> None:
        self.store.stage_started(self.run_id, name)
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        self.display.info(f"[{name}] {minutes}m{seconds:02d}s")

    def done(self, name: str, status: str = "ok", detail: str = "") -> None:
        self.store.stage_finished(self.run_id, name, status, detail)
