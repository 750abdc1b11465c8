"""``tpu-trainer grpo`` and ``tpu-trainer hf``: programs that are not tpu-recipes recipes, run on
a TPU VM made for the run (Tunix GRPO, seed 002; Hugging Face Transformers, seed 004)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from tpu_trainer.cli.common import ConfigOpt, RehearseOpt
from tpu_trainer.cli.run_cli import finish

if TYPE_CHECKING:
    from pathlib import Path

    from tpu_trainer.app.outcome import RunOutcome
    from tpu_trainer.frameworks.vm_program import VmProgram
    from tpu_trainer.plan.slices import Slice

DeviceOpt = Annotated[
    str, typer.Option("--device-type", help="TPU VM accelerator type, e.g. v6e-16 or v5litepod-8.")
]
ZoneOpt = Annotated[
    str | None, typer.Option("--zone", help="Zone of the TPU VM (default: the configured zone).")
]
PollOpt = Annotated[float, typer.Option("--poll", help="Seconds between status polls.")]
WandbOpt = Annotated[
    bool, typer.Option("--wandb", help="Report to Weights & Biases (WANDB_API_KEY from the env).")
]
StepsOpt = Annotated[int | None, typer.Option("--steps", min=1, help="Training steps.")]


def grpo(
    device_type: DeviceOpt = "v6e-16",
    profile: Annotated[
        str, typer.Option("--profile", help="none, or small-batch (seed 002's OOM fix).")
    ] = "none",
    steps: StepsOpt = None,
    wandb: WandbOpt = False,
    zone: ZoneOpt = None,
    config: ConfigOpt = None,
    rehearse: RehearseOpt = None,
    poll: PollOpt = 15.0,
) -> None:
    """Tunix GRPO (seed 002's Qwen3-1.7B on GSM8K) on a TPU VM; HF_TOKEN from the environment."""
    from dataclasses import replace

    from tpu_trainer.errors import InputError
    from tpu_trainer.frameworks.tunix.config import GrpoSettings, MemoryProfile
    from tpu_trainer.frameworks.tunix.program import tunix_program
    from tpu_trainer.plan.slices import Slice

    try:
        chosen = MemoryProfile(profile)
    except ValueError:
        known = ", ".join(p.value for p in MemoryProfile)
        raise InputError(f"no memory profile {profile}", fix=f"use one of: {known}") from None
    slice_ = Slice.parse(device_type)
    settings = GrpoSettings() if steps is None else replace(GrpoSettings(), max_steps=steps)
    program = tunix_program(settings, hosts=slice_.hosts, profile=chosen, wandb=wandb)
    label = f"grpo {settings.model_name} on {slice_.device_type}"
    finish(_run_on_vm(program, slice_, settings.model_name, label, zone, config, rehearse, poll))


def hf(
    device_type: DeviceOpt = "v5litepod-8",
    model_id: Annotated[
        str | None, typer.Option("--model", help="Hugging Face model id (default: seed 004's).")
    ] = None,
    steps: StepsOpt = None,
    wandb: WandbOpt = False,
    zone: ZoneOpt = None,
    config: ConfigOpt = None,
    rehearse: RehearseOpt = None,
    poll: PollOpt = 15.0,
) -> None:
    """Hugging Face Transformers (SPMD FSDPv2 on PyTorch/XLA) on a TPU VM."""
    from dataclasses import replace

    from tpu_trainer.frameworks.hf.program import HfSettings, hf_program
    from tpu_trainer.plan.slices import Slice

    settings = HfSettings()
    if model_id:
        settings = replace(settings, model_id=model_id)
    if steps is not None:
        settings = replace(settings, max_steps=steps)
    if wandb:
        settings = replace(settings, wandb=True)
    slice_ = Slice.parse(device_type)
    model = settings.model_id.rstrip("/").rsplit("/", 1)[-1].lower()
    label = f"hf {settings.model_id} on {slice_.device_type}"
    program = hf_program(settings)
    finish(_run_on_vm(program, slice_, model, label, zone, config, rehearse, poll))


def _run_on_vm(
    program: VmProgram,
    slice_: Slice,
    model: str,
    label: str,
    zone: str | None,
    config: Path | None,
    rehearse: Path | None,
    poll: float,
) -> RunOutcome:
    from tpu_trainer.cli.run_cli import run_on_tpu_vm
    from tpu_trainer.cli.services_cli import build

    setup = build(config, rehearse, fresh=True)
    label += f" --rehearse {rehearse}" if rehearse else ""
    return run_on_tpu_vm(setup, program, slice_, model, label, zone, poll)
