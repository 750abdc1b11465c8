"""Following the workers of a TPU VM while a command runs on all of them.

``gcloud ... tpu-vm ssh --worker=all --output-directory=DIR`` writes worker N's output to
``DIR/N.log`` as it arrives. :class:`WorkerLogTail` reads those files line by line from a
thread; the run shows worker 0's steps, keeps worker 0's log, and scans every worker's lines
for known fatal errors (one fatal line on any worker stops the run at once).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.live_steps import LiveSteps
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.frameworks.hf import log as hf_transformers
from tpu_trainer.frameworks.maxtext import log as maxtext_log
from tpu_trainer.frameworks.tunix import program as tunix
from tpu_trainer.frameworks.vm_program import LogFormat
from tpu_trainer.metrics.records import ParsedLog, StepRecord
from tpu_trainer.plan.diagnose import LiveScanner, Match

LogReader = Callable[[Iterable[str]], ParsedLog]
StepParser = Callable[[str], StepRecord | None]
_PACE_STEPS = 6
"""Step times the pace shown is measured over."""


def _maxtext_step(line: str) -> StepRecord | None:
    event = maxtext_log.parse_line(line)
    return event if isinstance(event, StepRecord) else None


READERS: Mapping[LogFormat, LogReader] = {
    LogFormat.MAXTEXT: maxtext_log.read_log,
    LogFormat.TUNIX: tunix.read_log,
    LogFormat.HF_TRANSFORMERS: hf_transformers.read_log,
}
STEP_PARSERS: Mapping[LogFormat, StepParser] = {
    LogFormat.MAXTEXT: _maxtext_step,
    LogFormat.TUNIX: tunix.parse_step,
    LogFormat.HF_TRANSFORMERS: hf_transformers.parse_step,
}


class WorkerLogTail:
    """Calls ``on_line(worker, line)`` for each complete line the workers' log files gain."""

    def __init__(
        self,
        folder: Path,
        workers: int,
        on_line: Callable[[int, str], None],
        poll_seconds: float = 0.2,
    ) -> None:
        self.folder, self.workers, self.on_line, self.poll = folder, workers, on_line, poll_seconds
        self._offsets = [0] * workers
        self._partial = [""] * workers
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop following, then read what is left (a last line without a newline too)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self._read_all()
        for worker, rest in enumerate(self._partial):
            if rest:
                self._partial[worker] = ""
                self.on_line(worker, rest)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._read_all()
            self._stop.wait(self.poll)

    def _read_all(self) -> None:
        for worker in range(self.workers):
            path = self.folder / f"{worker}.log"
            try:
                with path.open("rb") as f:
                    f.seek(self._offsets[worker])
                    data = f.read()
            except FileNotFoundError:
                continue
            if not data:
                continue
            self._offsets[worker] += len(data)
            text = self._partial[worker] + data.decode("utf-8", errors="replace")
            *lines, self._partial[worker] = text.split("\n")
            for line in lines:
                self.on_line(worker, line.rstrip("\r"))


@dataclass
class TrainFollower:
    """What the run does with each worker line while training runs."""

    display: Display
    log_format: LogFormat
    worker0_log: Path
    redact: Callable[[str], str]
    cancel: threading.Event
    fatal: list[tuple[int, Match]] = field(default_factory=list)
    lines: int = 0
    watch: LogWatch | None = None
    """The hang watchdog, fed every worker's lines (it names the worker that went quiet)."""
    live: LiveSteps | None = None
    """Where worker 0's steps go while the run streams (the store, in batches)."""
    on_worker0: Callable[[str], None] | None = None
    """Each of worker 0's lines (a resumed run's segment notes its first step)."""
    held: int = 0
    """Worker 0's first lines that its log already holds (a program followed again from its
    first line after the process that followed it died): scanned and watched, not kept or
    shown again."""
    _scanners: dict[int, LiveScanner] = field(default_factory=dict)
    _times: deque[float] = field(default_factory=lambda: deque(maxlen=_PACE_STEPS))
    """When the last few steps were seen (the pace shown); bounded however long the run."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.worker0_log.parent.mkdir(parents=True, exist_ok=True)
        # appended to: each segment of a resumed run adds its lines to the same log
        self._log = self.worker0_log.open("a", encoding="utf-8")

    def close(self) -> None:
        self._log.close()
        if self.live is not None:
            self.live.flush()

    def __call__(self, worker: int, line: str) -> None:
        with self._lock:
            if worker == 0:
                self.lines += 1
            if worker == 0 and self.lines > self.held:
                self._log.write(self.redact(line) + "\n")
                self._log.flush()
                self._show_step(line)
                if self.on_worker0 is not None:
                    self.on_worker0(line)
            self._watched(worker, line)
            scanner = self._scanners.get(worker)
            if scanner is None:  # made once per worker: building one reads the error catalog
                scanner = self._scanners[worker] = LiveScanner()
            scanner.feed(line)
            if not self.fatal and scanner.fatal:
                self.fatal.append((worker, scanner.fatal[0]))
                self.cancel.set()

    def _watched(self, worker: int, line: str) -> None:
        if self.watch is not None:
            self.watch.feed(f"worker {worker}", line)

    def start_watchdog(self, done: threading.Event) -> None:
        """The hang watchdog beside the workers' logs: a hang sets ``cancel`` like a fatal
        line, until ``done``."""
        if self.watch is not None:
            self.watch.start(self.cancel, done)

    def _show_step(self, line: str) -> None:
        step = STEP_PARSERS[self.log_format](line)
        if step is None:
            return
        if self.live is not None:
            self.live.add(step)
        self._times.append(time.monotonic())
        recent = self._times
        span = recent[-1] - recent[0]
        pace = f", {(len(recent) - 1) / span:.2f} steps/s" if len(recent) > 1 and span > 0 else ""
        loss = f", loss {step.loss:.6g}" if step.loss is not None else ""
        self.display.info(f"step {step.step}: {step.seconds:.2f} s{loss}{pace}")
