"""Benchmark: the MaxText-configuration key check on every recipe of a folder, judged against the
MaxText version each recipe was written for and against the runtime's 0.2.5.

"Written for" is set as a user would set it, in the configuration (``maxtext_branch``): the
version its README pins, unless ``--written-for FOLDER=VERSION`` names another (a recipe whose
script was changed after its README's pin, say; give the evidence with the figure).

For each ``run_recipe.sh`` it prints the version chosen and why, and the keys that failed; then
the counts: recipes with a key failure under each judgement, and how many of the 0.2.5 failures
name a rename or another version (with the ``--unset``/``--set`` flags to paste).

Usage: python bench/maxtext_versions.py <folder> [--written-for FOLDER=VERSION ...]
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
    parser.add_argument(
        "--written-for",
        action="append",
        default=[],
        metavar="FOLDER=VERSION",
        help="the MaxText version a recipe folder (relative to <folder>) was written for, when "
        "its README's pin is not it",
    )
    args = parser.parse_args(argv)
    written = dict(w.split("=", 1) for w in args.written_for)
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.checks.run import fast_findings
    from tpu_trainer.frameworks.maxtext.version_select import recipe_pin
    from tpu_trainer.plan.plan import CheckOptions, Finding, Level, PlanOptions
    from tpu_trainer.recipes.recipe import Framework
    from tpu_trainer.recipes.resolve import Filters

    opts = PlanOptions(user="bench", now=datetime(2026, 11, 24, 6, 0), profiler=None)
    scripts = sorted(args.folder.rglob("run_recipe.sh"))
    failing = {"written for": 0, "0.2.5": 0}
    everywhere = {"written for": 0, "0.2.5": 0}
    explained = 0
    maxtext = 0
    for script in scripts:
        name = script.parent.relative_to(args.folder)
        base = plan_request(Request(str(script.parent), filters=Filters()), opts)
        if base.recipe.framework is not Framework.MAXTEXT:
            print(f"{name}: {base.recipe.framework.value}, not judged")
            continue
        maxtext += 1
        pin = recipe_pin(script)
        branch = written.get(str(name)) or (pin[0] if pin else None)
        for label, version in (("written for", None), ("0.2.5", "0.2.5")):
            config = replace(base.config, maxtext_branch=branch)
            plan = replace(base, config=config, checks=CheckOptions(maxtext_version=version))
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
        f"{failing['written for']} with the configuration's maxtext_branch set to the version "
        f"they were written for ({everywhere['written for']} only "
        f"on keys no known version has), {failing['0.2.5']} against 0.2.5 ({explained} name a "
        f"rename or another version; {everywhere['0.2.5']} only keys no version has)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
