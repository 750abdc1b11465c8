"""Benchmark: wall time of a whole GKE rehearsal through the real gcloud and the emulated APIs.

Runs ``tpu-trainer train <recipe> --rehearse SCENARIO`` ``--runs`` times (default 3), each in
a fresh folder (its own home, run store and rehearsal state), and prints each run's wall time
and CPU time (user + system, of the run and all it started), min/median/max, and how many
gcloud, kubectl and xpk calls a run made (from its run store, which records every command the
tool runs; the real xpk's own gcloud calls are counted from the simulated cloud's call log),
with the gcloud command lines of the last run. Then where the last run's time went
(from its run store): each stage's wall time, and the seconds spent waiting for each tool's
commands (calls made in parallel are each counted whole). A rehearsal needs the real gcloud
(``gcloud``), kubectl, and the tool's xpk 1.16 (installed on first use, or by
``bash scripts/setup.sh dev``).

Exit status: 0 when the median is at most 30 s, else 1 (also when a run fails).

Usage: python bench/rehearsal_time.py [--runs N] [--scenario FILE] [--recipe DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from _timing import cli_path, median
from tpu_trainer.infra.tool_env import cache_dir, xpk_python

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "tests" / "fixtures" / "scenarios" / "failover_ready.yaml"
"""The failover on a cluster Kueue already serves for the slice (a repeat run); failover.yaml is
the same without Kueue: the run's first ``xpk cluster adapt`` then configures it."""
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


@dataclass(frozen=True, slots=True)
class Rehearsal:
    seconds: float
    calls: list[list[str]]
    """Every command the run recorded in its store (gcloud, kubectl, xpk, ...)."""
    profile: list[str]
    """Where the time went, as lines to print."""
    cpu_seconds: float = 0.0
    """User + system CPU time of the run and everything it started."""
    cloud_gcloud: int = 0
    """gcloud calls the simulated cloud saw: the tool's and xpk's own."""


def profile(store: Path) -> list[str]:
    """Stage wall times and command seconds per tool, from a run store."""
    db = sqlite3.connect(store)
    try:
        stages = db.execute(
            "SELECT name, finished_at - started_at FROM stages ORDER BY started_at"
        ).fetchall()
        commands = db.execute("SELECT argv, seconds FROM commands").fetchall()
    finally:
        db.close()
    lines = ["  stage " + ", ".join(f"{name} {secs or 0:.1f} s" for name, secs in stages)]
    per_tool: dict[str, list[float]] = {}
    for argv, secs in commands:
        tool = Path(json.loads(argv)[0]).name
        per_tool.setdefault(tool, []).append(float(secs))
    for tool, times in sorted(per_tool.items(), key=lambda kv: -sum(kv[1])):
        lines.append(
            f"  {tool:<8} {len(times):3d} calls {sum(times):6.1f} s "
            f"(mean {sum(times) / len(times):.2f} s, max {max(times):.2f} s)"
        )
    return lines


def rehearse(folder: Path, scenario: Path, recipe: Path) -> Rehearsal:
    """One rehearsal in ``folder``: its wall time, calls and profile."""
    target = folder / "recipe"
    shutil.copytree(recipe, target)
    argv = [str(cli_path()), "train", str(target), "--rehearse", str(scenario)]
    argv += ["--poll", "0.05", "--wait-timeout", "120"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=_env(folder), capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"the rehearsal exited with {done.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    state = json.loads((folder / "rehearsal" / "state.json").read_text(encoding="utf-8"))
    cloud_gcloud = sum(1 for c in state.get("calls", []) if c and c[0] == "gcloud")
    store = folder / "store" / "runs.db"
    return Rehearsal(elapsed, commands(store), profile(store), cpu, cloud_gcloud)


def commands(store: Path) -> list[list[str]]:
    """Every command line the run recorded, the tool as its bare name (``kubectl`` is the real
    one, which the fake cloud's call log never sees)."""
    db = sqlite3.connect(store)
    try:
        rows = db.execute("SELECT argv FROM commands ORDER BY id").fetchall()
    finally:
        db.close()
    argvs = [list(json.loads(argv)) for (argv,) in rows]
    return [[Path(a[0]).name, *a[1:]] for a in argvs if a]


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    times: list[float] = []
    last = Rehearsal(0.0, [], [])
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="rehearsal-time-") as tmp:
            last = rehearse(Path(tmp), args.scenario, args.recipe)
        times.append(last.seconds)
        print(
            f"run {i + 1}: {last.seconds:.1f} s, CPU {last.cpu_seconds:.1f} s "
            f"(load average {os.getloadavg()[0]:.1f})"
        )
    calls = last.calls
    counts = Counter(c[0] for c in calls)
    mid = median(times)
    print(
        f"\n{args.scenario.name}: min {min(times):.1f} s, median {mid:.1f} s, max {max(times):.1f} s"
    )
    print(
        "calls per run: "
        + ", ".join(f"{t} {counts.get(t, 0)}" for t in ("gcloud", "kubectl", "xpk"))
        + f" (the submit script's xpk workload create: bash {counts.get('bash', 0)}); "
        + f"gcloud calls the cloud saw, xpk's included: {last.cloud_gcloud}"
    )
    for c in calls:
        if c[0] == "gcloud":
            print("  " + " ".join(c)[:160])
    print("where the last run's time went:")
    print("\n".join(last.profile))
    verdict = "PASS" if mid <= TARGET_S else "FAIL"
    print(f"\nmedian {mid:.1f} s (target <= {TARGET_S:.0f} s): {verdict}")
    return 0 if mid <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
