"""The training script a Hugging Face Transformers run executes, as text (pure).

The script is complete Python with the settings written in as literals (``repr``, so a value
from a configuration is data, never code). On a TPU VM it trains with PyTorch/XLA SPMD FSDPv2:
``torch_xla.runtime.use_spmd()`` first, then ``TrainingArguments(fsdp=True,
fsdp_config={"xla": True, "xla_fsdp_v2": True, ...})`` — one process per host, the same command
on every worker, ``PJRT_DEVICE=TPU`` from the environment; no ``xla_spawn`` (torch_xla's
multi-process spawn refuses 8 processes). ``--cpu`` drops every XLA part and trains a tiny random
Llama on synthetic token blocks: the same file smoke-tested on a machine without TPU or network.

Besides Transformers' own keys, each training-step log dict carries ``step`` (the optimizer
step, from 1) and ``step_seconds`` (wall time since the previous step's dict, or since training
began: the first step includes the XLA compile). Hub credentials come from ``HF_TOKEN`` in the
environment, read by ``huggingface_hub`` itself: the script never names a secret's value.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import resources

SCRIPT_NAME = "train_hf.py"

TEMPLATE_FILE = "train_hf.py.tmpl"
"""The script, with ``@SETTINGS@`` where the settings go (a file of the package)."""


def _template() -> str:
    return (
        resources.files(__package__ or "tpu_trainer.frameworks.hf")
        .joinpath(TEMPLATE_FILE)
        .read_text("utf-8")
    )


def render_script(settings: Mapping[str, object]) -> str:
    """The script with ``settings`` written in as Python literals, one per line, in order.

    Values must be ``str``, ``int``, ``float``, ``bool`` or None: ``repr`` of those is a literal
    the script reads back exactly, whatever characters a string holds.
    """
    lines = []
    for key, value in settings.items():
        if value is not None and not isinstance(value, str | int | float | bool):
            raise TypeError(f"setting {key!r}: {type(value).__name__} is not a plain literal")
        lines.append(f"    {key!r}: {value!r},\n")
    return _template().replace("@SETTINGS@", "".join(lines))
