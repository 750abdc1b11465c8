"""When each line of a simulated container's log was written, for ``kubectl logs --timestamps``.

The real API server (the kubelet's CRI log reader) puts the time the container runtime received
each line in front of it, in RFC 3339 with nine fraction digits and a space
(``2026-11-22T04:27:31.120000000Z <line>``; Go's ``RFC3339NanoFixed``), when asked with
``timestamps=true``. The simulated cluster keeps the same times on the scenario's clock: a line
appended to a container's log is written then; a line of the workload model's log (which a pod
prints whole once it runs) is written, at the latest, when it is first served. The times are
kept in the state (``state["log_stamps"]["<ns>/<pod>/<container>"]``: runs of
``[lines so far, time]``), so a line keeps its time across reads and across the emulator's
processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from tpu_trainer.fakecloud.state import State, clock


def stamp(state: State, key: str, count: int) -> list[float]:
    """The write times of a log's first ``count`` lines; lines not stamped before are stamped
    now (the scenario's clock)."""
    runs: list[list[Any]] = state.setdefault("log_stamps", {}).setdefault(key, [])
    done = int(runs[-1][0]) if runs else 0
    if count > done:
        runs.append([count, clock(state)])
    times: list[float] = []
    for upto, at in runs:
        times.extend([float(at)] * (min(int(upto), count) - len(times)))
        if len(times) >= count:
            break
    return times


def rfc3339_nano(at: float) -> str:
    """``at`` (epoch seconds) as the kubelet writes it: UTC, nine fraction digits, ``Z``."""
    whole = int(at // 1)
    nanos = min(999_999_999, round((at - whole) * 1e9))
    return datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"


def with_timestamps(lines: Sequence[str], times: Sequence[float]) -> list[str]:
    """Each line behind its time and a space, as ``timestamps=true`` answers."""
    return [f"{rfc3339_nano(at)} {line}" for line, at in zip(lines, times, strict=True)]
