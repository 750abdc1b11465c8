"""Hugging Face Transformers on a TPU VM: the settings of a causal-LM run, its training script
and the program every worker runs (pure).

Versions: torch_xla 2.9.0 is the last release and needs torch 2.9.0; its ``tpu`` extra brings
the libtpu it was built with, its ``pallas`` extra the JAX that works with that libtpu (the
launcher's device check asks JAX how many chips each worker sees). Transformers 5.23.0 still
carries the XLA FSDPv2 path (``fsdp_config`` ``xla`` + ``xla_fsdp_v2``).

Defaults follow seed 004's TPU example: 32 sequences per device, 4 accumulation steps, bf16,
``adamw_torch_xla``, gradient checkpointing inside XLA FSDP. The model, the data set, the
sequence length and the step count are ours (the seed names none): a 1B Llama, which is gated,
so ``HF_TOKEN`` is required for it.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.hf.train_script import SCRIPT_NAME, render_script
from tpu_trainer.frameworks.vm_program import LogFormat, RemoteFile, VmProgram

TRANSFORMERS_VERSION = "5.23.0"
ACCELERATE_VERSION = "1.15.0"
DATASETS_VERSION = "5.2.0"
TORCH_VERSION = "2.9.0"
TORCH_XLA_VERSION = "2.9.0"
SECRET_ENV = ("HF_TOKEN", "WANDB_API_KEY")

_OPTIMIZERS = frozenset(
    {"adamw_torch_xla", "adamw_torch", "adafactor", "sgd", "adagrad", "rmsprop", "lion_32bit"}
)
_SCHEDULERS = frozenset({"linear", "cosine", "constant", "constant_with_warmup"})
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


@dataclass(frozen=True, slots=True, kw_only=True)
class HfSettings:
    """One causal-LM training run with Transformers' ``Trainer``."""

    model_id: str = "meta-llama/Llama-3.2-1B"
    """A Hugging Face Hub model id, or a folder on the workers (``/...``)."""
    dataset: str = "Salesforce/wikitext"
    """A Hub data set id for ``datasets.load_dataset``."""
    dataset_config: str = "wikitext-2-raw-v1"
    """The data set's configuration name ('' for none)."""
    dataset_split: str = "train"
    text_column: str = "text"
    seq_len: int = 1024
    """Tokens per sequence (the text is joined and cut into blocks of this length)."""
    per_device_batch: int = 32
    """``per_device_train_batch_size``: under SPMD one process feeds a host's chips, and the
    batch is sharded over the ``fsdp`` mesh axis, so it must divide by the chips."""
    grad_accum: int = 4
    max_steps: int = 100
    learning_rate: float = 5e-5
    lr_scheduler: str = "linear"
    warmup_steps: int = 0
    bf16: bool = True
    optim: str = "adamw_torch_xla"
    gradient_checkpointing: bool = True
    """``xla_fsdp_grad_ckpt``: recompute each decoder layer in the backward pass."""
    seed: int = 42
    wandb: bool = False
    """Report to Weights & Biases (``WANDB_API_KEY`` from the environment)."""

    def __post_init__(self) -> None:
        for name in ("seq_len", "per_device_batch", "grad_accum", "max_steps"):
            value = getattr(self, name)
            if value < 1:
                raise InputError(f"{name} must be at least 1, not {value}")
        if self.warmup_steps < 0 or not self.learning_rate > 0:
            raise InputError(
                f"learning_rate ({self.learning_rate}) must be > 0 and warmup_steps "
                f"({self.warmup_steps}) ≥ 0"
            )
        if not (self.model_id.startswith("/") or _HUB_ID.match(self.model_id)):
            raise InputError(
                f"model {self.model_id!r} is neither a Hub id (org/name) nor an absolute path"
            )
        if not _HUB_ID.match(self.dataset):
            raise InputError(f"data set {self.dataset!r} is not a Hub id (org/name)")
        if self.optim not in _OPTIMIZERS:
            raise InputError(
                f"optimizer {self.optim!r} is not one of {', '.join(sorted(_OPTIMIZERS))}"
            )
        if self.lr_scheduler not in _SCHEDULERS:
            raise InputError(
                f"scheduler {self.lr_scheduler!r} is not one of {', '.join(sorted(_SCHEDULERS))}"
            )

    @property
    def hub_model(self) -> bool:
        """The model comes from the Hub (not a folder on the workers)."""
        return not self.model_id.startswith("/")


def render_train_script(settings: HfSettings) -> str:
    """The training script for ``settings`` (``train_hf.py``)."""
    return render_script(asdict(settings))


def hf_requirements(*, wandb: bool = False) -> tuple[str, ...]:
    """What every worker installs (pip requirement strings, exact versions)."""
    base = (
        f"torch=={TORCH_VERSION}",
        f"torch_xla[tpu,pallas]=={TORCH_XLA_VERSION}",
        f"transformers=={TRANSFORMERS_VERSION}",
        f"accelerate=={ACCELERATE_VERSION}",
        f"datasets=={DATASETS_VERSION}",
    )
    return (*base, "wandb") if wandb else base


def hf_program(settings: HfSettings) -> VmProgram:
    """Transformers on every worker of a TPU VM (pure): the script, ``PJRT_DEVICE=TPU``, the
    same command everywhere, and the secrets by name only."""
    return VmProgram(
        framework="Transformers",
        version=TRANSFORMERS_VERSION,
        key=f"hf-{TRANSFORMERS_VERSION}-torch-xla-{TORCH_XLA_VERSION}",
        requirements=hf_requirements(wandb=settings.wandb),
        files=(RemoteFile(name=SCRIPT_NAME, text=render_train_script(settings)),),
        args=(SCRIPT_NAME,),
        env=(("PJRT_DEVICE", "TPU"), ("PYTHONUNBUFFERED", "1")),
        secret_env=SECRET_ENV if settings.wandb else SECRET_ENV[:1],
        required_secrets=("HF_TOKEN",) if settings.hub_model else (),
        log_format=LogFormat.HF_TRANSFORMERS,
    )
