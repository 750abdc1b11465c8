"""The Hugging Face runtime: Transformers with a CPU build of PyTorch, for smoke-testing the
generated training script on this machine (``train_hf.py --cpu``).

Python 3.11 and ``torch==2.13.0``: pip takes the CPU build of that release when a wheel of it
lies in the configured find-links (about 190 MB, no CUDA packages); elsewhere the same pin
installs PyPI's default build, larger but just as usable on a CPU. The other packages are
pinned to the versions the TPU program installs. It is made like every runtime
(``tpu-trainer runtime install hf``).
"""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.frameworks.hf.program import ACCELERATE_VERSION, TRANSFORMERS_VERSION
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.runtime.manager import Progress, RuntimeSpec, install

TORCH_VERSION = "2.13.0"
HF = RuntimeSpec(
    "hf",
    f"{TRANSFORMERS_VERSION}-torch-{TORCH_VERSION}",
    f"transformers=={TRANSFORMERS_VERSION}",
    "3.11",
    "transformers",
    extras=(f"torch=={TORCH_VERSION}", f"accelerate=={ACCELERATE_VERSION}"),
    check_code="import torch, transformers, accelerate; torch.ones(2) @ torch.ones(2)",
)


def install_hf(
    runner: CommandRunner, progress: Progress, env: dict[str, str] | None = None
) -> Path:
    """Make the runtime when it is missing (under its lock); returns its python."""
    return install(HF, runner, progress, env)
