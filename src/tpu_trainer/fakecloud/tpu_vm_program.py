"""The training program on a fake TPU VM's workers, as the tool's train command starts it:
detached from the ssh session that started it, writing its output to ``train.log`` in the run's
folder on every worker, and running on when that session ends, until it ends by itself, is
stopped by its process id, or the VM goes.

What each worker prints is decided when the program starts (the scenario's ``train:`` output)
and kept under the rehearsal folder (``tpu-vm-workers/<node>/<worker>.out``: a long log stays
out of the state file); the node's ``program`` in the state says which run folder and segment
it runs for, when it started and how it ends. With ``train: line_seconds: S`` a line comes out
every S seconds of the scenario's clock (0: all at once), which moves on only when the emulated
APIs or the tool's waits move it (the hang watchdog of the run that follows the program): a
program whose run's process died waits, as it were, until a process follows it again.

A follow (the ``tail -f`` of the train and attach commands) writes the lines out so far to the
session's log files, then the next ones as they come, until the program ends; it then exits
with the worker's scripted status, or 143 when the program was stopped first. With ``hang`` the
program runs on after its last line until it is stopped. A program whose run the scenario
preempts takes the VM with it once its last line is out: the VM reads PREEMPTED and the session
drops (exit 255). A follow whose scenario clock has not moved for five real minutes (no
process of the run waits any more) drops too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.common import Answer
from tpu_trainer.fakecloud.state import State, clock, read_state, state_path, transaction
from tpu_trainer.fakecloud.tpu_vm_commands import Command

STOPPED = 143
"""A program stopped by TERM: the exit status its shell records."""
NO_STATUS = 137
"""What the follow answers when the program left no exit status."""
DROPPED = 255
"""ssh's status when the connection drops."""
_POLL_S = 0.1
_STILL_S = 300.0
"""Real seconds a follow waits on a scenario clock that does not move (the process that
moved it, its run's, died) before its connection drops, so that it never polls for ever."""


@dataclass(frozen=True, slots=True)
class WorkerResult:
    output: str
    code: int


def outputs_dir() -> Path:
    """Where the programs' outputs are kept: beside the state file."""
    return state_path().parent / "tpu-vm-workers"


def _output_file(node: str, worker: int) -> Path:
    return outputs_dir() / node / f"{worker}.out"


def start(
    node: dict[str, Any],
    command: Command,
    results: Mapping[int, WorkerResult],
    *,
    line_seconds: float,
    preempts: bool,
    now: float,
) -> None:
    """The train ``command``'s program starts on the workers of ``results`` (replacing the
    last one): each prints its result's output, then exits with its code."""
    for worker, result in results.items():
        path = _output_file(node["name"], worker)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(result.output, encoding="utf-8")
    node["program"] = {
        "folder": command.folder,
        "segment": command.segment,
        "started": now,
        "line_seconds": line_seconds,
        "lines": max((len(r.output.splitlines()) for r in results.values()), default=0),
        "codes": {str(w): r.code for w, r in results.items()},
        "stopped": None,
        "preempts": preempts,
    }


def program_in(node: Mapping[str, Any], folder: str) -> dict[str, Any] | None:
    """The program started in ``folder`` on the node, if any."""
    program: dict[str, Any] | None = node.get("program")
    return program if program is not None and program["folder"] == folder else None


def lines_out(program: Mapping[str, Any], now: float) -> int:
    """How many lines each worker has printed by ``now`` (all of its own, at most)."""
    pace = float(program["line_seconds"])
    until = program["stopped"] if program["stopped"] is not None else now
    if pace <= 0:
        return int(program["lines"])
    return min(int(program["lines"]), int((until - program["started"]) / pace))


def running(program: Mapping[str, Any], hang: bool, now: float) -> bool:
    if program["stopped"] is not None:
        return False
    return hang or lines_out(program, now) < program["lines"]


def exit_code(program: Mapping[str, Any], worker: int) -> int:
    """An ended program's exit status on ``worker``."""
    return STOPPED if program["stopped"] is not None else int(program["codes"][str(worker)])


def stop(node: dict[str, Any], folder: str, hang: bool, now: float) -> None:
    """TERM to the program's process group: a running program ends ``now``."""
    program = program_in(node, folder)
    if program is not None and running(program, hang, now):
        program["stopped"] = now


def left(node: Mapping[str, Any], folder: str, hang: bool, now: float) -> str:
    """The left command's answer: the program started in ``folder`` runs, or ended (it left
    its exit status), each with the segment that started it; nothing when none was."""
    program = program_in(node, folder)
    if program is None:
        return ""
    marker = "RUNNING" if running(program, hang, now) else "ENDED"
    return f"TPU_TRAINER_{marker} {program['segment']}\n"


def hang_of(state: State) -> bool:
    return bool(state["tpu_vm"]["behaviour"]["train"]["hang"])


def settle(node: dict[str, Any], now: float) -> bool:
    """A preempted run's program has printed its last line: the capacity goes with it (the VM
    reads PREEMPTED). True when it went now."""
    program = node.get("program")
    if program is None or not program["preempts"] or node["state"] != "READY":
        return False
    if lines_out(program, now) < program["lines"]:
        return False
    program["preempts"] = False
    node["state"] = "PREEMPTED"
    return True


def follow(
    name: str, folder: str, workers: list[int], out_dir: Path | None
) -> Callable[[Answer], None]:
    """After the lock is released: the session's ``tail -f`` of the program's log on each
    worker, from its first line, until the program ends (or the VM goes)."""
    path = state_path()
    files = {w: _Lines(_output_file(name, w), out_dir, w) for w in workers}

    def loop(answer: Answer) -> None:
        moved, seen = time.monotonic(), None
        while True:
            state = read_state(path)
            node = state["tpu_vm"]["nodes"].get(name)
            program = program_in(node, folder) if node is not None else None
            if node is None or node["state"] != "READY":
                _dropped(answer, node)
                break
            if program is None:  # nothing started here: no pid for tail, no exit status
                finish(answer, dict.fromkeys(workers, NO_STATUS))
                break
            now = clock(state)
            if now != seen:
                moved, seen = time.monotonic(), now
            elif time.monotonic() - moved > _STILL_S:  # no one moves the clock any more
                _dropped(answer, node)
                break
            for lines in files.values():
                lines.show(lines_out(program, now), answer)
            if program["preempts"] and _preempted_now(path, name):
                _dropped(answer, node)
                break
            if not running(program, hang_of(state), now):
                finish(answer, {w: exit_code(program, w) for w in workers})
                break
            time.sleep(_POLL_S)

    return loop


@dataclass
class _Lines:
    """One worker's program output, shown to the session as it comes."""

    source: Path
    out_dir: Path | None
    worker: int
    shown: int = 0
    _all: list[str] | None = None

    def show(self, count: int, answer: Answer) -> None:
        if self._all is None:
            text = self.source.read_text(encoding="utf-8") if self.source.is_file() else ""
            self._all = text.splitlines(keepends=True)
        new = "".join(self._all[self.shown : count])
        self.shown = max(self.shown, min(count, len(self._all)))
        if not new:
            return
        if self.out_dir is None:
            answer.stdout.append(new)
            return
        with (self.out_dir / f"{self.worker}.log").open("a", encoding="utf-8") as f:
            f.write(new)


def _preempted_now(path: Path, name: str) -> bool:
    with transaction(path) as state:
        node = state["tpu_vm"]["nodes"].get(name)
        return node is not None and settle(node, clock(state))


def _dropped(answer: Answer, node: Mapping[str, Any] | None) -> None:
    """The VM went (preempted, deleted): the connection closes under the session."""
    hosts = (node or {}).get("workers") or ["the TPU VM"]
    answer.err(f"Connection to {hosts[0]} closed by remote host.")
    answer.code = DROPPED


def finish(answer: Answer, codes: Mapping[int, int]) -> None:
    """gcloud's answer once the command ended on every worker (worker -> exit status): a line
    for each failed worker of several, and the first failure's status."""
    failed = [(w, code) for w, code in sorted(codes.items()) if code]
    if len(codes) > 1:
        for w, code in failed:
            answer.err(
                f"##### Command execution on worker {w} failed with exit status {code}. Continuing."
            )
    answer.code = failed[0][1] if failed else 0
