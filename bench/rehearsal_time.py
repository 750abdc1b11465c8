"""Benchmark: wall time of a whole GKE rehearsal through the real gcloud and the emulated APIs.

Runs ``tpu-trainer train <recipe> --rehearse SCENARIO`` ``--runs`` times (default 3), each in
a fresh folder (its own home, run store and rehearsal state), and prints each run's wall time,
min/median/max, and how many gcloud, kubectl and xpk calls a run made (from the rehearsal's
state file), with the gcloud command lines of the last run. A rehearsal needs the real gcloud
(``gcloud``) and xpk's environment (``bash scripts/setup.sh dev``).

Exit status: 0 when the median is at most 30 s, else 1 (also when a run fails).

Usage: python bench/rehearsal_time.py [--runs N] [--scenario FILE] [--recipe DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from _timing import cli_path, median
from tpu_trainer.fakecloud.state import recorded_calls
from tpu_trainer.infra.tool_env import cache_dir, xpk_python

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "tests" / "fixtures" / "scenarios" / "failover.yaml"
RECIPE = (
    ROOT / "tests" / "fixtures" / "recipes" / "training" / "ironwood" / "mixtral-moe"
    / "4k-fp8-tpu7x-4x4x4"
)  # fmt: skip
TARGET_S = 30.0


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="how many rehearsals to time")
    parser.add_argument("--scenario", type=Path, default=SCENARIO)
    parser.add_argument("--recipe", type=Path, default=RECIPE)
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def _env(folder: Path) -> dict[str, str]:
    home = folder / "home"
    home.mkdir(parents=True, exist_ok=True)
    return {
        **os.environ,
        "HOME": str(home),
        "TPU_TRAINER_CONFIG": "",
        "TPU_TRAINER_HOME": str(folder / "store"),
        "TPU_TRAINER_REHEARSAL_DIR": str(folder / "rehearsal"),
        "TPU_TRAINER_XPK_PYTHON": str(xpk_python()),
        "TPU_TRAINER_CACHE": str(cache_dir()),
    }


def rehearse(folder: Path, scenario: Path, recipe: Path) -> tuple[float, list[list[str]]]:
    """One rehearsal in ``folder``: its wall time and the calls its fake cloud recorded."""
    target = folder / "recipe"
    shutil.copytree(recipe, target)
    argv = [str(cli_path()), "train", str(target), "--rehearse", str(scenario)]
    argv += ["--poll", "0.05", "--wait-timeout", "120"]
    start = time.perf_counter()
    done = subprocess.run(argv, env=_env(folder), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"the rehearsal exited with {done.returncode}")
    return elapsed, recorded_calls(folder / "rehearsal" / "state.json")


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    times: list[float] = []
    calls: list[list[str]] = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="rehearsal-time-") as tmp:
            elapsed, calls = rehearse(Path(tmp), args.scenario, args.recipe)
        times.append(elapsed)
        print(f"run {i + 1}: {elapsed:.1f} s")
    counts = Counter(c[0] for c in calls)
    mid = median(times)
    print(
        f"\n{args.scenario.name}: min {min(times):.1f} s, median {mid:.1f} s, max {max(times):.1f} s"
    )
    print(
        "calls per run: "
        + ", ".join(f"{t} {counts.get(t, 0)}" for t in ("gcloud", "kubectl", "xpk"))
    )
    for c in calls:
        if c[0] == "gcloud":
            print("  " + " ".join(c)[:160])
    verdict = "PASS" if mid <= TARGET_S else "FAIL"
    print(f"\nmedian {mid:.1f} s (target <= {TARGET_S:.0f} s): {verdict}")
    return 0 if mid <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
