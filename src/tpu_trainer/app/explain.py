"""Why a failed run failed, when no known error said so: the family classifier's explanation,
computed once after the run from the logs it kept.

The follow loops of every launch path scan each line with the error signatures only, and stop
a run on the first fatal one (its title and fix become the run's error). A run can also fail
without any: its program exits non-zero, its job or JobSet fails, a device check fails, the
watchdog decides it hangs. Then the family classifier (``tpu-trainer diagnose``'s second layer)
may still recognise the failure line by its wording: this module reads the run's logs once, with
signatures and classifier, and returns the most confident family-level match, to be added to the
run's error. Nothing is added when any log holds a fatal signature (the launch path reported it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.plan.diagnose import Match, diagnose, has_fatal
from tpu_trainer.plan.diagnose_family import BY_WORDING

LOG_GLOBS = ("*.log", "*/*.log")
"""The logs a run keeps in its folder: worker 0's and a Ray job's (``worker0.log``,
``job.log``), and a TPU VM's per-step worker logs (``install/0.log``, ``train/3.log``, ...)."""


@dataclass(frozen=True, slots=True)
class Explanation:
    """A family-level match of the classifier, and the log it was found in."""

    match: Match
    log: str
    """The log's path inside the run's folder (``worker0.log``, ``train/2.log``)."""

    def describe(self) -> str:
        """One sentence for the run's error: the family, marked as read from the wording, with
        its confidence and line, then its cause and fix (which quotes the line)."""
        m = self.match
        family = m.title.removesuffix(BY_WORDING)
        sure = f", confidence {m.confidence:.2f}" if m.confidence is not None else ""
        return (
            f"{family} (by its wording{sure}; line {m.line} of {self.log}): {m.cause}"
            f" — fix: {m.fix}"
        )


def kept_logs(run_dir: Path) -> list[Path]:
    """The run's log files, worker 0's first (the order ties are broken in)."""
    found = [p for pattern in LOG_GLOBS for p in sorted(run_dir.glob(pattern)) if p.is_file()]
    return sorted(found, key=lambda p: (p.name != "worker0.log", str(p)))


def explain(run_dir: Path, logs: Iterable[Path] | None = None) -> Explanation | None:
    """The most confident family-level match over ``logs`` (by default :func:`kept_logs`), or
    None when a log holds a fatal signature or no line was classified."""
    best: Explanation | None = None
    for path in kept_logs(run_dir) if logs is None else logs:
        with path.open(encoding="utf-8", errors="replace") as lines:
            matches = diagnose(lines)
        if has_fatal(matches):
            return None
        for m in matches:
            if m.classified and (best is None or _sure(m) > _sure(best.match)):
                best = Explanation(m, _relative(path, run_dir))
    return best


def _sure(m: Match) -> float:
    return m.confidence or 0.0


def _relative(path: Path, run_dir: Path) -> str:
    try:
        return str(path.relative_to(run_dir))
    except ValueError:
        return str(path)
