"""The guard around a run: whatever happens (error, Ctrl-C, SIGTERM), what the run made is given
back and the store says how the run ended.

Cloud runs go through :func:`teardown_always`; runs that make nothing to give back go through
:func:`finish_on_error`, which only records how they stopped.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol

from tpu_trainer.app.interrupt import Interrupted, on_sigterm
from tpu_trainer.app.outcome import TeardownReport
from tpu_trainer.store.db import RunStatus, RunStore

_Handlers = dict[signal.Signals, Callable[[int, FrameType | None], Any] | int | None]
"""Signal handlers to put back, as ``signal.signal`` returns them."""


def _say(message: str) -> None:
    sys.stderr.write(f"[tpu-trainer] {message}\n")
    sys.stderr.flush()


@contextmanager
def shielded(
    restore: _Handlers | None = None,
) -> Iterator[None]:
    """While tearing down, Ctrl-C and SIGTERM are noted and ignored: a half-done teardown
    would leave billed resources behind. SIGKILL still stops the process (then
    ``tpu-trainer gc`` deletes what is left)."""

    previous: _Handlers = {
        sig: signal.signal(sig, _noted) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    previous.update(restore or {})
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _noted(signum: int, frame: FrameType | None) -> None:  # noqa: ARG001
    """A Ctrl-C or SIGTERM during a teardown: said on screen, and otherwise ignored."""
    name = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
    _say(
        f"{name} ignored: teardown is deleting what the run made and finishes first. "
        f"To force-quit: kill -KILL {os.getpid()} (then `tpu-trainer gc` deletes what "
        "is left, waiting for any node pool still being created)"
    )


def _ignore_signals() -> None:
    """From the first interruption on, Ctrl-C and SIGTERM are noted and ignored (before
    :func:`shielded` takes them over, too: no window where one passes unsaid)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _noted)


class RunTeardown(Protocol):
    """Deletes what one run made (each launcher has its own)."""

    def run(self, run_id: str) -> TeardownReport: ...


@contextmanager
def teardown_always(
    store: RunStore,
    run_id: str,
    teardown: RunTeardown,
    before_teardown: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Run the body; whatever happens (error, Ctrl-C, SIGTERM), tear the run down after.

    ``before_teardown`` (e.g. stopping a program by its process id) is called first when the
    body did not finish; its own failure never keeps the teardown from running. Signals that
    arrive during the teardown are ignored (see :func:`shielded`)."""

    previous: _Handlers = {
        signal.SIGINT: signal.getsignal(signal.SIGINT),
        signal.SIGTERM: signal.signal(signal.SIGTERM, on_sigterm),
    }
    status = RunStatus.FAILED
    error: str | None = None
    report: TeardownReport | None = None
    finished = interrupted = False
    try:
        yield
        status, finished = RunStatus.SUCCEEDED, True
    except (KeyboardInterrupt, Interrupted) as e:
        _ignore_signals()  # from here on a second signal must not cut the teardown short
        status, error, interrupted = RunStatus.CANCELLED, "interrupted", True
        what = "Ctrl-C" if isinstance(e, KeyboardInterrupt) else "SIGTERM"
        _say(f"{what}: stopping run {run_id} and deleting what it made (Ctrl-C again is ignored)")
        raise
    except BaseException as e:
        error = str(e)[:2000]
        raise
    finally:
        # After an interruption the process is on its way out: later signals stay ignored.
        with shielded(dict.fromkeys(previous, signal.SIG_IGN) if interrupted else previous):
            try:
                if not finished and before_teardown is not None:
                    before_teardown()
            except Exception:  # noqa: S110 (the teardown that follows removes what still runs)
                pass
            finally:
                try:
                    report = teardown.run(run_id)
                finally:
                    _finish(store, run_id, status, error, report)
                    _tell(run_id, report, interrupted)


def _tell(run_id: str, report: TeardownReport | None, interrupted: bool) -> None:
    """Say what is left when it is not what the user expects (a failure or interruption)."""
    if report is None:
        _say(f"run {run_id}: teardown did not finish; `tpu-trainer gc` deletes what is left")
    elif not report.clean:
        _say(f"run {run_id} teardown: {report.summary()}; `tpu-trainer gc` retries")
    elif interrupted or report.handed_over or report.left:
        _say(f"run {run_id} teardown: {report.summary()}")


def _finish(
    store: RunStore,
    run_id: str,
    status: RunStatus,
    error: str | None,
    report: TeardownReport | None,
) -> None:
    current = store.run(run_id)
    if current is None:
        return
    if report is None or not report.clean:
        failed = "; ".join(report.failed) if report else "teardown did not run to the end"
        note = f"teardown incomplete: {failed}"
        store.finish_run(
            run_id, RunStatus.FAILED, "; ".join(x for x in (current.error or error, note) if x)
        )
    elif current.status is RunStatus.RUNNING:
        store.finish_run(run_id, status, error)


@contextmanager
def finish_on_error(store: RunStore, run_id: str) -> Iterator[None]:
    """Record a run that stops early: cancelled on Ctrl-C, failed (with why) on anything else."""
    try:
        yield
    except KeyboardInterrupt:
        store.finish_run(run_id, RunStatus.CANCELLED, "interrupted")
        raise
    except BaseException as e:
        store.finish_run(run_id, RunStatus.FAILED, str(e)[:2000])
        raise
