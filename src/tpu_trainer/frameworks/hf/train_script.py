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

SCRIPT_NAME = "train_hf.py"

_TEMPLATE = '''"""Causal-LM training with Hugging Face Transformers, written by tpu-trainer.

TPU (default): PyTorch/XLA SPMD FSDPv2, one process per host, the same command on every worker,
PJRT_DEVICE=TPU in the environment. --cpu: a tiny random Llama on synthetic tokens (no TPU, no
network), a smoke test of this file. HF_TOKEN, when the model needs one, comes from the
environment only.
"""

import argparse
import time

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    Trainer,
    TrainerCallback,
    TrainingArguments,
    default_data_collator,
)

SETTINGS = {
@SETTINGS@}

# --cpu: what replaces the model, the data and the sizes.
CPU_SMOKE = {
    "seq_len": 64,
    "per_device_batch": 4,
    "grad_accum": 1,
    "max_steps": 10,
    "learning_rate": 3e-3,
}
TINY_LLAMA = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


class StepClock(TrainerCallback):
    """Adds the optimizer step and its wall time to each training-step log dict before it is
    printed (callbacks given to the Trainer run before its printer)."""

    def __init__(self):
        self.last = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.monotonic()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if logs is None or "loss" not in logs:
            return
        now = time.monotonic()
        logs["step"] = state.global_step
        if self.last is not None:
            logs["step_seconds"] = f"{now - self.last:.4f}"
        self.last = now


class Blocks(torch.utils.data.Dataset):
    """Fixed-length token blocks; the labels are the inputs (the model shifts them)."""

    def __init__(self, blocks):
        self.blocks = blocks

    def __len__(self):
        return len(self.blocks)

    def __getitem__(self, index):
        ids = torch.tensor(self.blocks[index], dtype=torch.long)
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids.clone()}


def synthetic_blocks(count, seq_len, vocab, seed):
    """Counting sequences from random starts: a pattern a tiny model picks up in a few steps."""
    generator = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, vocab, (count, 1), generator=generator)
    return ((starts + torch.arange(seq_len)) % vocab).tolist()


def hub_blocks(tokenizer, settings, wanted):
    """The dataset's text, tokenized, joined with EOS and cut into seq_len blocks (at most
    ``wanted``; the Trainer goes round again when there are fewer)."""
    from datasets import load_dataset

    data = load_dataset(
        settings["dataset"], settings["dataset_config"] or None, split=settings["dataset_split"]
    )
    seq_len, eos = settings["seq_len"], tokenizer.eos_token_id
    blocks, pending = [], []
    for batch in data.iter(batch_size=1000):
        chunk = [t for t in batch[settings["text_column"]] if t and t.strip()]
        for ids in tokenizer(chunk)["input_ids"] if chunk else []:
            pending.extend(ids if eos is None else [*ids, eos])
        while len(pending) >= seq_len:
            blocks.append(pending[:seq_len])
            del pending[:seq_len]
        if len(blocks) >= wanted:
            return blocks[:wanted]
    if not blocks:
        raise SystemExit(f"{settings['dataset']}: no text for one block of {seq_len} tokens")
    return blocks


def main():
    parser = argparse.ArgumentParser(description="Causal-LM training (tpu-trainer)")
    parser.add_argument("--cpu", action="store_true", help="tiny random model, synthetic data")
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--output-dir", default="output")
    options = parser.parse_args()
    settings = {**SETTINGS, **(CPU_SMOKE if options.cpu else {})}
    if options.max_steps:
        settings["max_steps"] = options.max_steps
    torch.manual_seed(settings["seed"])
    per_host = settings["max_steps"] * settings["per_device_batch"] * settings["grad_accum"]
    if options.cpu:
        config = LlamaConfig(**TINY_LLAMA, max_position_embeddings=settings["seq_len"])
        model = AutoModelForCausalLM.from_config(config)
        blocks = synthetic_blocks(per_host, settings["seq_len"], config.vocab_size, settings["seed"])
        device_args = {"use_cpu": True, "optim": "adamw_torch"}
    else:
        import torch_xla.runtime as xr

        xr.use_spmd()  # before any XLA tensor exists
        tokenizer = AutoTokenizer.from_pretrained(settings["model_id"])
        dtype = torch.bfloat16 if settings["bf16"] else torch.float32
        model = AutoModelForCausalLM.from_pretrained(settings["model_id"], dtype=dtype)
        blocks = hub_blocks(tokenizer, settings, per_host * xr.process_count())
        device_args = {
            "optim": settings["optim"],
            "bf16": settings["bf16"],
            "fsdp": True,
            "fsdp_config": {
                "xla": True,
                "xla_fsdp_v2": True,
                "xla_fsdp_grad_ckpt": settings["gradient_checkpointing"],
            },
        }
    print(f"parameters: {sum(p.numel() for p in model.parameters())}", flush=True)
    args = TrainingArguments(
        output_dir=options.output_dir,
        max_steps=settings["max_steps"],
        per_device_train_batch_size=settings["per_device_batch"],
        gradient_accumulation_steps=settings["grad_accum"],
        learning_rate=settings["learning_rate"],
        lr_scheduler_type=settings["lr_scheduler"],
        warmup_steps=settings["warmup_steps"],
        logging_steps=1,
        save_strategy="no",
        report_to=["wandb"] if settings["wandb"] else [],
        dataloader_drop_last=True,
        disable_tqdm=True,
        seed=settings["seed"],
        **device_args,
    )
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=Blocks(blocks),
        data_collator=default_data_collator,
        callbacks=[StepClock()],
    )
    trainer.train()


if __name__ == "__main__":
    main()
'''


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
    return _TEMPLATE.replace("@SETTINGS@", "".join(lines))
