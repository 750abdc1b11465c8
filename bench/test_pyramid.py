"""Benchmark: the test pyramid: how many tests of each kind, and how long they take.

Counts the tests marked ``unit``, ``runtime`` and ``e2e`` (``pytest --collect-only``), then times
``pytest -q -m unit`` and, unless ``--unit-only``, the whole suite, each in one process run from
the project root with this interpreter. Prints each run's wall time and pytest's closing line.
The unit tests must finish in under a minute.

Exit status: 0 when every timed run passed and the unit run is under target, else 1.

Usage: python bench/test_pyramid.py [--unit-only]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from _timing import verdict

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("unit", "runtime", "e2e")
UNIT_TARGET_S = 60.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--unit-only", action="store_true", help="time the unit tests only, not the whole suite"
    )
    return parser.parse_args(argv)


def pytest_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]


def count(kind: str) -> int:
    """How many tests carry the marker ``kind``."""
    done = subprocess.run(
        pytest_argv("--collect-only", "-q", "-m", kind),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    return sum(1 for line in done.stdout.splitlines() if "::" in line)


def timed(label: str, args: list[str]) -> tuple[float, bool]:
    """Run pytest with ``args``; print its wall time and closing line. (seconds, passed)"""
    argv = pytest_argv(*args)
    print(f"$ {' '.join(['pytest', *args])}")
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    closing = lines[-1] if lines else "(no output)"
    print(f"{label:<12}{elapsed:9.1f} s   exit {done.returncode}   {closing}\n")
    return elapsed, done.returncode == 0


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    counts = {kind: count(kind) for kind in KINDS}
    print("tests per kind: " + ", ".join(f"{kind} {n}" for kind, n in counts.items()))
    print(f"total {sum(counts.values())}\n")
    unit_s, unit_ok = timed("unit", ["-q", "-m", "unit"])
    ok = unit_ok
    if not args.unit_only:
        _, whole_ok = timed("whole suite", ["-q"])
        ok = ok and whole_ok
    status = verdict(unit_s, UNIT_TARGET_S)
    print(f"unit tests {unit_s:.1f} s (target < {UNIT_TARGET_S:g} s): {status}")
    return 0 if ok and status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
