"""The whole crash matrix: every signal at every stage, each followed by ``tpu-trainer gc``.

Each case trains the tee-upload fixture recipe (TPU v7 4x4x4: a workload policy and a 16-host
node pool) on the fake cloud of tests/fixtures/scenarios/crash.yaml (a node pool create takes
4 s and cannot be deleted while it runs; pre-existing pools and a policy must survive), stops
it with the signal once the stage is seen, runs gc, and checks the fake cloud and the store.
Prints one line per case and the counts (tried / clean); exits 1 unless every case is clean.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path

from tpu_trainer.fakecloud.crash import SIGNALS, STAGES, Case, Outcome, Rehearsal, initial, run_case

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
RECIPE = FIXTURES / "recipes" / "training/ironwood/mixtral-moe/4k-fp8-tpu7x-4x4x4"
SCENARIO = FIXTURES / "scenarios" / "crash.yaml"


def _env(workdir: Path) -> dict[str, str]:
    """The tests' environment for a run: its own home, store and fake cloud under ``workdir``."""
    sys.path.insert(0, str(ROOT / "tests"))
    env = importlib.import_module("conftest").cli_env(workdir)
    return {str(k): str(v) for k, v in env.items()}


def one(base: Path, case: Case) -> tuple[Outcome | None, str, float]:
    workdir = base / f"{case.signal_name.replace(' ', '')}-{case.stage}"
    recipe = workdir / "recipe"
    shutil.copytree(RECIPE, recipe)
    reh = Rehearsal(workdir, recipe, SCENARIO, _env(workdir))
    started = time.monotonic()
    try:
        out = run_case(reh, case, initial(SCENARIO))
    except RuntimeError as e:  # the run ended before the stage (e.g. it was too quick)
        return None, str(e), time.monotonic() - started
    return out, "", time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signals", nargs="*", default=list(SIGNALS), choices=list(SIGNALS))
    parser.add_argument("--stages", nargs="*", default=list(STAGES), choices=list(STAGES))
    args = parser.parse_args()
    tried = clean = skipped = 0
    with tempfile.TemporaryDirectory(prefix="crash-matrix-") as tmp:
        for sig in args.signals:
            for stage in args.stages:
                out, why, seconds = one(Path(tmp), Case(sig, stage))
                if out is None:
                    skipped += 1
                    print(f"{sig:10} {stage:13} skipped ({why})  {seconds:5.1f} s", flush=True)
                    continue
                tried += 1
                clean += out.clean
                verdict = "clean" if out.clean else f"NOT CLEAN {out.left + out.touched}"
                codes = f"train exit {out.train_code}, gc exit {out.gc_code}"
                print(f"{sig:10} {stage:13} {verdict}  ({codes})  {seconds:5.1f} s", flush=True)
    print(f"tried {tried}, clean {clean}, skipped {skipped}")
    return 0 if tried and clean == tried else 1


if __name__ == "__main__":
    sys.exit(main())
