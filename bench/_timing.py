"""Helpers shared by the benchmark scripts: finding the CLI, timing subprocesses, summaries."""

from __future__ import annotations

import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def cli_path() -> Path:
    """The ``tpu-trainer`` console script next to this interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / "tpu-trainer"
    if beside.is_file():
        return beside
    found = shutil.which("tpu-trainer")
    if found is None:
        raise SystemExit("tpu-trainer not found next to the interpreter nor on PATH")
    return Path(found)


def time_command(argv: list[str], ok_codes: tuple[int, ...] = (0,)) -> float:
    """Wall time in seconds of one run of ``argv`` (stdout discarded); exit on failure."""
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in ok_codes:
        sys.stderr.write(done.stderr.decode(errors="replace"))
        raise SystemExit(f"{shlex.join(argv)} exited with {done.returncode}")
    return elapsed


def time_runs(argv: list[str], runs: int, ok_codes: tuple[int, ...] = (0,)) -> list[float]:
    """Wall times in seconds of ``runs`` sequential runs of ``argv``."""
    return [time_command(argv, ok_codes) for _ in range(runs)]


def median(values: list[float]) -> float:
    return statistics.median(values)


def verdict(value: float, target: float) -> str:
    return "PASS" if value < target else "FAIL"
