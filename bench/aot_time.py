"""Benchmark: wall time of the AOT memory-fit check per model size, then of its cached answer.

For each case it compiles MaxText's train step for the topology (a fresh result cache, so the
compile really runs), then asks the same check again: that answer must come from the cache
without starting the runtime. It also prints the raw (uncalibrated) estimate next to the
compiler's figure (the ratio is what ``memory_estimate.CALIBRATION`` records).

Needs the MaxText runtime (``tpu-trainer runtime install maxtext``). Exit status: 0 when every
repeat came from the cache in under a second, else 1.

Usage: python bench/aot_time.py [--cases tiny,llama3.1-8b,llama3-70b]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from tpu_trainer.checks.aot import AotSetup, check_aot, run_aot
from tpu_trainer.checks.memory_estimate import GIB, raw_estimate
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.infra.runner import CommandResult, CommandRunner, SubprocessRunner
from tpu_trainer.plan.slices import Slice

TARGET_CACHED_S = 1.0
TINY = (
    "model_name=default",
    "base_emb_dim=256",
    "base_num_decoder_layers=2",
    "base_mlp_dim=512",
    "base_num_query_heads=4",
    "base_num_kv_heads=4",
    "head_dim=64",
    "per_device_batch_size=1",
    "max_target_length=128",
)
CASES: Mapping[str, tuple[str, tuple[str, ...]]] = {
    "tiny": ("tpu7x-8", TINY),
    "llama3.1-8b": (
        "tpu7x-8",
        ("model_name=llama3.1-8b", "per_device_batch_size=2", "max_target_length=2048"),
    ),
    "llama3-70b": (
        "tpu7x-8",
        ("model_name=llama3-70b", "per_device_batch_size=1", "max_target_length=2048"),
    ),
}


@dataclass
class CountingRunner:
    """Runs for real and counts the commands."""

    inner: CommandRunner = field(default_factory=SubprocessRunner)
    calls: int = 0

    def run(self, argv: Sequence[str], **kwargs: object) -> CommandResult:
        self.calls += 1
        return self.inner.run(argv, **kwargs)  # type: ignore[arg-type]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", default="tiny,llama3.1-8b,llama3-70b", help=f"of {', '.join(CASES)}"
    )
    args = parser.parse_args(argv)
    configs = MaxTextConfigs.load()
    ok = True
    print(
        f"{'case':<12} {'slice':<8} {'outcome':<14} {'AOT bytes':>13} {'AOT GiB':>8} "
        f"{'raw GiB':>8} {'raw/AOT':>7} {'compile s':>9} {'cached s':>9} {'check s':>8}"
    )
    with tempfile.TemporaryDirectory(prefix="aot-bench-") as folder:
        setup = replace(AotSetup.installed(), cache=Path(folder))
        for name in args.cases.split(","):
            device, words = CASES[name]
            request = MaxTextRequest.from_args(list(words), Slice.parse(device))
            runner = CountingRunner()
            started = time.perf_counter()
            result = run_aot(request, runner, setup)
            compiled = time.perf_counter() - started
            started = time.perf_counter()
            again = run_aot(request, runner, setup)
            cached = time.perf_counter() - started
            started = time.perf_counter()
            check_aot(request, runner, setup=setup)
            checked = time.perf_counter() - started
            estimate = raw_estimate(configs.effective(request.args), request.slice)
            aot = result.bytes_per_device or 0.0
            ratio = f"{estimate.total / aot:.4f}" if aot else "-"
            ok &= runner.calls == 1 and again.from_cache and checked < TARGET_CACHED_S
            print(
                f"{name:<12} {device:<8} {result.outcome.value:<14} {aot:>13.0f} "
                f"{aot / GIB:>8.2f} {estimate.total / GIB:>8.2f} {ratio:>7} {compiled:>9.1f} "
                f"{cached:>9.4f} {checked:>8.3f}"
            )
    print(
        f"cached answers < {TARGET_CACHED_S:.0f} s without a runtime start: "
        f"{'PASS' if ok else 'FAIL'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
