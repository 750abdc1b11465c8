"""A Tunix GRPO configuration, written whole (pure).

Tunix 0.1.7's ``grpo_main`` takes a base configuration file and ``key=value`` overrides. A
dotted override of a section (``rl_training_config.max_steps=10``) replaces the whole section,
so its other keys vanish (``TypeError ... missing 'eval_every_n_steps'``). The tool never
overrides: it writes one complete file, every section with every key, and passes nothing
else. Out-of-memory fixes are named profiles that change the values before the file is written.

Nothing secret goes into the file: ``HF_TOKEN`` and ``WANDB_API_KEY`` reach Tunix through the
process environment only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

import yaml

from tpu_trainer.errors import InputError

_AXIS = re.compile(r"^[a-z_]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Mesh:
    """A model's device mesh: Tunix reads both fields as Python literals."""

    shape: tuple[int, ...]
    axis_names: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.shape or len(self.shape) != len(self.axis_names):
            raise InputError(
                f"mesh shape {self.shape} and axis names {self.axis_names} differ in length"
            )
        if any(n < 1 for n in self.shape) or not all(_AXIS.match(a) for a in self.axis_names):
            raise InputError(f"mesh {self.shape} {self.axis_names}: sizes ≥ 1, names [a-z_]")

    @property
    def devices(self) -> int:
        size = 1
        for n in self.shape:
            size *= n
        return size

    def to_yaml(self) -> dict[str, str]:
        shape = "(" + ",".join(str(n) for n in self.shape) + ("," if len(self.shape) == 1 else "")
        names = "(" + ",".join(f"'{a}'" for a in self.axis_names)
        names += "," if len(self.axis_names) == 1 else ""
        return {"shape": shape + ")", "axis_names": names + ")"}


@dataclass(frozen=True, slots=True, kw_only=True)
class GrpoSettings:
    """What a GRPO run chooses; :func:`grpo_config` turns it into Tunix's full configuration.

    The defaults are seed 002's Qwen3-1.7B on GSM8K (v6e-16: a 4 FSDP x 2 TP mesh per model).
    """

    model_name: str = "qwen3-1.7b"
    """Tunix's name for the architecture (``qwen3-1.7b``, ``gemma2-2b-it``, ``llama3.1-8b``)."""
    model_id: str = "Qwen/Qwen3-1.7B"
    """Hugging Face repo the weights come from."""
    model_source: str = "huggingface"
    tokenizer_path: str | None = None
    """Default: ``model_id``."""
    mesh: Mesh = field(default_factory=lambda: Mesh(shape=(4, 2), axis_names=("fsdp", "tp")))
    data_source: str = "tfds"
    dataset_name: str = "gsm8k"
    batch_size: int = 16
    num_generations: int = 8
    num_iterations: int = 1
    beta: float = 0.08
    epsilon: float = 0.2
    max_steps: int = 10
    eval_every_n_steps: int = 10
    learning_rate: float = 3e-6
    warmup_ratio: float = 0.1
    max_grad_norm: float = 0.1
    total_generation_steps: int = 2048
    max_prompt_length: int = 256
    temperature: float = 0.9
    top_p: float = 1.0
    top_k: int = 50
    reward_functions: tuple[str, ...] = ("tunix.cli.reward_fn.gsm8k",)
    """Modules of the installed Tunix (or paths under its project root)."""
    work_dir: str = "/tmp/tpu-trainer"  # noqa: S108 (a folder on the TPU VM's workers)
    """On each worker: model downloads, checkpoints, metrics and profiles go under it."""
    wandb_project: str = "tpu-trainer"
    run_name: str = ""

    def __post_init__(self) -> None:
        for name in ("batch_size", "num_generations", "max_steps", "eval_every_n_steps"):
            if getattr(self, name) < 1:
                raise InputError(f"GRPO {name} must be at least 1, not {getattr(self, name)}")
        if self.num_generations < 2:
            raise InputError("GRPO needs num_generations ≥ 2 (it compares answers in a group)")


class MemoryProfile(StrEnum):
    """Named out-of-memory fixes (seed 002)."""

    NONE = "none"
    SMALL_BATCH = "small-batch"
    """Seed 002's fix for ``RESOURCE_EXHAUSTED: Attempting to reserve 30.31G. Only 29.35G free``
    with Qwen3-1.7B (151,936-token vocabulary) on v6e: batch_size 16 -> 1 and
    num_generations 8 -> 4, mesh unchanged (4 FSDP x 2 TP)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _Profile:
    """The values a memory profile sets (None: left as the settings have it)."""

    batch_size: int | None = None
    num_generations: int | None = None

    def values(self) -> dict[str, int]:
        return {
            k: v
            for k, v in (("batch_size", self.batch_size), ("num_generations", self.num_generations))
            if v is not None
        }


_PROFILES: dict[MemoryProfile, _Profile] = {
    MemoryProfile.NONE: _Profile(),
    MemoryProfile.SMALL_BATCH: _Profile(batch_size=1, num_generations=4),
}


def with_profile(settings: GrpoSettings, profile: MemoryProfile) -> GrpoSettings:
    """``settings`` with a memory profile's values (they win over the settings')."""
    chosen = _PROFILES[profile]
    return replace(
        settings,
        batch_size=chosen.batch_size or settings.batch_size,
        num_generations=chosen.num_generations or settings.num_generations,
    )


def profile_changes(settings: GrpoSettings, profile: MemoryProfile) -> list[str]:
    """What a profile changes, for the plan: ``batch_size: 16 -> 1``."""
    return [
        f"{key}: {getattr(settings, key)} -> {value}"
        for key, value in _PROFILES[profile].values().items()
        if getattr(settings, key) != value
    ]


def _model_section(s: GrpoSettings) -> dict[str, Any]:
    work = s.work_dir.rstrip("/")
    return {
        "model_name": s.model_name,
        "model_source": s.model_source,
        "model_id": s.model_id,
        "model_path": "",
        "model_download_path": f"{work}/models",
        "intermediate_ckpt_dir": f"{work}/intermediate_ckpt/",
        "rng_seed": 0,
        "model_display": False,
        "use_flash_attention": False,
        "flash_attention_block_size": 1024,
        "lora_config": {},
        "mesh": s.mesh.to_yaml(),
    }


def _optimizer(s: GrpoSettings) -> dict[str, Any]:
    warmup = max(1, round(s.max_steps * s.warmup_ratio))
    return {
        "opt_type": "adamw",
        "learning_rate": s.learning_rate,
        "schedule_type": "warmup_cosine_decay_schedule",
        "init_value": 0.0,
        "peak_value": s.learning_rate,
        "end_value": 0.0,
        "warmup_steps": warmup,
        "decay_steps": s.max_steps,
        "b1": 0.9,
        "b2": 0.99,
        "weight_decay": 0.1,
        "max_grad_norm": s.max_grad_norm,
    }


def _training(s: GrpoSettings) -> dict[str, Any]:
    """``rl_training_config``; no ``gradient_accumulation_steps`` (RL derives it and refuses a
    value)."""
    work = s.work_dir.rstrip("/")
    return {
        "eval_every_n_steps": s.eval_every_n_steps,
        "max_steps": s.max_steps,
        "checkpoint_root_directory": f"{work}/ckpts",
        "checkpointing_options": {"max_to_keep": 1, "save_interval_steps": 1000},
        "metrics_logging_options": {
            "project_name": s.wandb_project,
            "run_name": s.run_name,
            "log_dir": f"{work}/metrics",
            "flush_every_n_steps": 1,
        },
        "perf_metrics_options": {},
        "profiler_options": {},
        "data_sharding_axis": [s.mesh.axis_names[0]],
        "max_inflight_computations": 2,
        "actor_optimizer_config": _optimizer(s),
        "critic_optimizer_config": None,
    }


def grpo_config(s: GrpoSettings) -> dict[str, Any]:
    """The whole configuration: every section complete (the file is Tunix's base config)."""
    return {
        "training_mode": "grpo",
        "model_config": _model_section(s),
        "actor_model_config": _model_section(s),
        "reference_model_config": _model_section(s),
        "rollout_model_config": _model_section(s),
        "tokenizer_config": {
            "tokenizer_path": s.tokenizer_path or s.model_id,
            "tokenizer_type": "huggingface",
            "add_bos": False,
            "add_eos": True,
        },
        "data_source": s.data_source,
        "data_directory": "",
        "data_module": "",
        "apply_chat_template_to_dataset": True,
        "dataset_name": s.dataset_name,
        "tfds_download": True,
        "batch_size": s.batch_size,
        "num_batches": 0,
        "max_target_length": s.max_prompt_length + s.total_generation_steps,
        "num_train_epochs": 1,
        "train_fraction": 1.0,
        "num_test_batches": 0,
        "rl_training_config": _training(s),
        "grpo_config": {
            "num_generations": s.num_generations,
            "num_iterations": s.num_iterations,
            "beta": s.beta,
            "epsilon": s.epsilon,
        },
        "rollout_config": {
            "total_generation_steps": s.total_generation_steps,
            "max_prompt_length": s.max_prompt_length,
            "temperature": s.temperature,
            "top_p": s.top_p,
            "top_k": s.top_k,
        },
        "rollout_engine": "vanilla",
        "offload_to_cpu": False,
        "verl_compatible": False,
        "reward_functions": list(s.reward_functions),
    }


HEADER = (
    "# Tunix GRPO configuration written by tpu-trainer: complete sections, no overrides.\n"
    "# Credentials (HF_TOKEN, WANDB_API_KEY) come from the environment, never from this file.\n"
)


def render_grpo_config(s: GrpoSettings) -> str:
    """The configuration file's text (YAML, keys in the order above)."""
    return HEADER + yaml.safe_dump(grpo_config(s), sort_keys=False, default_flow_style=False)
