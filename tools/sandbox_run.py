"""Running a command of the bash checks: its own process group, no standard input, output
captured, and the whole group killed when it outlasts its time (for the ``verify_*`` tools)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path


class SandboxTimeoutError(ValueError):
    """The command did not finish in time (its process group was killed)."""


def run_captured(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, str, str]:
    """Return code, standard output and standard error of ``argv``."""
    with subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise SandboxTimeoutError(f"bash did not finish within {timeout:g} s") from None
    return proc.returncode, out, err
