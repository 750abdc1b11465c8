"""Benchmark: plan every recipe under a folder in one process.

The recipes are every ``run_recipe.sh`` (xpk and cluster_toolkit variants alike), every
script or README that runs MaxText's benchmark runner (Trillium scripts, v5p READMEs), and every
README that submits a training script (``--command "bash <script> ..."``, v5p), each planned by
its own path. ``--list`` also names the READMEs the tool refuses as another framework's
(TensorFlow), with the reason it gives.

For each recipe it runs what ``tpu-trainer plan``/``scripts`` compute: the plan, both
generated scripts (setup and submit) and the plan as JSON text. It reports the time to
import the library, the first (cold) pass over all recipes, and the best and median of
``--repeat`` further passes, split by stage. It then times a whole
``tpu-trainer plan <recipe> --json`` process (median of 5).

The pass/fail figure is the first pass (after imports); the target is < 2 s.
Exit status: 0 when under target and every recipe planned, else 1.

Usage: python bench/plan_recipes.py <folder> [--repeat N] [--list]
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from _timing import cli_path, median, time_runs, verdict

if TYPE_CHECKING:
    from tpu_trainer.plan.plan import PlanOptions

TARGET_S = 2.0
CLI_RUNS = 5
STAGES = ("plan", "setup script", "submit script", "json")


@dataclass
class PassResult:
    """One pass over the recipes: wall time, time per stage, and the recipes that raised."""

    total: float = 0.0
    stages: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STAGES, 0.0))
    failures: list[tuple[Path, str]] = field(default_factory=list)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="searched recursively for recipes")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes after the first")
    parser.add_argument(
        "--list", action="store_true", help="print each recipe with its slice and failed checks"
    )
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    return args


def find_recipes(folder: Path) -> list[Path]:
    """``run_recipe.sh`` files, and scripts and READMEs that run the benchmark runner."""
    from tpu_trainer.recipes.resolve import RECIPE_FILE, is_runner_recipe

    runner = [
        p
        for p in folder.rglob("*")
        if (p.suffix == ".sh" and p.name != RECIPE_FILE) or p.name == "README.md"
    ]
    return sorted([*folder.rglob(RECIPE_FILE), *(p for p in runner if is_runner_recipe(p))])


def is_script_readme(path: Path) -> bool:
    from tpu_trainer.recipes.script_readme import mentions_script_command

    return path.suffix == ".md" and mentions_script_command(path.read_text(encoding="utf-8"))


def list_refused(folder: Path, scripts: list[Path]) -> None:
    """READMEs of other frameworks the tool refuses, with the reason it gives."""
    from tpu_trainer.recipes.resolve import other_framework

    for readme in sorted(set(folder.rglob("README.md")) - set(scripts)):
        refusal = other_framework(readme)
        if refusal is not None:
            print(f"  REFUSED {readme.relative_to(folder)}: {refusal.message}")


def import_library() -> float:
    """Import the modules the benchmark uses; return the seconds it took."""
    start = time.perf_counter()

    return time.perf_counter() - start


def make_options() -> PlanOptions:
    from tpu_trainer.plan.plan import PlanOptions

    return PlanOptions(user="bench", now=datetime(2026, 11, 22, 6, 0))


def plan_one(script: Path, opts: PlanOptions, stages: dict[str, float]) -> None:
    """Plan one recipe and render its scripts and JSON, adding each stage's time to ``stages``."""
    from tpu_trainer.app.plan_json import plan_json
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.plan.scripts import render_setup, render_submit
    from tpu_trainer.recipes.resolve import Filters

    t0 = time.perf_counter()
    plan = plan_request(Request(str(script), filters=Filters()), opts)
    t1 = time.perf_counter()
    render_setup(plan)
    t2 = time.perf_counter()
    render_submit(plan)
    t3 = time.perf_counter()
    json.dumps(plan_json(plan), indent=2)
    t4 = time.perf_counter()
    for name, seconds in zip(STAGES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
        stages[name] += seconds


def run_pass(scripts: list[Path], opts: PlanOptions) -> PassResult:
    result = PassResult()
    start = time.perf_counter()
    for script in scripts:
        try:
            plan_one(script, opts, result.stages)
        except Exception:  # a benchmark reports every failing recipe, not just the first
            result.failures.append((script, traceback.format_exc()))
    result.total = time.perf_counter() - start
    return result


def report_failures(failures: list[tuple[Path, str]]) -> None:
    sys.stdout.flush()  # keep the order when both streams go to one pipe
    for script, trace in failures:
        print(f"\nFAILED {script}\n{trace}", file=sys.stderr)


def print_table(count: int, import_s: float, first: PassResult, passes: list[PassResult]) -> None:
    totals = [p.total for p in passes]
    rows = [
        ("import tpu_trainer", import_s, None),
        ("first pass", first.total, first.total),
        (f"best of {len(passes)}", min(totals), min(totals)),
        (f"median of {len(passes)}", statistics.median(totals), statistics.median(totals)),
    ]
    print(f"{'phase':<24}{'seconds':>10}{'ms/recipe':>12}")
    for name, seconds, per in rows:
        per_text = f"{per / count * 1000:12.2f}" if per is not None else ""
        print(f"{name:<24}{seconds:10.3f}{per_text}")
    print(f"\n{'stage (best of ' + str(len(passes)) + ')':<24}{'seconds':>10}{'ms/recipe':>12}")
    for stage in STAGES:
        best = min(p.stages[stage] for p in passes)
        print(f"{stage:<24}{best:10.3f}{best / count * 1000:12.2f}")


def list_plans(scripts: list[Path], folder: Path, opts: PlanOptions) -> None:
    """One line per recipe: its slice, and the checks its plan already fails."""
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.plan.plan import Level
    from tpu_trainer.recipes.resolve import Filters

    for script in scripts:
        shown = script.relative_to(folder)
        try:
            plan = plan_request(Request(str(script), filters=Filters()), opts)
        except Exception as e:  # a benchmark lists every recipe, the refused ones too
            print(f"  REFUSED {shown}: {str(e).splitlines()[0]}")
            continue
        failed = [f.name for f in plan.findings if f.status is Level.FAIL]
        note = f"  failing {', '.join(failed)}" if failed else ""
        print(f"  {shown}: {plan.slice.device_type} x{plan.num_slices}{note}")


def time_cli(script: Path) -> list[float]:
    argv = [str(cli_path()), "plan", str(script), "--json"]
    print(f"\n$ {shlex.join(argv)}")
    return time_runs(argv, CLI_RUNS)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    scripts = find_recipes(args.folder)
    if not scripts:
        print(f"no run_recipe.sh under {args.folder}", file=sys.stderr)
        return 1
    shells = sum(s.name == "run_recipe.sh" for s in scripts)
    readmes = sum(is_script_readme(s) for s in scripts)
    print(
        f"recipes: {len(scripts)} under {args.folder} ({shells} run_recipe.sh, "
        f"{len(scripts) - shells - readmes} benchmark-runner scripts and READMEs, "
        f"{readmes} READMEs submitting a training script)"
    )
    import_s = import_library()
    opts = make_options()
    if args.list:
        list_plans(scripts, args.folder, opts)
        list_refused(args.folder, scripts)
    first = run_pass(scripts, opts)
    report_failures(first.failures)
    failed = {script for script, _ in first.failures}
    ok = [s for s in scripts if s not in failed]
    if not ok:
        return 1
    passes = [run_pass(ok, opts) for _ in range(args.repeat)]
    print_table(len(ok), import_s, first, passes)
    cli = time_cli(ok[0])
    print(
        f"process wall time, median of {CLI_RUNS}: {median(cli):.3f} s"
        f" (min {min(cli):.3f}, max {max(cli):.3f})\n"
    )
    status = verdict(first.total, TARGET_S)
    if failed:
        status = f"FAIL ({len(failed)} of {len(scripts)} recipes raised)"
    print(f"planned {len(ok)} recipes in {first.total:.2f} s (target < {TARGET_S:g} s): {status}")
    return 0 if status == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
