"""A Ray job's log, line by line: whose line it is, and worker 0's lines on their own.

The driver prints every worker's output behind a prefix, coloured::

    \\x1b[36m(RayTrainWorker pid=21663, ip=10.12.3.6)\\x1b[0m completed step: 99, seconds: 1.100, ...

(no ``ip=`` for processes on the driver's node; ``(pid=N)`` for processes Ray has not named;
``[repeated Nx across cluster]`` at the end when log deduplication is on). Ray Train's controller
says which process is worker 0 when it starts the worker group::

    (TrainController pid=2422) - (ip=127.0.0.1, pid=2583) world_rank=0, local_rank=0, node_rank=0

:class:`Worker0Lines` uses that to keep worker 0's lines only (every TPU host prints the same
step lines), without prefixes, each step once (Ray Train copies a worker's ``print`` output to
both its stdout and stderr logs). Pure: no I/O.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PREFIX = re.compile(
    r"^\((?:(?P<actor>[A-Za-z_][\w.:-]*) )?pid=(?P<pid>\d*)(?:, ip=(?P<ip>[^)\s]+))?\)\s?"
)
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\]\s*$")
_RANK = re.compile(r"\(ip=(?P<ip>[^,\s)]+), pid=(?P<pid>\d+)\) world_rank=(?P<rank>\d+)")
_STEP = re.compile(r"completed step: (\d+),")

TRAIN_WORKER = "RayTrainWorker"
STARTED_MARKER = "Started training worker group"
UNSCHEDULABLE_MARKERS = (
    "Failed to reserve TPU head",
    "No available node types can fulfill",
    "cannot be scheduled",
    "Requesting resources",
)
"""Lines that say why training has not started yet (the last one seen is shown)."""
_RECENT = 256
_BUFFER_MAX = 20_000


@dataclass(frozen=True, slots=True)
class RayLine:
    """One line of a Ray job's log, taken apart."""

    text: str
    """The line without colours, Ray's prefix or ``[repeated ...]`` suffix."""
    actor: str | None = None
    """``RayTrainWorker``, ``TrainController``...; None for the driver's own lines."""
    pid: int | None = None
    ip: str | None = None
    """Only for processes on another node than the driver."""
    repeated: int = 0

    @property
    def from_process(self) -> bool:
        """The line came from a Ray process (not the driver itself)."""
        return self.actor is not None or self.pid is not None


def parse_ray_line(raw: str) -> RayLine:
    text = _ANSI.sub("", raw) if "\x1b" in raw else raw
    text = text.rstrip("\r\n")
    repeated = 0
    if "[repeated " in text:
        rep = _REPEATED.search(text)
        if rep is not None:
            repeated, text = int(rep[1]), text[: rep.start()]
    m = _PREFIX.match(text) if text.startswith("(") else None
    if m is None:
        return RayLine(text, repeated=repeated)
    pid = int(m["pid"]) if m["pid"] else None
    return RayLine(text[m.end() :], m["actor"], pid, m["ip"], repeated)


@dataclass(frozen=True, slots=True)
class WorkerId:
    pid: int
    ip: str | None

    def matches(self, line: RayLine) -> bool:
        return line.pid == self.pid and (line.ip is None or self.ip is None or line.ip == self.ip)


def rank_zero(line: RayLine) -> WorkerId | None:
    """Worker 0's process, from the controller's ``world_rank=0`` line."""
    m = _RANK.search(line.text) if "world_rank=" in line.text else None
    if m is None or m["rank"] != "0":
        return None
    return WorkerId(int(m["pid"]), m["ip"])


def step_of(text: str) -> int | None:
    m = _STEP.search(text) if "completed step: " in text else None
    return int(m[1]) if m else None


@dataclass
class Worker0Lines:
    """Feed every line of the job's log; get worker 0's lines back, cleaned, in order.

    Until the controller names worker 0, training workers' lines wait in a buffer; if it never
    does, :meth:`finish` takes the first training worker seen as worker 0.
    """

    worker0: WorkerId | None = None
    _pending: list[RayLine] = field(default_factory=list)
    _steps: set[int] = field(default_factory=set)
    _recent: deque[str] = field(default_factory=lambda: deque(maxlen=_RECENT))

    def feed(self, raw: str) -> list[str]:
        return self.feed_parsed(parse_ray_line(raw))

    def feed_parsed(self, line: RayLine) -> list[str]:
        if self.worker0 is None:
            found = rank_zero(line)
            if found is not None:
                self.worker0 = found
                pending, self._pending = self._pending, []
                return [t for p in pending for t in self._keep(p)]
            if line.actor == TRAIN_WORKER:
                self._pending.append(line)
                if len(self._pending) > _BUFFER_MAX:
                    return self.finish()
            return []
        return self._keep(line)

    def finish(self) -> list[str]:
        """The buffered lines of the first training worker, when worker 0 was never named."""
        if self.worker0 is not None or not self._pending:
            return []
        first = self._pending[0]
        self.worker0 = WorkerId(first.pid or 0, first.ip)
        pending, self._pending = self._pending, []
        return [t for p in pending for t in self._keep(p)]

    def _keep(self, line: RayLine) -> list[str]:
        if self.worker0 is None or line.actor != TRAIN_WORKER or not self.worker0.matches(line):
            return []
        step = step_of(line.text)
        if step is not None:
            if step in self._steps:
                return []
            self._steps.add(step)
        elif line.text in self._recent:
            return []
        self._recent.append(line.text)
        return [line.text]


def training_started(line: RayLine) -> bool:
    """The job got its workers: a training worker spoke, or the controller started them."""
    return line.actor == TRAIN_WORKER or STARTED_MARKER in line.text


def waiting_reason(line: RayLine) -> str | None:
    """The line, when it says why the workers are not there yet."""
    return line.text.strip() if any(m in line.text for m in UNSCHEDULABLE_MARKERS) else None
