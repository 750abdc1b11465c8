"""Benchmark: the MaxText-configuration key check on every recipe of a folder, judged against the
MaxText version each recipe was written for (its README's pin) and against the runtime's 0.2.5.

For each ``run_recipe.sh`` it prints the version chosen and why, and the keys that failed; then
the counts: recipes with a key failure under each judgement, and how many of the 0.2.5 failures
name a rename or another version (with the ``--unset``/``--set`` flags to paste).

Usage: python bench/maxtext_versions.py <folder>
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import replace
from datetime import datetime
from pathlib import Path

_KEY = re.compile(r"; \d+ here: (.*)$")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="searched recursively for run_recipe.sh")
    args = parser.parse_args(argv)
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.checks.run import fast_findings
    from tpu_trainer.plan.plan import CheckOptions, Finding, Level, PlanOptions
    from tpu_trainer.recipes.recipe import Framework
    from tpu_trainer.recipes.resolve import Filters

    opts = PlanOptions(user="bench", now=datetime(2026, 11, 24, 6, 0), profiler=None)
    scripts = sorted(args.folder.rglob("run_recipe.sh"))
    failing = {"pinned": 0, "0.2.5": 0}
    everywhere = {"pinned": 0, "0.2.5": 0}
    explained = 0
    maxtext = 0
    for script in scripts:
        name = script.parent.relative_to(args.folder)
        base = plan_request(Request(str(script.parent), filters=Filters()), opts)
        if base.recipe.framework is not Framework.MAXTEXT:
            print(f"{name}: {base.recipe.framework.value}, not judged")
            continue
        maxtext += 1
        for label, version in (("pinned", None), ("0.2.5", "0.2.5")):
            plan = replace(base, checks=CheckOptions(maxtext_version=version))
            found = fast_findings(plan).findings
            why = next(f.message for f in found if f.name == "maxtext-config version")
            keys: list[Finding] = [
                f for f in found if f.name == "maxtext-config keys" and f.status is Level.FAIL
            ]
            shown = _KEY.search(keys[0].message).group(1) if keys else "none"  # type: ignore[union-attr]
            print(f"{name} [{label}] {why}: key failures: {shown[:160]}")
            if keys:
                failing[label] += 1
                print(f"    fix: {keys[0].fix.rsplit('Add to the command: ', 1)[-1]}")
                between = ("renamed", "newer name", "setting of")
                moved = any(w in shown for w in between)
                explained += label == "0.2.5" and moved
                everywhere[label] += not moved
    print(
        f"\nMaxText recipes: {maxtext} of {len(scripts)}; with a key failure: "
        f"{failing['pinned']} judged against their pinned version ({everywhere['pinned']} only "
        f"on keys no known version has), {failing['0.2.5']} against 0.2.5 ({explained} name a "
        f"rename or another version; {everywhere['0.2.5']} only keys no version has)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
