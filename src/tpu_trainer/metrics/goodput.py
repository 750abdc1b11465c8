"""Goodput and badput of a run, by ml-goodput-measurement's definitions, computed offline.

Goodput is productive step time ÷ wall time. Wall time runs from the request to the last
delete (:mod:`metrics.timeline`); every second of it lands in exactly one bucket:

- ``PRODUCTIVE``: the steps after the first, less what the log says went elsewhere;
- the tool's own buckets before the program starts: ``CAPACITY_HUNTING`` (finding a
  reservation with room), ``PROVISIONING`` (node pools, TPU VM or RayCluster being made),
  ``SCHEDULING_AND_IMAGE_PULL`` (Kueue, submit, pods scheduled and their image pulled, up to
  the program's first log line) on the paths that schedule pods (GKE, KubeRay), and
  ``ENVIRONMENT_SETUP`` in its place on those that do not (a TPU VM's installs and the
  interpreter loading the program there, or on this machine);
- ml-goodput-measurement's ``BadputType`` buckets: ``TPU_INITIALIZATION`` and
  ``TRAINING_PREP`` (the program's own start-up before the first step; all of it is
  ``TRAINING_PREP`` unless the log measured device initialisation),
  ``UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME`` (out of the start-up), ``PROGRAM_STARTUP`` (the first
  step: tracing and compilation), ``DATA_LOADING_SYNC``,
  ``UNPRODUCTIVE_CHECKPOINT_SAVE_TIME`` and ``WASTED_PROGRESS_FROM_DISRUPTION`` (steps run again
  after a restart; all three out of the step time), and ``OTHER`` (collecting, reporting,
  teardown, and what no boundary explains).

Pure: the timeline and the seconds the log measured (:class:`LogBadput`) in, buckets out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.metrics.timeline import PhaseName, Timeline


class Bucket(StrEnum):
    """Where a run's seconds went (ml-goodput-measurement's ``BadputType`` names, and the
    tool's own before the program starts)."""

    CAPACITY_HUNTING = "CAPACITY_HUNTING"
    PROVISIONING = "PROVISIONING"
    SCHEDULING_AND_IMAGE_PULL = "SCHEDULING_AND_IMAGE_PULL"
    ENVIRONMENT_SETUP = "ENVIRONMENT_SETUP"
    TPU_INITIALIZATION = "TPU_INITIALIZATION"
    TRAINING_PREP = "TRAINING_PREP"
    PROGRAM_STARTUP = "PROGRAM_STARTUP"
    DATA_LOADING_SYNC = "DATA_LOADING_SYNC"
    UNPRODUCTIVE_CHECKPOINT_SAVE_TIME = "UNPRODUCTIVE_CHECKPOINT_SAVE_TIME"
    UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME = "UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME"
    WASTED_PROGRESS_FROM_DISRUPTION = "WASTED_PROGRESS_FROM_DISRUPTION"
    OTHER = "OTHER"


TOOL_BUCKETS = frozenset(
    {
        Bucket.CAPACITY_HUNTING,
        Bucket.PROVISIONING,
        Bucket.SCHEDULING_AND_IMAGE_PULL,
        Bucket.ENVIRONMENT_SETUP,
    }
)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogBadput:
    """Seconds the training log measured; None where it says nothing."""

    program_startup: float | None = None
    """The program's first log line → the first step starting (its own start-up)."""
    tpu_initialization: float | None = None
    """Devices and the distributed system starting, inside the program's start-up."""
    checkpoint_restore: float | None = None
    """Checkpoint restores, inside the program's start-up (each segment's)."""
    data_loading: float | None = None
    """Training waiting for its input batches, inside the steps."""
    checkpoint_save: float | None = None
    """The blocking part of checkpoint saves, inside the steps."""
    wasted_steps: float | None = None
    """Step time lost to an interruption: the steps after the last durable checkpoint,
    run again by the resumed segment."""


@dataclass(frozen=True, slots=True)
class Goodput:
    wall_seconds: float
    productive_seconds: float
    badput: dict[Bucket, float]
    """Seconds per bucket, every bucket present (0 when none)."""

    @property
    def goodput(self) -> float | None:
        """Productive step time ÷ wall time (None before anything was recorded)."""
        wall = self.wall_seconds
        return self.productive_seconds / wall if wall > 0 else None

    @property
    def largest(self) -> tuple[Bucket, float] | None:
        """The bucket that took the most time (None when nothing was lost)."""
        worst = max(self.badput.items(), key=lambda kv: kv[1], default=None)
        return worst if worst is not None and worst[1] > 0 else None

    def share(self, bucket: Bucket) -> float:
        wall = self.wall_seconds
        return self.badput[bucket] / wall if wall > 0 else 0.0


def _take(pool: float, want: float | None) -> tuple[float, float]:
    """``want`` seconds out of ``pool`` (never more than it holds): taken, left."""
    taken = min(pool, max(0.0, want or 0.0))
    return taken, pool - taken


def _program_startup(log: LogBadput) -> float | None:
    """The program's own start-up: what the log measured from its first line to the first
    step, and never less than the TPU initialisation and restores it measured inside it (a
    resumed run starts up again)."""
    parts = (log.tpu_initialization or 0.0) + (log.checkpoint_restore or 0.0)
    if log.program_startup is None and not parts:
        return None
    return max(log.program_startup or 0.0, parts)


def goodput(line: Timeline, log: LogBadput = LogBadput(), *, scheduled: bool = True) -> Goodput:
    """The run's buckets (see the module's docstring); ``scheduled``: the launch path
    schedules pods (its wait before the program is ``SCHEDULING_AND_IMAGE_PULL``, else
    ``ENVIRONMENT_SETUP``)."""
    seconds = dict.fromkeys(PhaseName, 0.0)
    for phase in line.phases:
        seconds[phase.name] += phase.seconds
    bad = dict.fromkeys(Bucket, 0.0)
    bad[Bucket.CAPACITY_HUNTING] = seconds[PhaseName.CAPACITY]
    bad[Bucket.PROVISIONING] = seconds[PhaseName.PROVISIONING]
    startup = seconds[PhaseName.STARTUP]
    program, _ = _take(startup, _program_startup(log))
    before = Bucket.SCHEDULING_AND_IMAGE_PULL if scheduled else Bucket.ENVIRONMENT_SETUP
    bad[before] = seconds[PhaseName.SETUP] + startup - program
    bad[Bucket.TPU_INITIALIZATION], program = _take(program, log.tpu_initialization)
    bad[Bucket.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME], program = _take(
        program, log.checkpoint_restore
    )
    bad[Bucket.TRAINING_PREP] = program
    bad[Bucket.PROGRAM_STARTUP] = seconds[PhaseName.COMPILE]
    steps = seconds[PhaseName.TRAINING]
    bad[Bucket.DATA_LOADING_SYNC], steps = _take(steps, log.data_loading)
    bad[Bucket.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME], steps = _take(steps, log.checkpoint_save)
    bad[Bucket.WASTED_PROGRESS_FROM_DISRUPTION], steps = _take(steps, log.wasted_steps)
    bad[Bucket.OTHER] = seconds[PhaseName.WIND_DOWN] + seconds[PhaseName.TEARDOWN]
    return Goodput(line.wall_seconds, steps, bad)
