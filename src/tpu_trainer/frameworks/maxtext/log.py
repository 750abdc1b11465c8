"""MaxText training logs, read one line at a time.

MaxText prints one line per training step (``maxtext/common/metric_logger.py``)::

    I1122 04:29:46.380500 139763251608448 metric_logger.py:265] completed step: 0, seconds: 0.136,
    TFLOP/s/device: 0.054, Tokens/s/device: 941.329, total_weights: 128, loss: 10.937,
    lm_loss: 10.937, perplexity: 56244.406

(on one line). Variants this module reads: with or without the absl prefix; behind Ray's
``(RayTrainWorker pid=..., ip=...)`` prefix, with ANSI colours and a ``[repeated Nx across
cluster]`` suffix; a ``[Rampup Batch Size Phase]`` prefix (no throughput fields); extra
``name: number`` fields after ``loss`` (``lm_loss``, ``moe_lb_loss``, ``mtp_loss``,
``dpo_loss``...) and a free-text ``diag: ...`` tail; versions before 0.2.2 that end at
``loss``. MaxText can also hide a profiler start/stop step's metrics
(``completed profiler activation/deactivation step: N``): that gives a :class:`HiddenStep`.

Before the first step, a few start-up lines are facts worth keeping (:class:`StartupFact`):
``Num_devices: N``, ``number parameters: X billion``, ``Total estimated memory size: X GB``,
``Memstats`` lines, and the time of the first absl-prefixed line.

Everything here is pure and streaming: :func:`iter_events` holds no line once it has looked at
it, tests each line with one substring search after the first step, and runs a regular
expression only on lines that passed that test.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tpu_trainer.metrics.records import (
    Event,
    FactKind,
    HiddenStep,
    ParsedLog,
    StartupFact,
    StepRecord,
    absl_time,
    summarize_startup,
)

_NUM = r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)"

_COMPLETED = "completed "
_STEP = "completed step: "
_HIDDEN = "completed profiler activation/deactivation step: "
RAMPUP = "[Rampup Batch Size Phase]"
"""What a step line of the batch-size rampup carries before ``completed step:``."""
_DIAG = ", diag:"

_HEAD = re.compile(rf"completed step: (\d+), seconds: ({_NUM})")
_HIDDEN_STEP = re.compile(r"completed profiler activation/deactivation step: (\d+)")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY = re.compile(r"\((?:(?P<actor>[\w.:-]+) )?(?P<who>pid=\d+(?:, ip=[^)\s]+)?)\)")
_REPEATED = re.compile(r"\s*\[repeated (\d+)x across cluster\]")

# Step-line field -> StepRecord attribute; every other numeric field goes to ``extra``.
_CORE_FIELDS: dict[str, str] = {
    "TFLOP/s/device": "tflops_per_device",
    "Tokens/s/device": "tokens_per_device",
    "total_weights": "total_weights",
    "loss": "loss",
}


@dataclass(frozen=True, slots=True)
class _Marker:
    needle: str
    kind: FactKind
    value: re.Pattern[str] | None


# Checked in order; the first needle found decides (``Using (GB)`` lines carry no "Memstats").
_MARKERS: tuple[_Marker, ...] = (
    _Marker("Num_devices: ", FactKind.NUM_DEVICES, re.compile(r"Num_devices: (\d+)")),
    _Marker(
        "number parameters: ",
        FactKind.PARAMETERS,
        re.compile(rf"number parameters: ({_NUM}) billion"),
    ),
    _Marker(
        "Total estimated memory size",
        FactKind.MEMORY_ESTIMATE,
        re.compile(rf"Total estimated memory size: ({_NUM}) ?GB"),
    ),
    _Marker("Using (GB) ", FactKind.MEMSTATS, re.compile(rf"Using \(GB\) ({_NUM})")),
    _Marker("Memstats", FactKind.MEMSTATS, None),
)


def parse_line(line: str) -> Event | None:
    """The step or start-up fact one log line holds, or None."""
    if _COMPLETED in line:
        event = parse_completed(line)
        if event is not None:
            return event
    return parse_startup(line)


def parse_completed(line: str) -> StepRecord | HiddenStep | None:
    """A ``completed step:`` line as a :class:`StepRecord`, a hidden profiler step, or None."""
    at = line.find(_STEP)
    if at >= 0:
        return _parse_step(line, at)
    hidden = _HIDDEN_STEP.search(line) if _HIDDEN in line else None
    return HiddenStep(step=int(hidden[1])) if hidden else None


def parse_startup(line: str) -> StartupFact | None:
    """A start-up fact (devices, parameters, memory), or None."""
    for marker in _MARKERS:
        at = line.find(marker.needle)
        if at < 0:
            continue
        value: float | None = None
        if marker.value is not None:
            m = marker.value.search(line, at)
            if m is None:
                return None
            value = float(m[1])
        return StartupFact(kind=marker.kind, value=value, text=_clean(line[at:]))
    return None


def iter_events(lines: Iterable[str]) -> Iterator[Event]:
    """Every event in ``lines``, in order, plus one ``LOG_START`` fact for the first timestamp.

    Start-up facts are looked for only until the first step line; after it each line costs one
    substring search unless it holds ``completed ``.
    """
    it = iter(lines)
    need_start = True
    for line in it:
        if need_start:
            start = absl_time(line)
            if start is not None:
                need_start = False
                yield StartupFact(kind=FactKind.LOG_START, value=start, text=_clean(line)[:200])
        event = parse_line(line)
        if event is None:
            continue
        yield event
        if not isinstance(event, StartupFact):
            break
    needle, parse = _COMPLETED, parse_completed
    for line in it:
        if needle in line:
            found = parse(line)
            if found is not None:
                yield found


def _parse_step(line: str, at: int) -> StepRecord | None:
    if "\x1b" in line:
        line = _ANSI.sub("", line)
        at = line.find(_STEP)
    head = _HEAD.match(line, at)
    if head is None:
        return None
    start, end = head.end(), len(line)
    repeated = 0
    rep = _REPEATED.search(line, start) if "[repeated " in line else None
    if rep is not None:
        end, repeated = rep.start(), int(rep[1])
    diag: str | None = None
    d = line.find(_DIAG, start, end)
    if d >= 0:
        diag, end = line[d + len(_DIAG) : end].strip(), d
    core, extra = _fields(line[start:end])
    prefix = line[:at]
    ray = _RAY.search(prefix) if "pid=" in prefix else None
    return StepRecord(
        step=int(head[1]),
        seconds=float(head[2]),
        tflops_per_device=core.get("tflops_per_device"),
        tokens_per_device=core.get("tokens_per_device"),
        total_weights=core.get("total_weights"),
        loss=core.get("loss"),
        extra=extra,
        diag=diag,
        rampup=RAMPUP in prefix,
        worker=_worker(ray),
        repeated=repeated,
        timestamp=absl_time(prefix),
    )


def _fields(text: str) -> tuple[dict[str, float], dict[str, float]]:
    """``, name: number`` pairs: the core fields by attribute name, and the others."""
    core: dict[str, float] = {}
    extra: dict[str, float] = {}
    for part in text.split(","):
        key, colon, value = part.partition(":")
        if not colon:
            continue
        try:
            number = float(value)
        except ValueError:
            continue
        key = key.strip()
        name = _CORE_FIELDS.get(key)
        if name is not None:
            core[name] = number
        elif key:
            extra[key] = number
    return core, extra


def _worker(ray: re.Match[str] | None) -> str | None:
    if ray is None:
        return None
    actor = ray["actor"]
    return f"{actor} {ray['who']}" if actor else ray["who"]


def _clean(text: str) -> str:
    """``text`` without ANSI colour codes, Ray's ``[repeated ...]`` or trailing whitespace."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "[repeated " in text:
        text = _REPEATED.sub("", text)
    return text.rstrip()


def read_log(lines: Iterable[str]) -> ParsedLog:
    """Read every event of ``lines``; memory grows with the number of steps, not of lines."""
    counter = _Counter(lines)
    steps: list[StepRecord] = []
    hidden: list[int] = []
    facts: list[StartupFact] = []
    for event in iter_events(counter):
        if isinstance(event, StepRecord):
            steps.append(event)
        elif isinstance(event, HiddenStep):
            hidden.append(event.step)
        else:
            facts.append(event)
    return ParsedLog(
        steps=tuple(steps),
        hidden_steps=tuple(hidden),
        startup=summarize_startup(facts),
        lines=counter.seen,
    )


class _Counter:
    """Counts the lines that pass through it."""

    def __init__(self, lines: Iterable[str]) -> None:
        self._lines = lines
        self.seen = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            self.seen += 1
            yield line
