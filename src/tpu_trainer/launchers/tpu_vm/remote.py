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

from tpu_trainer.frameworks.vm_program import (
    VmProgram,
    remote_run_dir,
    remote_venv,
    venv_from_run_dir,
)
from tpu_trainer.plan.slices import Slice

DEVICES_MARKER = "TPU_TRAINER_DEVICES"
RUNNING_MARKER = "TPU_TRAINER_RUNNING"
PID_FILE = "train.pid"
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


def train_command(program: VmProgram, run_id: str) -> str:
    """Start the program in the run folder, its process id in ``train.pid`` (``exec`` keeps
    the shell's pid for the program)."""
    words = [
        "exec",
        "env",
        *(f"{k}={shlex.quote(v)}" for k, v in program.env),
        shlex.quote(venv_from_run_dir(program.key) + "/bin/python"),
        *(shlex.quote(a) for a in program.args),
    ]
    return f"cd {shlex.quote(remote_run_dir(run_id))} && echo $$ > {PID_FILE} && " + " ".join(words)


def stop_command(run_id: str) -> str:
    """Stop the program by the process id it recorded (nothing when there is none)."""
    pid = shlex.quote(f"{remote_run_dir(run_id)}/{PID_FILE}")
    return f'if [ -f {pid} ]; then kill -TERM "$(cat {pid})" 2>/dev/null || true; fi'


def running_command(run_id: str) -> str:
    """Say :data:`RUNNING_MARKER` when the program whose process id was recorded still runs."""
    pid = shlex.quote(f"{remote_run_dir(run_id)}/{PID_FILE}")
    return f'if [ -f {pid} ] && kill -0 "$(cat {pid})" 2>/dev/null; then echo {RUNNING_MARKER}; fi'


# ---- answers ----------------------------------------------------------------------------------
def still_running(logs: Mapping[int, str]) -> bool:
    """Whether a worker answered :func:`running_command` with the marker."""
    return any(RUNNING_MARKER in text for text in logs.values())


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
