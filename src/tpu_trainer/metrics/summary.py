"""Per-chip training metrics from MaxText's per-step, per-device figures.

MaxText reports TFLOP/s and Tokens/s per JAX device; a chip holds ``jax_devices_per_chip``
of them (2 on TPU v7, 1 elsewhere), so per-chip figures multiply by that. Steady state is the
mean over steps ``first_steady`` (2) onwards, leaving out the profiler window, batch-size
rampup steps, lines without throughput, and outliers (step time more than ``outlier_factor``
times the median of the candidates, or less than its inverse: MaxText's asynchronous metrics
give a near-zero step now and then, and a data-loader stall gives a long one). Every step
left out says why.

Cross-check: Tokens/s/chip should equal ``total_weights / step seconds / chips``;
``total_weights`` counts the global batch's non-padding tokens, so a lower figure than
MaxText's Tokens/s means padding, and a wildly different one means the wrong slice.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from itertools import groupby
from typing import Any

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.metrics.records import StartupSummary, StepRecord, elapsed
from tpu_trainer.plan.slices import Slice
from tpu_trainer.store.steps import StepRow

MISMATCH_LIMIT = 0.05
"""Relative difference above which the tokens cross-check is flagged."""
OUTLIER_FACTOR = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class _Window:
    """What decides whether a step can be steady."""

    first_steady: int
    profiler: range
    has_tflops: bool = True
    """Whether the log reports TFLOP/s at all (MaxText does; Tunix and Transformers do not)."""


# (test, reason) in order: the first test that holds excludes the step with its reason.
_EARLY = {0: "step 0: JIT compilation", 1: "step 1: warm-up"}
_Test = Callable[[StepRecord, _Window], bool]
_Reason = Callable[[StepRecord, _Window], str]
_RULES: tuple[tuple[_Test, _Reason], ...] = (
    (
        lambda s, w: s.step < w.first_steady,
        lambda s, w: _EARLY.get(s.step, f"before step {w.first_steady}"),
    ),
    (lambda s, _: s.rampup, lambda _s, _: "batch-size rampup (no throughput figures)"),
    (
        lambda s, w: s.step in w.profiler,
        lambda _s, w: (
            f"profiler window, steps {w.profiler.start}-{w.profiler.stop - 1} "
            "(tracing slows steps ~3x)"
        ),
    ),
    (
        lambda s, w: w.has_tflops and s.tflops_per_device is None,
        lambda _s, _: "no TFLOP/s in the line",
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TokensCheck:
    """Tokens/s/chip as MaxText reports it, against ``total_weights / seconds / chips``."""

    reported_per_chip: float
    from_total_weights_per_chip: float
    difference_percent: float
    """(reported - from total_weights) / from total_weights, in percent."""
    mismatch: bool

    @property
    def message(self) -> str:
        head = (
            f"Tokens/s/chip {self.reported_per_chip:,.1f} vs total_weights/step/chips "
            f"{self.from_total_weights_per_chip:,.1f} ({self.difference_percent:+.1f} %)"
        )
        if not self.mismatch:
            return f"{head}: consistent"
        return (
            f"{head}: differ by more than {MISMATCH_LIMIT:.0%}; padding lowers total_weights, "
            "a wrong --slice changes the chip count"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LossChange:
    """Loss at the first and last steps that logged one."""

    first_step: int
    first: float
    last_step: int
    last: float
    drop_percent: float


@dataclass(frozen=True, slots=True, kw_only=True)
class RunMetrics:
    """Everything :func:`summarize` found; the steady-state fields are None without one."""

    device_type: str
    chips: int
    jax_devices_per_chip: int
    precision: Precision
    peak_tflops_per_chip: float
    rows: tuple[StepRow, ...]
    steady_steps: tuple[int, ...]
    steps_completed: int
    """Highest step seen + 1 (steps are 0-based), hidden steps included."""
    step_seconds: float | None
    tflops_per_device: float | None
    tflops_per_chip: float | None
    tokens_per_device: float | None
    tokens_per_chip: float | None
    tokens_check: TokensCheck | None
    mfu: float | None
    """TFLOP/s/chip / peak TFLOP/s/chip for the precision, as a fraction."""
    loss: LossChange | None
    first_step_seconds: float | None
    """Step 0's time: on TPU it includes the JIT compile."""
    startup_seconds: float | None
    """From the first timestamped line to step 0's line (imports, config, compile)."""
    startup: StartupSummary | None
    notes: tuple[str, ...]

    @property
    def has_steady_state(self) -> bool:
        return bool(self.steady_steps)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (floats as computed; the CLI rounds for display only)."""
        check = self.tokens_check
        return {
            "slice": self.device_type,
            "chips": self.chips,
            "jax_devices_per_chip": self.jax_devices_per_chip,
            "precision": str(self.precision),
            "peak_tflops_per_chip": self.peak_tflops_per_chip,
            "steps_completed": self.steps_completed,
            "steady_steps": list(self.steady_steps),
            "excluded_steps": {str(r.step): r.excluded for r in self.rows if r.excluded},
            "step_seconds": self.step_seconds,
            "tflops_per_device": self.tflops_per_device,
            "tflops_per_chip": self.tflops_per_chip,
            "tokens_per_device": self.tokens_per_device,
            "tokens_per_chip": self.tokens_per_chip,
            "tokens_check": None if check is None else {**asdict(check), "message": check.message},
            "mfu": self.mfu,
            "loss": None if self.loss is None else asdict(self.loss),
            "first_step_seconds": self.first_step_seconds,
            "startup_seconds": self.startup_seconds,
            "startup": None if self.startup is None else self.startup.to_json(),
            "notes": list(self.notes),
            "steps": [{**asdict(r), "steady": r.excluded is None} for r in self.rows],
        }


def summarize(
    steps: Iterable[StepRecord],
    *,
    slice: Slice,
    precision: Precision,
    profiler_skip: int | None,
    profiler_steps: int | None,
    first_steady: int = 2,
    outlier_factor: float | None = OUTLIER_FACTOR,
    hidden_steps: Sequence[int] = (),
    startup: StartupSummary | None = None,
) -> RunMetrics:
    """Steady-state, per-chip metrics of a run from its step lines (no steps: no steady state).

    Steps repeated in the log (several workers, Ray without dedup) count once, first line wins.
    """
    found = _unique(steps)
    unique = found.steps
    skip, count = profiler_skip or 0, profiler_steps if profiler_skip is not None else 0
    window = _Window(
        first_steady=first_steady,
        profiler=range(skip, skip + (count or 0)),
        has_tflops=any(s.tflops_per_device is not None for s in unique),
    )
    reasons = _reasons(unique, window, outlier_factor)
    steady = [s for s in unique if s.step not in reasons]
    per_chip = slice.accelerator.jax_devices_per_chip
    tflops = _mean(s.tflops_per_device for s in steady)
    tokens = _mean(s.tokens_per_device for s in steady)
    tflops_chip = None if tflops is None else tflops * per_chip
    peak = slice.peak_tflops_per_chip(precision)
    first = unique[0] if unique and unique[0].step == 0 else None
    notes = _notes(found, hidden_steps, slice, startup, steady)
    check = _tokens_check(steady, tokens, per_chip, slice.chips)
    if check is not None and check.mismatch:
        notes.append(check.message)
    return RunMetrics(
        device_type=slice.device_type,
        chips=slice.chips,
        jax_devices_per_chip=per_chip,
        precision=precision,
        peak_tflops_per_chip=peak,
        rows=tuple(_row(s, per_chip, reasons.get(s.step)) for s in unique),
        steady_steps=tuple(s.step for s in steady),
        steps_completed=max([s.step + 1 for s in unique] + [h + 1 for h in hidden_steps] + [0]),
        step_seconds=_mean(s.seconds for s in steady),
        tflops_per_device=tflops,
        tflops_per_chip=tflops_chip,
        tokens_per_device=tokens,
        tokens_per_chip=None if tokens is None else tokens * per_chip,
        tokens_check=check,
        mfu=None if tflops_chip is None or not peak else tflops_chip / peak,
        loss=_loss(unique),
        first_step_seconds=None if first is None else first.seconds,
        startup_seconds=_startup_seconds(startup, first),
        startup=startup,
        notes=tuple(notes),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Run ``a`` against run ``b`` (e.g. fp8 against bf16); None where either lacks a figure."""

    step_time_ratio: float | None
    """a's step seconds / b's."""
    speedup_percent: float | None
    """How much faster a is: (b's step seconds / a's - 1) x 100."""
    tflops_per_chip_ratio: float | None
    tokens_per_chip_ratio: float | None


def compare(a: RunMetrics, b: RunMetrics) -> Comparison:
    """Ratios of two runs' steady states: fp8 22.39 s vs bf16 27.42 s is 22.5 % faster."""
    return compare_figures(a.to_json(), b.to_json())


def compare_figures(a: Mapping[str, Any], b: Mapping[str, Any]) -> Comparison:
    """:func:`compare` on two runs' stored figures (``RunMetrics.to_json()``)."""

    def get(m: Mapping[str, Any], key: str) -> float | None:
        value = m.get(key)
        return float(value) if isinstance(value, int | float) else None

    time_ratio = _ratio(get(a, "step_seconds"), get(b, "step_seconds"))
    return Comparison(
        step_time_ratio=time_ratio,
        speedup_percent=None if not time_ratio else (1 / time_ratio - 1) * 100,
        tflops_per_chip_ratio=_ratio(get(a, "tflops_per_chip"), get(b, "tflops_per_chip")),
        tokens_per_chip_ratio=_ratio(get(a, "tokens_per_chip"), get(b, "tokens_per_chip")),
    )


# ---- helpers ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class _Unique:
    """Step lines with each step once (the first line wins), and what was dropped."""

    steps: list[StepRecord]
    duplicates: int
    ray_merged: bool
    """Some line carried Ray's ``[repeated Nx across cluster]``."""


def _unique(steps: Iterable[StepRecord]) -> _Unique:
    seen: dict[int, StepRecord] = {}
    duplicates = 0
    ray_merged = False
    for s in steps:
        ray_merged = ray_merged or s.repeated > 0
        if s.step in seen:
            duplicates += 1
        else:
            seen[s.step] = s
    ordered = sorted(seen.values(), key=lambda s: s.step)
    return _Unique(steps=ordered, duplicates=duplicates, ray_merged=ray_merged)


def _reasons(
    steps: Sequence[StepRecord], window: _Window, outlier_factor: float | None
) -> dict[int, str]:
    """Why each excluded step is excluded, by step number."""
    reasons: dict[int, str] = {}
    for s in steps:
        for test, reason in _RULES:
            if test(s, window):
                reasons[s.step] = reason(s, window)
                break
    candidates = [s for s in steps if s.step not in reasons]
    if outlier_factor and len(candidates) >= 3:
        median = statistics.median(s.seconds for s in candidates)
        for s in candidates:
            if not median / outlier_factor <= s.seconds <= median * outlier_factor:
                reasons[s.step] = (
                    f"outlier: {s.seconds:.3f} s against a median of {median:.3f} s "
                    f"(beyond {outlier_factor:g}x)"
                )
    return reasons


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _tokens_check(
    steady: Sequence[StepRecord], tokens: float | None, per_chip: int, chips: int
) -> TokensCheck | None:
    derived = _mean(
        s.total_weights / s.seconds / chips for s in steady if s.total_weights and s.seconds > 0
    )
    if tokens is None or not derived:
        return None
    reported = tokens * per_chip
    diff = (reported - derived) / derived
    return TokensCheck(
        reported_per_chip=reported,
        from_total_weights_per_chip=derived,
        difference_percent=diff * 100,
        mismatch=abs(diff) > MISMATCH_LIMIT,
    )


def _loss(steps: Sequence[StepRecord]) -> LossChange | None:
    losses = [(s.step, s.loss) for s in steps if s.loss is not None]
    if not losses:
        return None
    (first_step, first), (last_step, last) = losses[0], losses[-1]
    return LossChange(
        first_step=first_step,
        first=first,
        last_step=last_step,
        last=last,
        drop_percent=(first - last) / first * 100 if first else 0.0,
    )


def _startup_seconds(startup: StartupSummary | None, first: StepRecord | None) -> float | None:
    if startup is None or startup.log_start is None or first is None or first.timestamp is None:
        return None
    return elapsed(startup.log_start, first.timestamp)


def _notes(
    found: _Unique,
    hidden: Sequence[int],
    slice: Slice,
    startup: StartupSummary | None,
    steady: Sequence[StepRecord],
) -> list[str]:
    notes: list[str] = []
    steps, duplicates = found.steps, found.duplicates
    if not steps:
        notes.append("no step lines: nothing to measure")
    elif not steady:
        notes.append("no steady-state step: every step was excluded (see the reasons)")
    if duplicates:
        notes.append(f"{duplicates} repeated step line(s) ignored (several workers log each step)")
    if found.ray_merged:
        notes.append(
            "Ray merged similar lines ([repeated Nx across cluster]); steps may be missing: "
            "run with RAY_DEDUP_LOGS=0"
        )
    seen = {s.step for s in steps} | set(hidden)
    missing = [n for n in range(max(seen, default=-1) + 1) if n not in seen]
    if missing:
        notes.append(f"{len(missing)} step(s) absent from the log: {_ranges(missing)}")
    if hidden:
        notes.append(f"MaxText hid the metrics of profiler step(s) {_ranges(sorted(hidden))}")
    logged = startup.num_devices if startup else None
    if logged is not None and logged != slice.jax_devices:
        notes.append(
            f"the log reports {logged} JAX devices but {slice.device_type} has "
            f"{slice.jax_devices}: check --slice"
        )
    return notes


def _ranges(numbers: Sequence[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``1-3, 7``."""
    runs = [[n for _, n in g] for _, g in groupby(enumerate(numbers), lambda p: p[1] - p[0])]
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


def _row(s: StepRecord, per_chip: int, excluded: str | None) -> StepRow:
    return StepRow(
        step=s.step,
        seconds=s.seconds,
        tflops_per_device=s.tflops_per_device,
        tflops_per_chip=None if s.tflops_per_device is None else s.tflops_per_device * per_chip,
        tokens_per_device=s.tokens_per_device,
        tokens_per_chip=None if s.tokens_per_device is None else s.tokens_per_device * per_chip,
        total_weights=s.total_weights,
        loss=s.loss,
        excluded=excluded,
    )
