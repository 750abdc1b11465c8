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
from typing import Any

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.metrics.columns import Fig, StepColumns
from tpu_trainer.metrics.lazy_rows import LazyRows
from tpu_trainer.metrics.log_badput import MeasuredBadput
from tpu_trainer.metrics.positions import Positions
from tpu_trainer.metrics.records import StartupSummary, StepRecord, elapsed
from tpu_trainer.plan.slices import Slice
from tpu_trainer.report.step_table import ranges
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
_Test = Callable[[Fig, _Window], bool]
_Reason = Callable[[Fig, _Window], str]
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
    rows: Sequence[StepRow]
    """Every step, in step order (made on demand from compact columns)."""
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
    log_badput: MeasuredBadput | None = None
    """Seconds the log's badput lines measured (TPU init, checkpoints, data waits)."""

    @property
    def has_steady_state(self) -> bool:
        return bool(self.steady_steps)

    def excluded(self) -> dict[int, str]:
        """Why each step left out of the steady state was, by step, in step order."""
        if isinstance(self.rows, LazyRows):
            return dict(sorted(self.rows.reasons.items()))
        return {r.step: r.excluded for r in self.rows if r.excluded}

    def to_json(self, *, steps: bool = True) -> dict[str, object]:
        """A JSON-ready dict (floats as computed; the CLI rounds for display only); without
        the per-step list when ``steps`` is false (the store's ``steps`` table has them)."""
        check = self.tokens_check
        return {
            "slice": self.device_type,
            "chips": self.chips,
            "jax_devices_per_chip": self.jax_devices_per_chip,
            "precision": str(self.precision),
            "peak_tflops_per_chip": self.peak_tflops_per_chip,
            "steps_completed": self.steps_completed,
            "steady_steps": list(self.steady_steps),
            "excluded_steps": {str(k): v for k, v in self.excluded().items()},
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
            "log_badput": None if self.log_badput is None else self.log_badput.to_json(),
            **({"steps": [step_json(r) for r in self.rows]} if steps else {}),
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
    columns = StepColumns()
    for s in steps:
        columns.add(s)
    return summarize_columns(
        columns,
        slice=slice,
        precision=precision,
        profiler_skip=profiler_skip,
        profiler_steps=profiler_steps,
        first_steady=first_steady,
        outlier_factor=outlier_factor,
        hidden_steps=hidden_steps,
        startup=startup,
    )


def summarize_columns(
    columns: StepColumns,
    *,
    slice: Slice,
    precision: Precision,
    profiler_skip: int | None,
    profiler_steps: int | None,
    first_steady: int = 2,
    outlier_factor: float | None = OUTLIER_FACTOR,
    hidden_steps: Sequence[int] = (),
    startup: StartupSummary | None = None,
    log_badput: MeasuredBadput | None = None,
) -> RunMetrics:
    """:func:`summarize` of steps already gathered in columns (as a log is read, in constant
    memory per step line)."""
    columns.seal()
    skip, count = profiler_skip or 0, profiler_steps if profiler_skip is not None else 0
    window = _Window(
        first_steady=first_steady,
        profiler=range(skip, skip + (count or 0)),
        has_tflops=columns.has_tflops,
    )
    reasons, steady_index = _reasons(columns, window, outlier_factor)
    per_chip = slice.accelerator.jax_devices_per_chip
    tflops = _mean(columns.present("tflops", steady_index))
    tokens = _mean(columns.present("tokens", steady_index))
    tflops_chip = None if tflops is None else tflops * per_chip
    peak = slice.peak_tflops_per_chip(precision)
    first = columns.fig(0) if len(columns) and columns.step(0) == 0 else None
    notes = _notes(columns, hidden_steps, slice, startup, bool(steady_index))
    check = _tokens_check(columns, steady_index, tokens, per_chip, slice.chips)
    if check is not None and check.mismatch:
        notes.append(check.message)
    top = max(
        [columns.step(len(columns) - 1) + 1 if len(columns) else 0, *(h + 1 for h in hidden_steps)]
    )
    return RunMetrics(
        device_type=slice.device_type,
        chips=slice.chips,
        jax_devices_per_chip=per_chip,
        precision=precision,
        peak_tflops_per_chip=peak,
        rows=LazyRows(columns, per_chip, reasons),
        steady_steps=columns.steps_at(steady_index),
        steps_completed=top,
        step_seconds=_mean(columns.present("seconds", steady_index)),
        tflops_per_device=tflops,
        tflops_per_chip=tflops_chip,
        tokens_per_device=tokens,
        tokens_per_chip=None if tokens is None else tokens * per_chip,
        tokens_check=check,
        mfu=None if tflops_chip is None or not peak else tflops_chip / peak,
        loss=_loss(columns),
        first_step_seconds=None if first is None else first.seconds,
        startup_seconds=_startup_seconds(startup, columns.step0_timestamp if first else None),
        startup=startup,
        notes=tuple(notes),
        log_badput=log_badput,
    )


def step_json(row: StepRow) -> dict[str, object]:
    """One step as ``--json`` prints it: its row and whether it is steady."""
    return {**asdict(row), "steady": row.excluded is None}


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
def _reasons(
    columns: StepColumns, window: _Window, outlier_factor: float | None
) -> tuple[dict[int, str], Positions]:
    """Why each excluded step is excluded, by step number; the positions of the steady ones."""
    reasons: dict[int, str] = {}
    ruled: list[int] = []
    for i in _maybe_ruled(columns, window):
        f = columns.fig(i)
        for test, reason in _RULES:
            if test(f, window):
                reasons[f.step] = reason(f, window)
                ruled.append(i)
                break
    candidates = Positions(len(columns), tuple(ruled))
    if not (outlier_factor and len(candidates) >= 3):
        return reasons, candidates
    seconds = columns.present("seconds", candidates)
    median = statistics.median(seconds)
    low, high = median / outlier_factor, median * outlier_factor
    outside = [k for k, value in enumerate(seconds) if not low <= value <= high]
    outliers = candidates.picked(outside)
    for i, k in zip(outliers, outside, strict=True):
        reasons[columns.step(i)] = (
            f"outlier: {seconds[k]:.3f} s against a median of {median:.3f} s "
            f"(beyond {outlier_factor:g}x)"
        )
    return reasons, candidates.without(outliers)


def _maybe_ruled(columns: StepColumns, window: _Window) -> Iterable[int]:
    """The positions of the steps a rule of :data:`_RULES` may exclude, in order (the others
    pass every test): in a log where every step logged every figure outside any rampup, the
    steps before the first steady one and those in the profiler window (steps are in order,
    so each is one run of positions)."""
    first, profiler, need_tflops = window.first_steady, window.profiler, window.has_tflops
    if columns.plain():
        position = columns.position
        early = range(position(first))
        traced = range(position(profiler.start), position(profiler.stop)) if profiler else []
        return sorted({*early, *traced})
    return [
        i
        for i, (step, rampup, has_tflops) in enumerate(columns.step_flags())
        if step < first or rampup or step in profiler or not (has_tflops or not need_tflops)
    ]


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if len(values) else None


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def _tokens_check(
    columns: StepColumns, steady: Positions, tokens: float | None, per_chip: int, chips: int
) -> TokensCheck | None:
    derived = _mean([rate / chips for rate in columns.weights_per_second(steady)])
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


def _loss(columns: StepColumns) -> LossChange | None:
    n = len(columns)
    with_loss = (f for f in map(columns.fig, range(n)) if f.loss is not None)
    backwards = (f for f in map(columns.fig, range(n - 1, -1, -1)) if f.loss is not None)
    first, last = next(with_loss, None), next(backwards, None)
    if first is None or last is None or first.loss is None or last.loss is None:
        return None
    return LossChange(
        first_step=first.step,
        first=first.loss,
        last_step=last.step,
        last=last.loss,
        drop_percent=(first.loss - last.loss) / first.loss * 100 if first.loss else 0.0,
    )


def _startup_seconds(startup: StartupSummary | None, step0: float | None) -> float | None:
    if startup is None or startup.log_start is None or step0 is None:
        return None
    return elapsed(startup.log_start, step0)


def _notes(
    columns: StepColumns,
    hidden: Sequence[int],
    slice: Slice,
    startup: StartupSummary | None,
    any_steady: bool,
) -> list[str]:
    notes: list[str] = []
    if not len(columns):
        notes.append("no step lines: nothing to measure")
    elif not any_steady:
        notes.append("no steady-state step: every step was excluded (see the reasons)")
    if columns.duplicates:
        notes.append(
            f"{columns.duplicates} repeated step line(s) ignored (several workers log each step)"
        )
    if columns.ray_merged:
        notes.append(
            "Ray merged similar lines ([repeated Nx across cluster]); steps may be missing: "
            "run with RAY_DEDUP_LOGS=0"
        )
    missing = columns.missing(hidden)
    if missing:
        notes.append(f"{len(missing)} step(s) absent from the log: {ranges(missing)}")
    if hidden:
        notes.append(f"MaxText hid the metrics of profiler step(s) {ranges(sorted(hidden))}")
    logged = startup.num_devices if startup else None
    if logged is not None and logged != slice.jax_devices:
        notes.append(
            f"the log reports {logged} JAX devices but {slice.device_type} has "
            f"{slice.jax_devices}: check --slice"
        )
    return notes
