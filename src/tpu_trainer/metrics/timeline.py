"""Where a run's time and TPU-hours went: its phases, from the tool's own recorded times.

A pure computation over store rows (:class:`RunClock`). The boundaries, in order:

- **request**: the run was created;
- **capacity found**: the first create call for a TPU resource that was not refused (node pool,
  TPU VM, queued resource, RayCluster);
- **ready**: the ``provision`` stage finished (pools RUNNING, the TPU VM READY, the RayCluster
  applied);
- **workload started**: the training stage (``follow`` or ``train``) began;
- **first step**, **first step done**, **last step done**: the log's steps carry durations, not
  clock times, so they are laid back from the end of the training stage; step durations that
  add up to more than the stage (a rehearsal's log) are scaled into it, and a note says so;
- **teardown began**: the last stage finished;
- **teardown done**: the last resource delete confirmed, or the run's end.

A boundary that was never recorded is skipped: its phase merges into the next one. Chips are
held from *ready* to *teardown done*; a phase's chip-hours are the chips × its time inside that
span.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

TPU_KINDS = frozenset({"nodepool", "tpu-vm", "queued-resource", "raycluster"})
"""Resource kinds whose creation means TPU capacity was found."""
TRAINING_STAGES = ("follow", "train")
"""The stage in which a launch path runs the training program."""
_REFUSED = frozenset({"absent"})


class PhaseName(StrEnum):
    CAPACITY = "capacity"
    """Request → capacity found: finding a reservation with room."""
    PROVISIONING = "provisioning"
    """Capacity found → TPUs ready: node pools, TPU VM or RayCluster being made."""
    SETUP = "setup"
    """Ready → workload started: Kueue, scripts, submit, installs, runtime."""
    STARTUP = "startup"
    """Workload started → first step: scheduling, pods starting, the program loading."""
    COMPILE = "compile"
    """The first step: compilation."""
    TRAINING = "training"
    """The productive steps."""
    WIND_DOWN = "wind-down"
    """Last step → teardown: collecting the log, metrics and the report."""
    TEARDOWN = "teardown"
    """Deleting what the run made, until the last delete is confirmed."""


PRODUCTIVE = frozenset({PhaseName.TRAINING})


@dataclass(frozen=True, slots=True)
class StageSpan:
    name: str
    status: str
    started: float
    finished: float | None


@dataclass(frozen=True, slots=True)
class ResourceSpan:
    kind: str
    state: str
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunClock:
    """What the store recorded about a run's times."""

    created_at: float
    finished_at: float | None
    stages: Sequence[StageSpan] = ()
    resources: Sequence[ResourceSpan] = ()
    step_seconds: Sequence[float] = ()
    """Each step's duration, in step order."""
    chips: int = 0
    """TPU chips the run holds (chips per slice × slices; 0 on this machine's CPU)."""


@dataclass(frozen=True, slots=True)
class Phase:
    name: PhaseName
    start: float
    end: float
    chip_seconds: float

    @property
    def seconds(self) -> float:
        return self.end - self.start

    @property
    def chip_hours(self) -> float:
        return self.chip_seconds / 3600.0


@dataclass(frozen=True, slots=True)
class Timeline:
    phases: tuple[Phase, ...]
    chips: int
    held: tuple[float, float] | None
    """When chips were held (ready → teardown done), if they were."""
    notes: tuple[str, ...] = field(default=())

    @property
    def wall_seconds(self) -> float:
        return self.phases[-1].end - self.phases[0].start if self.phases else 0.0

    @property
    def chip_hours(self) -> float:
        return sum(p.chip_hours for p in self.phases)

    @property
    def productive_seconds(self) -> float:
        return sum(p.seconds for p in self.phases if p.name in PRODUCTIVE)

    @property
    def goodput(self) -> float | None:
        """Productive step time ÷ wall time."""
        wall = self.wall_seconds
        return self.productive_seconds / wall if wall > 0 else None

    @property
    def largest_badput(self) -> Phase | None:
        """The longest phase that is not productive training."""
        bad = [p for p in self.phases if p.name not in PRODUCTIVE and p.seconds > 0]
        return max(bad, key=lambda p: p.seconds) if bad else None

    def phase(self, name: PhaseName) -> Phase | None:
        return next((p for p in self.phases if p.name is name), None)


def timeline(clock: RunClock) -> Timeline:
    """The run's phases (see the module's docstring for the boundaries)."""
    notes: list[str] = []
    stages = {s.name: s for s in clock.stages}
    train = next((stages[n] for n in TRAINING_STAGES if n in stages), None)
    steps = _step_marks(train, clock.step_seconds, notes)
    finished = [s.finished for s in clock.stages if s.finished is not None]
    done = _done(clock)
    provision = stages.get("provision")
    ready = provision.finished if provision is not None and provision.status == "ok" else None
    ends: list[tuple[PhaseName, float | None]] = [
        (PhaseName.CAPACITY, _capacity_found(clock)),
        (PhaseName.PROVISIONING, ready),
        (PhaseName.SETUP, train.started if train is not None else None),
        (PhaseName.STARTUP, steps[0]),
        (PhaseName.COMPILE, steps[1]),
        (PhaseName.TRAINING, steps[2]),
        (PhaseName.WIND_DOWN, max(finished) if finished else None),
        (PhaseName.TEARDOWN, done),
    ]
    held = (ready, done) if ready is not None and done is not None and clock.chips > 0 else None
    phases: list[Phase] = []
    start = clock.created_at
    for name, mark in ends:
        if mark is None:
            continue
        end = max(mark, start)
        if end > start:
            phases.append(Phase(name, start, end, clock.chips * _overlap(start, end, held)))
        start = end
    return Timeline(tuple(phases), clock.chips, held, tuple(notes))


def _capacity_found(clock: RunClock) -> float | None:
    made = [
        r.created_at for r in clock.resources if r.kind in TPU_KINDS and r.state not in _REFUSED
    ]
    return min(made) if made else None


def _done(clock: RunClock) -> float | None:
    deleted = [r.updated_at for r in clock.resources if r.state == "deleted"]
    known = [t for t in (clock.finished_at, *deleted) if t is not None]
    return max(known) if known else None


def _step_marks(
    train: StageSpan | None, step_seconds: Sequence[float], notes: list[str]
) -> tuple[float | None, float | None, float | None]:
    """First step's start, its end and the last step's end, laid back from the end of the
    training stage."""
    if train is None or train.finished is None:
        return None, None, None
    window = train.finished - train.started
    total = sum(max(0.0, s) for s in step_seconds)
    if total <= 0:
        return train.finished, None, None
    scale = 1.0
    if total > window:
        scale = window / total if window > 0 else 0.0
        notes.append(
            f"the log's step times add up to {total:.1f} s, more than the training stage's "
            f"{window:.1f} s: scaled into it"
        )
    first = train.finished - total * scale
    return first, first + max(0.0, step_seconds[0]) * scale, train.finished


def _overlap(start: float, end: float, held: tuple[float, float] | None) -> float:
    if held is None:
        return 0.0
    return max(0.0, min(end, held[1]) - max(start, held[0]))
