"""Benchmark: parse a MaxText log stream of ``--mb`` MiB (default 1024) in constant memory.

A child process (this script with ``--emit``) writes a synthetic log to a pipe, as
``kubectl logs -f ... | tpu-trainer collect -`` would: absl-prefixed noise (config dumps,
XLA and GKE chatter, Ray-prefixed lines, long HLO lines) with one step line every ~50 lines,
cycling through every step-line variant the parser reads (plain 0.2.5, Ray prefix with
colours, Ray ``[repeated Nx]``, before 0.2.2, MoE/MTP suffixes with ``diag:``, rampup). Nothing
is written to disk. This process reads the pipe line by line through
``tpu_trainer.frameworks.maxtext.log.iter_events``, keeps only counters, and checks that every
step arrived, in order.

Prints throughput (MiB of log per wall-clock second, and per CPU second of the parsing
process), step lines found, and peak RSS before and after parsing (``resource.getrusage``).

Exit status: 0 when throughput is at least 100 MiB/s and every step was found, else 1.

Usage: python bench/parse_stream.py [--mb N]
"""

from __future__ import annotations

import argparse
import io
import resource
import subprocess
import sys
import time
from collections.abc import Iterator

from tpu_trainer.frameworks.maxtext.log import iter_events
from tpu_trainer.metrics.records import FactKind, StartupFact, StepRecord

TARGET_MB_S = 100.0
MIB = 1 << 20
LINES_PER_STEP = 50
STEPS_PER_WRITE = 64

_T = "I1122 04:31:07.250114 139763251608448"
_RAY = "\x1b[36m(RayTrainWorker pid=21663, ip=10.12.3.6)\x1b[0m"
HEADER = [
    f"{_T} max_utils.py:835] System Information: Jax Version: 0.12.0.1",
    f"{_T} maxtext_utils.py:2098] Num_devices: 256, shape (1, 1, 256, 1, 1, 1, 1, 1, 1, 1, 1, 1)",
    f"{_T} max_utils.py:823] [train] Total estimated memory size: 63.9 GB, estimated output "
    "size: 1.2 GB, estimated temp size: 40.1 GB, estimated argument size: 22.6 GB.",
    f"{_T} metric_logger.py:425] number parameters: 671.026 billion",
    "Memstats: After params initialized:",
    f"{_T} max_utils.py:786] \tUsing (GB) 52.73 / 94.75 (55.65%) on TPU_0(process=0,(0,0,0,0))",
]
HEADER_FACTS = 5
"""Start-up facts in HEADER: devices, memory estimate, parameters, two Memstats lines."""
NOISE = [
    f"{_T} pyconfig.py:591] Config param attention: autoselected",
    f"{_T} pyconfig.py:591] Config param dcn_parallelism: [1, -1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]",
    f"{_T} checkpointing.py:803] No existing checkpoints found, not restoring checkpoint.",
    "I1122 04:31:07.250114    1701 pjrt_client.cc:587] PjRt-IFRT device count: total=256, "
    "addressable=8",
    f"{_T} metric_logger.py:393] To see full metrics 'tensorboard --logdir=gs://b/run/tb/'",
    "W1122 04:31:07.250114    1701 hlo_pass.cc:118] fusion.1234 = bf16[8192,7168]{1,0} "
    "fusion(bf16[8192,7168]{1,0} %param.1, bf16[7168]{0} %broadcast.77), kind=kLoop, "
    'calls=%fused_computation.1234, metadata={op_name="jit(train_step)/decoder/layers/mlp" '
    'source_file="/deps/src/maxtext/layers/linears.py" source_line=412}',
    f"{_RAY} {_T} data_loader.py:74] Prefetching batch 1024 from grain iterator",
    "2026-11-22 04:31:07,250\tINFO worker.py:1821 -- Connecting to existing Ray cluster.",
    'time="2026-11-22T04:31:07Z" level=info msg="pod jax-tpu-1-0 container jax-tpu Running"',
    "  warnings.warn(  # deprecated: jax.experimental.shard_map is now jax.shard_map",
]
_TAIL = "lm_loss: {l:.3f}, perplexity: 1.0"
STEP_FORMATS = [
    f"{_T} metric_logger.py:265] completed step: {{n}}, seconds: 22.390, TFLOP/s/device: "
    f"366.500, Tokens/s/device: 731.753, total_weights: 4194304, loss: {{l:.3f}}, {_TAIL}",
    f"{_RAY} {_T} metric_logger.py:265] completed step: {{n}}, seconds: 1.100, TFLOP/s/device: "
    "179.739, Tokens/s/device: 3723.636, total_weights: 65536, loss: {l:.3f}",
    "(RayTrainWorker pid=3877, ip=10.12.5.9) completed step: {n}, seconds: 1.103, "
    "TFLOP/s/device: 179.250, Tokens/s/device: 3713.509, total_weights: 65536, loss: {l:.3f} "
    "\x1b[2m[repeated 3x across cluster]\x1b[0m",
    f"{_T} train.py:612] completed step: {{n}}, seconds: 1.513, TFLOP/s/device: 94.204, "
    "Tokens/s/device: 5414.408, total_weights: 65536, loss: {l:.3f}",
    f"{_T} metric_logger.py:265] completed step: {{n}}, seconds: 4.401, TFLOP/s/device: "
    "293.206, Tokens/s/device: 1861.395, total_weights: 131072, loss: {l:.3f}, moe_lb_loss: "
    "0.0224, main_model_loss: 8.268, mtp_loss: 1.262, diag: grad_norm=0.913, max_logits=28.4",
    f"{_T} metric_logger.py:265] [Rampup Batch Size Phase], completed step: {{n}}, seconds: "
    "0.611, total_weights: 24576, loss: {l:.3f}",
]


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="MiB of log to stream")
    parser.add_argument("--emit", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mb < 1:
        parser.error("--mb must be at least 1")
    return args


# ---- the writer (child process) --------------------------------------------------------------
def noise_blocks() -> list[str]:
    """A few different runs of ``LINES_PER_STEP - 1`` noise lines, each ending in a newline."""
    blocks = []
    for shift in range(len(NOISE)):
        lines = [NOISE[(shift + i) % len(NOISE)] for i in range(LINES_PER_STEP - 1)]
        blocks.append("\n".join(lines) + "\n")
    return blocks


def chunks(total_bytes: int) -> Iterator[tuple[bytes, int]]:
    """Encoded pieces of the stream and how many step lines each holds, until ``total_bytes``."""
    blocks = noise_blocks()
    yield ("\n".join(HEADER) + "\n").encode(), 0
    sent, step = 0, 0
    while sent < total_bytes:
        parts = []
        for _ in range(STEPS_PER_WRITE):
            parts.append(blocks[step % len(blocks)])
            fmt = STEP_FORMATS[step % len(STEP_FORMATS)]
            parts.append(fmt.format(n=step, l=12.0 - step * 1e-6) + "\n")
            step += 1
        data = "".join(parts).encode()
        sent += len(data)
        yield data, STEPS_PER_WRITE


def emit(total_bytes: int) -> None:
    """Write the stream to standard output; report bytes and steps on standard error."""
    out = sys.stdout.buffer
    written = steps = 0
    for data, n in chunks(total_bytes):
        out.write(data)
        written += len(data)
        steps += n
    out.flush()
    sys.stderr.write(f"{written} {steps}\n")


# ---- the reader (this process) ---------------------------------------------------------------
def peak_rss_mib(who: int = resource.RUSAGE_SELF) -> float:
    """Peak resident set size in MiB (Linux reports KiB)."""
    return resource.getrusage(who).ru_maxrss / 1024


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def parse(stream: io.TextIOWrapper) -> tuple[int, int, int]:
    """Steps found, steps out of order, start-up facts found (only counters are kept)."""
    steps = facts = out_of_order = 0
    expected = 0
    for event in iter_events(stream):
        if isinstance(event, StepRecord):
            out_of_order += event.step != expected
            expected = event.step + 1
            steps += 1
        elif isinstance(event, StartupFact) and event.kind is not FactKind.LOG_START:
            facts += 1
    return steps, out_of_order, facts


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    if args.emit:
        emit(args.mb * MIB)
        return 0
    command = [sys.executable, __file__, "--emit", "--mb", str(args.mb)]
    rss_before = peak_rss_mib()
    cpu_before = cpu_seconds()
    start = time.perf_counter()
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=MIB
    ) as child:
        assert child.stdout is not None and child.stderr is not None
        stream = io.TextIOWrapper(child.stdout, encoding="utf-8", errors="replace")
        steps, out_of_order, facts = parse(stream)
        wall = time.perf_counter() - start
        cpu = cpu_seconds() - cpu_before
        report = child.stderr.read().decode()
    if child.returncode != 0:
        sys.stderr.write(report)
        return 1
    sent_bytes, sent_steps = (int(x) for x in report.split())
    return show(args, sent_bytes, sent_steps, (steps, out_of_order, facts), wall, cpu, rss_before)


def show(
    args: argparse.Namespace,
    sent_bytes: int,
    sent_steps: int,
    found: tuple[int, int, int],
    wall: float,
    cpu: float,
    rss_before: float,
) -> int:
    steps, out_of_order, facts = found
    mib = sent_bytes / MIB
    rate = mib / wall
    print(f"stream: {mib:,.1f} MiB through a pipe from a writer process (--mb {args.mb})")
    print(f"lines: ~{sent_steps * LINES_PER_STEP:,}, step lines sent: {sent_steps:,}")
    print(f"step lines parsed: {steps:,} (out of order: {out_of_order}), start-up facts: {facts}")
    print(f"wall time: {wall:.2f} s, parsing process CPU time: {cpu:.2f} s")
    print(f"throughput: {rate:,.1f} MiB/s wall, {mib / cpu:,.1f} MiB/s per CPU second")
    print(
        f"peak RSS of the parsing process: {peak_rss_mib():.1f} MiB "
        f"({rss_before:.1f} MiB before parsing); writer process: "
        f"{peak_rss_mib(resource.RUSAGE_CHILDREN):.1f} MiB"
    )
    complete = steps == sent_steps and out_of_order == 0 and facts == HEADER_FACTS
    verdict = "PASS" if rate >= TARGET_MB_S and complete else "FAIL"
    print(
        f"{rate:,.1f} MiB/s (target >= {TARGET_MB_S:g} MiB/s), all steps found: {complete}: {verdict}"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
