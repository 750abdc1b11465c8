"""Benchmark: every fast check (what ``tpu-trainer check --fast`` runs) on every recipe of a folder.

For each ``run_recipe.sh`` it plans the recipe and runs the fast checks: the plan's findings,
recipe sanity, MaxText configuration (static), mesh, sharding, the memory estimate and data
sufficiency. It prints the time of the first (cold) pass over all recipes, split by check, the
findings that failed or warned, and a whole ``tpu-trainer check --fast`` process.

The pass/fail figure is the first pass (imports and MaxText's files read included); target < 5 s.
Exit status: 0 when under target and every recipe was checked, else 1.

Usage: python bench/check_recipes.py <folder>
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
import traceback
from collections import Counter
from datetime import datetime
from pathlib import Path

from _timing import cli_path, median, time_runs, verdict

TARGET_S = 5.0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="searched recursively for run_recipe.sh")
    args = parser.parse_args(argv)
    scripts = sorted(args.folder.rglob("run_recipe.sh"))
    if not scripts:
        print(f"no run_recipe.sh under {args.folder}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.checks.run import fast_findings
    from tpu_trainer.plan.plan import Level, PlanOptions
    from tpu_trainer.recipes.resolve import Filters

    imported = time.perf_counter() - start
    opts = PlanOptions(user="bench", now=datetime(2026, 11, 22, 6, 0), profiler=None)
    per_check: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    notes: list[str] = []
    failures: list[tuple[Path, str]] = []
    for script in scripts:
        try:
            plan = plan_request(Request(str(script.parent), filters=Filters()), opts)
            report = fast_findings(plan)
        except Exception:  # a benchmark reports every recipe that raised, not just the first
            failures.append((script, traceback.format_exc()))
            continue
        per_check.update(report.seconds)
        for f in report.findings:
            statuses[f.status.value] += 1
            if f.status is not Level.PASS:
                name = script.parent.relative_to(args.folder)
                notes.append(f"{f.status.value:4} {name}: {f.name}: {f.message[:150]}")
    total = time.perf_counter() - start
    print(f"recipes: {len(scripts)} run_recipe.sh under {args.folder}")
    print(f"{'phase':<28}{'seconds':>10}")
    print(f"{'import':<28}{imported:10.3f}")
    for name, seconds in per_check.most_common():
        print(f"{name:<28}{seconds:10.3f}")
    print(f"{'first pass, imports included':<28}{total:10.3f}")
    print(f"findings: {dict(statuses)}")
    for note in notes:
        print("  " + note)
    cli = [str(cli_path()), "check", "--fast", str(scripts[0].parent)]
    print(f"\n$ {shlex.join(cli)}")
    times = time_runs(cli, 3, ok_codes=(0, 1))
    print(f"process wall time, median of 3: {median(times):.3f} s")
    sys.stdout.flush()
    for script, trace in failures:
        print(f"\nFAILED {script}\n{trace}", file=sys.stderr)
    print(f"first pass: {total:.2f} s, target < {TARGET_S:g} s: {verdict(total, TARGET_S)}")
    return 0 if total < TARGET_S and not failures else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
