"""Wall time of `tpu-trainer train examples/local/tiny-llama` against MaxText run directly with
the same arguments (target: ratio <= 1.1).

Both use the installed MaxText runtime (`tpu-trainer runtime install maxtext` first); each is run
`--repeat` times (default 3) alternately, and the medians are compared.

    python bench/local_overhead.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.launchers.local.run import ENTRY_MODULE, base_config, local_args
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.runtime.manager import MAXTEXT, is_installed, runtime_python

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "local" / "tiny-llama"
TARGET = 1.1


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-2000:] + proc.stderr[-4000:])
        raise SystemExit(f"{argv[0]} failed with exit {proc.returncode}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not is_installed(MAXTEXT):
        print("install the runtime first: tpu-trainer runtime install maxtext")
        return 2
    python = runtime_python(MAXTEXT)
    maxtext_dir = next(python.parent.parent.glob("lib/python*/site-packages/maxtext"))
    tool = Path(sys.executable).parent / "tpu-trainer"
    tool_times: list[float] = []
    direct_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        example = work / "tiny-llama"
        shutil.copytree(EXAMPLE, example)
        plan = plan_request(
            Request(str(example)),
            PlanOptions(user="bench", now=datetime(2026, 11, 22), profiler=None),
        )
        direct = [
            str(python),
            "-m",
            ENTRY_MODULE,
            str(base_config(maxtext_dir, plan.recipe.entry.base_config)),
            *local_args(plan, work / "direct", "direct"),
        ]
        env = {
            **os.environ,
            "TPU_TRAINER_HOME": str(work / "store"),
            "JAX_PLATFORMS": "cpu",
            "TPU_TRAINER_CONFIG": "",
        }
        for _ in range(args.repeat):
            tool_times.append(_timed([str(tool), "train", str(example)], env))
            direct_times.append(_timed(direct, env))
    tool_med, direct_med = statistics.median(tool_times), statistics.median(direct_times)
    ratio = tool_med / direct_med
    print("tpu-trainer train: " + " ".join(f"{t:.1f}" for t in tool_times) + " s")
    print("MaxText directly:  " + " ".join(f"{t:.1f}" for t in direct_times) + " s")
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    print(
        f"median {tool_med:.1f} s vs {direct_med:.1f} s = {ratio:.3f} (target <= {TARGET}): {verdict}"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
