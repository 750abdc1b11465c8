"""A crash rehearsal: ``tpu-trainer train --rehearse`` stopped by a signal at a chosen stage,
then ``tpu-trainer gc``; what is left in the fake cloud and the run store is the verdict.

The stage is seen, not guessed: from the run store (a run row, a stage started), from the
fake cloud's state (a node pool of the run still PROVISIONING), from the run's folder (a
training step in worker 0's log: :data:`STEP`), or from the tool's own output (its teardown
started). Used by the tests and by ``bench/crash_matrix.py``; :func:`crash` alone (no gc)
leaves the run as the signal left it, for ``tpu-trainer resume RUN``.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.state import read_state

STAGES = ("started", "provision", "provisioning", "configure", "submit", "follow")
"""``started``: the run row exists (nothing created yet); ``provisioning``: the run's node pool
exists and is PROVISIONING; the others: that stage of the run has started."""
STEP = "step"
"""One more stage, for runs that keep worker 0's log in the run's folder (TPU VM): that log
holds a MaxText training step."""
_STEP_LINE = "completed step: "

SIGNALS: dict[str, tuple[signal.Signals, ...]] = {
    "SIGKILL": (signal.SIGKILL,),
    "SIGTERM": (signal.SIGTERM,),
    "Ctrl-C": (signal.SIGINT,),
    "Ctrl-C x2": (signal.SIGINT, signal.SIGINT),
}
"""A second signal is sent once the tool says its teardown started."""

_TEARDOWN_STARTED = "stopping run"


@dataclass(frozen=True, slots=True)
class Case:
    signal_name: str
    stage: str


@dataclass
class Outcome:
    case: Case
    train_code: int | None = None
    gc_code: int | None = None
    left: list[str] = field(default_factory=list)
    """Tool-created pools, workloads and policies still in the fake cloud, and live store rows."""
    touched: list[str] = field(default_factory=list)
    """Pre-existing pools or policies that are gone."""
    stuck_runs: list[str] = field(default_factory=list)
    """Runs still marked running after gc."""
    traceback: bool = False
    output: str = ""
    signals_sent: int = 0
    """How many of the case's signals were sent (a second Ctrl-C only while a teardown runs)."""

    @property
    def clean(self) -> bool:
        return (
            not self.left
            and not self.touched
            and not self.stuck_runs
            and not self.traceback
            and self.gc_code == 0
        )


_AS_FROM_A_TERMINAL = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
"""Starts the tool with Ctrl-C delivered as a terminal delivers it, whatever this process
inherited: a job started in the background by a non-interactive shell (a CI script) ignores
SIGINT, and so would every process it starts, the tool included."""


@dataclass
class Rehearsal:
    """Where a case runs: its folder (store and fake cloud live under it), recipe, scenario."""

    workdir: Path
    recipe: Path
    scenario: Path
    env: dict[str, str]
    timeout_s: float = 180.0
    train_args: tuple[str, ...] = ()
    """More of ``train``'s options (``--backend tpu-vm``, ``--set steps=50``...)."""

    @property
    def store(self) -> Path:
        return Path(self.env["TPU_TRAINER_HOME"]) / "runs.db"

    @property
    def runs(self) -> Path:
        return Path(self.env["TPU_TRAINER_HOME"]) / "runs"

    @property
    def state(self) -> Path:
        return Path(self.env["TPU_TRAINER_REHEARSAL_DIR"]) / "state.json"

    def tool(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tpu_trainer", *args]


def run_case(reh: Rehearsal, case: Case, before: dict[str, Any]) -> Outcome:
    """Train, stop it at ``case.stage`` with ``case.signal_name``, gc, and look.
    ``before`` is the fake cloud's state at the start (what must never be touched)."""
    out = crash(reh, case, before)
    gc = subprocess.run(
        reh.tool("gc", "--rehearse", str(reh.scenario), "--poll", "0.1"),
        env=reh.env,
        capture_output=True,
        text=True,
        timeout=reh.timeout_s,
        check=False,
    )
    out.gc_code = gc.returncode
    out.output += gc.stdout + gc.stderr
    out.traceback = "Traceback (most recent call last)" in out.output
    _judge(reh, before, out)
    return out


def crash(reh: Rehearsal, case: Case, before: dict[str, Any]) -> Outcome:
    """Train, and stop it at ``case.stage`` with ``case.signal_name``: the outcome holds the
    tool's exit status and output (nothing is judged)."""
    out = Outcome(case)
    argv = reh.tool("train", str(reh.recipe), "--rehearse", str(reh.scenario))
    argv += ["--poll", "0.05", "--wait-timeout", "600", "--skip-checks", *reh.train_args]
    argv = [sys.executable, "-c", _AS_FROM_A_TERMINAL, *argv]
    proc = subprocess.Popen(
        argv, env=reh.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    lines: list[str] = []
    readers = [_reader(s, lines) for s in (proc.stdout, proc.stderr) if s is not None]
    try:
        _wait_for(lambda: _at_stage(reh, case.stage, before), proc, reh.timeout_s)
        for i, sig in enumerate(SIGNALS[case.signal_name]):
            if i and not _teardown_seen(lines, proc):
                break  # the run finished its teardown before a second signal could land
            proc.send_signal(sig)
            out.signals_sent += 1
        out.train_code = proc.wait(timeout=reh.timeout_s)
    except subprocess.TimeoutExpired as e:
        _stop(proc, readers)
        tail = "".join(lines)[-6000:]
        raise AssertionError(
            f"train did not end within {reh.timeout_s:.0f} s of {out.signals_sent} signal(s) "
            f"at {case.stage}; what it printed:\n{tail}"
        ) from e
    finally:
        _stop(proc, readers)
    out.output = "".join(lines)
    out.traceback = "Traceback (most recent call last)" in out.output
    return out


def _stop(proc: subprocess.Popen[str], readers: list[threading.Thread]) -> None:
    """Kill the train process if it still runs, and read what it printed to the end."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for t in readers:
        t.join(timeout=10)


def _reader(stream: Any, lines: list[str]) -> threading.Thread:
    def pump() -> None:
        for line in stream:
            lines.append(line)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _teardown_seen(lines: list[str], proc: subprocess.Popen[str]) -> bool:
    """Wait until the tool says its teardown started; False if it ended first."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if any(_TEARDOWN_STARTED in x for x in lines):
            return True
        time.sleep(0.01)
    return False


def _wait_for(ready: Callable[[], bool], proc: subprocess.Popen[str], limit: float) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if ready():
            return
        if proc.poll() is not None:
            raise RuntimeError(f"the run ended (exit {proc.returncode}) before the stage")
        time.sleep(0.05)
    raise RuntimeError("the stage never came")


def _query(db: Path, sql: str, *params: object) -> list[tuple[Any, ...]]:
    if not db.exists():
        return []
    try:
        con = sqlite3.connect(db, timeout=5)
        try:
            return list(con.execute(sql, params).fetchall())
        finally:
            con.close()
    except sqlite3.OperationalError:
        return []


def _at_stage(reh: Rehearsal, stage: str, before: dict[str, Any]) -> bool:
    if stage == "started":
        return bool(_query(reh.store, "SELECT 1 FROM runs"))
    if stage == STEP:
        logs = reh.runs.glob("*/worker0.log") if reh.runs.is_dir() else ()
        return any(_STEP_LINE in log.read_text(encoding="utf-8", errors="replace") for log in logs)
    if stage == "provisioning":
        if not reh.state.exists():
            return False
        pools = read_state(reh.state)["node_pools"]
        return any(
            p["status"] == "PROVISIONING" for n, p in pools.items() if n not in before["node_pools"]
        )
    return bool(_query(reh.store, "SELECT 1 FROM stages WHERE name = ?", stage))


def _judge(reh: Rehearsal, before: dict[str, Any], out: Outcome) -> None:
    after = read_state(reh.state)
    for kind in ("node_pools", "resource_policies"):
        out.left += [f"{kind} {n}" for n in after[kind] if n not in before[kind]]
        out.touched += [f"{kind} {n}" for n in before[kind] if n not in after[kind]]
    out.left += [f"workload {n}" for n in after.get("workloads", {})]
    live = _query(
        reh.store,
        "SELECT kind, name, state FROM resources WHERE state IN "
        "('creating', 'created', 'deleting', 'maybe')",
    )
    out.left += [f"store row {k} {n} ({s})" for k, n, s in live]
    out.stuck_runs = [
        r[0] for r in _query(reh.store, "SELECT id FROM runs WHERE status = ?", "running")
    ]


def initial(scenario: Path) -> dict[str, Any]:
    """The fake cloud's state at the start of ``scenario`` (what must never be touched)."""
    from tpu_trainer.fakecloud.initial import initial_state
    from tpu_trainer.fakecloud.scenario import load_scenario

    return initial_state(load_scenario(scenario))
