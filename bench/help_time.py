"""Benchmark: start-up time of ``tpu-trainer --help``.

Runs the console script next to this interpreter (else the one on PATH) ``--runs`` times
(default 10), stdout discarded, and prints min/median/max wall time; the median must be
under 0.5 s. Then runs ``python -X importtime -c "import tpu_trainer.cli.main"`` and lists
the 10 imports with the largest cumulative time, so slow imports are visible.

Exit status: 0 when the median is under target, else 1.

Usage: python bench/help_time.py [--runs N]
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from typing import NamedTuple

from _timing import cli_path, median, time_runs, verdict

TARGET_S = 0.5
TOP = 10
IMPORT_TARGET = "tpu_trainer.cli.main"


class ImportTime(NamedTuple):
    self_us: int
    cumulative_us: int
    module: str


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="how many times to run --help")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def parse_importtime(stderr: str) -> list[ImportTime]:
    """Rows of ``-X importtime`` output (``import time: self | cumulative | name``)."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = line.removeprefix("import time:").split("|")
        if len(fields) != 3 or not fields[0].strip().isdigit():
            continue  # the header line
        rows.append(ImportTime(int(fields[0]), int(fields[1]), fields[2].strip()))
    return rows


def import_times() -> list[ImportTime]:
    argv = [sys.executable, "-X", "importtime", "-c", f"import {IMPORT_TARGET}"]
    print(f"$ {shlex.join(argv)}")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"importing {IMPORT_TARGET} failed ({done.returncode})")
    return parse_importtime(done.stderr)


def print_imports(rows: list[ImportTime]) -> None:
    top = sorted(rows, key=lambda r: r.cumulative_us, reverse=True)[:TOP]
    print(f"top {len(top)} of {len(rows)} imports by cumulative time:")
    print(f"{'cumulative ms':>14}{'self ms':>10}  module")
    for row in top:
        print(f"{row.cumulative_us / 1000:14.1f}{row.self_us / 1000:10.1f}  {row.module}")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    command = [str(cli_path()), "--help"]
    print(f"$ {shlex.join(command)}   (x{args.runs}, stdout to /dev/null)")
    times = time_runs(command, args.runs)
    mid = median(times)
    print(f"min {min(times):.3f} s, median {mid:.3f} s, max {max(times):.3f} s")
    print("runs: " + " ".join(f"{t:.3f}" for t in times) + "\n")
    print_imports(import_times())
    status = verdict(mid, TARGET_S)
    print(f"\n--help median {mid:.2f} s (target < {TARGET_S:g} s): {status}")
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
