"""The commands a run sends to every TPU VM worker, and what their answers mean (pure).

Each command is a fixed template; every value in it is quoted with :func:`shlex.quote`, so a
recipe's or a configuration's text reaches the worker's shell as one literal word, never as
shell syntax. Secrets are never part of a command: they travel in ssh's environment
(``SendEnv``), which the install step tells the worker's sshd to accept.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.frameworks.vm_program import (
    VmProgram,
    remote_run_dir,
    remote_venv,
    venv_from_run_dir,
)
from tpu_trainer.plan.slices import Slice

DEVICES_MARKER = "TPU_TRAINER_DEVICES"
RUNNING_MARKER = "TPU_TRAINER_RUNNING"
ENDED_MARKER = "TPU_TRAINER_ENDED"
PID_FILE = "train.pid"
LOG_FILE = "train.log"
"""The program's output on each worker (every line, from its first)."""
EXIT_FILE = "train.exit"
SEGMENT_FILE = "train.segment"
"""The run's segment that started the program."""
NO_STATUS = 137
"""The exit status a follow answers when the program left none (it was killed)."""
SSHD_CONF = "/etc/ssh/sshd_config.d/60-tpu-trainer.conf"
UV = '"$HOME/.local/bin/uv"'

_DEVICES = re.compile(rf"^{DEVICES_MARKER} (\d+) (\d+) (\d+)\s*$", re.M)
_WORKER_FAILED = re.compile(r"Command execution on worker (\d+) failed with exit status (\d+)")


def install_command(program: VmProgram, run_id: str) -> str:
    """Make the run folder and the program's environment (Python from uv, the program from
    pip), and let sshd accept the secret variables' names."""
    venv = remote_venv(program.key)
    lines = [
        "set -eu",
        f"mkdir -p {shlex.quote(remote_run_dir(run_id))}",
        "python3 -m pip install --user --quiet --disable-pip-version-check uv",
        f"{UV} venv --quiet --allow-existing --python {shlex.quote(program.python)} "
        f"{shlex.quote(venv)}",
        f"{UV} pip install --quiet --python {shlex.quote(venv + '/bin/python')} "
        + " ".join(shlex.quote(r) for r in program.requirements),
    ]
    if program.secret_env:
        accept = "AcceptEnv " + " ".join(program.secret_env)
        lines += [
            f"printf '%s\\n' {shlex.quote(accept)} | sudo tee {SSHD_CONF} >/dev/null",
            "sudo systemctl reload ssh",
        ]
    return "\n".join(lines)


_CHECK_CODE = (
    "import jax; "
    f'print("{DEVICES_MARKER}", jax.process_index(), jax.device_count(), jax.local_device_count())'
)


def device_check_command(program: VmProgram) -> str:
    """Ask JAX on every worker how many devices it sees, locally and in all."""
    python = remote_venv(program.key) + "/bin/python"
    return f"{shlex.quote(python)} -c {shlex.quote(_CHECK_CODE)}"


def _program_line(program: VmProgram) -> str:
    """The program with its environment, every word quoted."""
    words = [
        "env",
        *(f"{k}={shlex.quote(v)}" for k, v in program.env),
        shlex.quote(venv_from_run_dir(program.key) + "/bin/python"),
        *(shlex.quote(a) for a in program.args),
    ]
    return " ".join(words)


def train_command(program: VmProgram, run_id: str, segment: int) -> str:
    """Start the program in the run folder, detached from this ssh session, then follow it.

    ``setsid`` gives it a session (and process group) of its own and ``nohup`` ignores the
    hangup, so it runs on when the session ends (the tool's process died, the connection
    dropped); its output goes to ``train.log`` on the worker, and the run's segment number to
    ``train.segment``. The program runs under a small ``sh`` whose process id (the group's) is
    ``train.pid``: the shell waits for the program even when a stop's TERM reaches the whole
    group (``trap : TERM``), then writes its exit status to ``train.exit``. The program's words
    are quoted for that inner shell, and the inner shell's text is quoted again as one word for
    this one. The session then follows the log as :func:`attach_command` does."""
    inner = "\n".join(["trap : TERM", _program_line(program), f"echo $? > {EXIT_FILE}"])
    return "\n".join(
        [
            f"cd {shlex.quote(remote_run_dir(run_id))} || exit 1",
            f"rm -f {EXIT_FILE} {PID_FILE}",
            f"echo {int(segment)} > {SEGMENT_FILE}",
            f": > {LOG_FILE}",
            f"setsid nohup sh -c {shlex.quote(inner)} > {LOG_FILE} 2>&1 < /dev/null &",
            f"echo $! > {PID_FILE}",
            *_FOLLOW,
        ]
    )


def attach_command(run_id: str) -> str:
    """Follow the program :func:`train_command` started, from the first line of its log, until
    it ends (``tail --pid``: at once when it has ended already); exit with its exit status
    (:data:`NO_STATUS` when it left none: it was killed)."""
    return "\n".join([f"cd {shlex.quote(remote_run_dir(run_id))} || exit 1", *_FOLLOW])


_FOLLOW = (
    f'tail -n +1 --pid="$(cat {PID_FILE})" -f {LOG_FILE}',
    f'if [ -s {EXIT_FILE} ]; then exit "$(cat {EXIT_FILE})"; fi',
    f"exit {NO_STATUS}",
)


def stop_command(run_id: str) -> str:
    """Stop the program by the process id it recorded: TERM to its whole process group, then
    wait until it has ended (``tail --pid``), so that the next program started on the same
    workers finds the TPU free (nothing when there is none)."""
    pid = shlex.quote(f"{remote_run_dir(run_id)}/{PID_FILE}")
    return (
        f'if [ -f {pid} ]; then kill -TERM -"$(cat {pid})" 2>/dev/null || true; '
        f'tail --pid="$(cat {pid})" -f /dev/null; fi'
    )


def left_command(run_id: str) -> str:
    """Say :data:`RUNNING_MARKER` while the program whose process id was recorded runs, or
    :data:`ENDED_MARKER` once it has written its exit status, each followed by the segment
    that started it (nothing when no program was started here)."""
    segment = f'"$(cat {SEGMENT_FILE} 2>/dev/null)"'
    return "\n".join(
        [
            f"cd {shlex.quote(remote_run_dir(run_id))} 2>/dev/null || exit 0",
            f'if [ -f {PID_FILE} ] && kill -0 "$(cat {PID_FILE})" 2>/dev/null; then '
            f"echo {RUNNING_MARKER} {segment}; "
            f"elif [ -f {EXIT_FILE} ]; then echo {ENDED_MARKER} {segment}; fi",
        ]
    )


# ---- answers ----------------------------------------------------------------------------------
class Left(StrEnum):
    """The program a run started on the workers, as :func:`left_command` finds it."""

    RUNNING = "running"
    ENDED = "ended"
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ProgramLeft:
    state: Left
    segment: int | None = None
    """The run's segment that started it (None: it did not say)."""


_LEFT = re.compile(rf"^({RUNNING_MARKER}|{ENDED_MARKER})(?: +(\d+))? *$", re.M)


def program_left(logs: Mapping[int, str]) -> ProgramLeft:
    """Running while any worker's program runs; ended when one left its exit status (and none
    runs); the segment every worker that answered names, if they agree."""
    found = [m for text in logs.values() for m in _LEFT.finditer(text)]
    if not found:
        return ProgramLeft(Left.NONE)
    state = Left.RUNNING if any(m[1] == RUNNING_MARKER for m in found) else Left.ENDED
    segments = {m[2] for m in found}
    (only,) = segments if len(segments) == 1 else (None,)
    return ProgramLeft(state, int(only) if only else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerDevices:
    """One worker's ``TPU_TRAINER_DEVICES`` line."""

    process_index: int
    total: int
    local: int


def parse_devices(text: str) -> WorkerDevices | None:
    m = _DEVICES.search(text)
    if m is None:
        return None
    return WorkerDevices(process_index=int(m[1]), total=int(m[2]), local=int(m[3]))


def device_problems(logs: Mapping[int, str], slice: Slice) -> list[str]:
    """What is wrong with the workers' device counts (empty when each worker sees its own chips
    and all of them see the whole slice)."""
    per_host = slice.jax_devices // slice.hosts
    problems: list[str] = []
    for worker in range(slice.hosts):
        text = logs.get(worker)
        if text is None:
            problems.append(f"worker {worker}: no answer")
            continue
        found = parse_devices(text)
        if found is None:
            tail = [ln for ln in text.strip().splitlines() if ln.strip()][-1:] or ["(no output)"]
            problems.append(f"worker {worker}: JAX did not start: {tail[0][:300]}")
            continue
        if found.local != per_host:
            problems.append(
                f"worker {worker} sees {found.local} local JAX devices; "
                f"{slice.device_type} has {per_host} per host"
            )
        if found.total != slice.jax_devices:
            problems.append(
                f"worker {worker} sees {found.total} JAX devices in all; "
                f"{slice.device_type} has {slice.jax_devices}"
            )
    return problems


def failed_workers(stderr: str) -> dict[int, int]:
    """Worker -> exit status from gcloud's ``Command execution on worker N failed with exit
    status S`` lines."""
    return {int(m[1]): int(m[2]) for m in _WORKER_FAILED.finditer(stderr)}
