"""A generator of long MaxText training logs, modelled on MaxText 0.2.5's output.

Start-up lines (devices, parameters, the memory estimate), then for each step two lines of
chatter (data loader, checkpoint manager, metric writer) and the ``completed step:`` line of
``metric_logger.py``: about 150 bytes a line, one step line in three, as a real pretraining
log on worker 0 looks. The loss falls slowly with noise; step 250 000 (when the log reaches
it) is a loss spike of ``SPIKE_LOSS`` and a slow step, as a bad batch and a checkpoint save
give.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import TextIO

SPIKE_STEP = 250_000
SPIKE_LOSS = 9.5
SPIKE_SECONDS = 30.0
_STEP_SECONDS = 7.45
_TFLOPS = 32.0
_TOKENS = 550.0
_WEIGHTS = 262144
_PID = "140211532547904"
_HEADER = (
    "maxtext_utils.py:2098] Num_devices: 256, shape (1, 1, 64, 1, 1, 1, 4, 1, 1, 1, 1, 1)",
    "metric_logger.py:425] number parameters: 8.190 billion",
    "max_utils.py:823] [train] Total estimated memory size: 63.9 GB, estimated output size: "
    "1.2 GB, estimated temp size: 40.1 GB, estimated argument size: 22.6 GB.",
)


def _stamp(at: datetime) -> str:
    return f"I{at:%m%d %H:%M:%S.%f} {_PID}"


def write_log(out: TextIO, steps: int, seed: int = 0) -> None:
    """Write a MaxText log of ``steps`` steps (0 .. steps-1) to ``out``."""
    rng = random.Random(seed)  # noqa: S311 - noise in figures, not a secret
    at = datetime(2026, 11, 22, 3, 10, 12)
    for line in _HEADER:
        out.write(f"{_stamp(at)} {line}\n")
    loss = 12.15
    chunk: list[str] = []
    for step in range(steps):
        seconds = 485.0 if step == 0 else _STEP_SECONDS * (1 + rng.uniform(-0.02, 0.02))
        if step == SPIKE_STEP:
            seconds = SPIKE_SECONDS
        at += timedelta(seconds=seconds)
        loss = max(1.5, loss * 0.99995 - 0.00001) if step else loss
        shown = SPIKE_LOSS if step == SPIKE_STEP else loss + rng.uniform(-0.02, 0.02)
        tflops = _TFLOPS * _STEP_SECONDS / seconds
        tokens = _TOKENS * _STEP_SECONDS / seconds
        stamp = _stamp(at)
        chunk.append(
            f"{stamp} input_pipeline.py:118] data loader: prefetched batch {step + 1} "
            f"(shard {step % 64} of 64, 262144 tokens)\n"
            f"{stamp} checkpoint_manager.py:1532] [process=0] step {step}: no checkpoint "
            "saved; next at the save interval\n"
            f"{stamp} metric_logger.py:265] completed step: {step}, seconds: {seconds:.3f}, "
            f"TFLOP/s/device: {tflops:.3f}, Tokens/s/device: {tokens:.3f}, "
            f"total_weights: {_WEIGHTS}, loss: {shown:.3f}\n"
        )
        if len(chunk) == 512:
            out.write("".join(chunk))
            chunk.clear()
    out.write("".join(chunk))


def make_log(folder: Path, steps: int) -> Path:
    """The log of ``steps`` steps in ``folder`` (written once, reused)."""
    path = folder / f"maxtext-{steps}-steps.log"
    if not path.exists():
        part = path.with_suffix(".part")
        with part.open("w", encoding="utf-8") as out:
            write_log(out, steps)
        part.replace(path)
    return path
