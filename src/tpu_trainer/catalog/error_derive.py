"""Values a known error's fix is filled with, computed from what its pattern extracted.

Each ``derive`` named in ``error_families.yaml`` is a pure function here: it takes the match's
named groups and returns extra ``{placeholders}`` (a memory ratio, a sharding split, the name of a
mesh axis, the MaxText key the user probably meant). :data:`DERIVES` lists them with the names
they add, so the catalog loader can check every placeholder of a fix.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping

Derive = Callable[[Mapping[str, str]], dict[str, str]]

_UNIT = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"([\d.]+)\s*([KMGT]?)(?:i?B)?", re.IGNORECASE)


def parse_size(text: str) -> float | None:
    """Bytes in a size as XLA prints it (``151.15G``, ``31.06M``, ``1.5GiB``), else None."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        return None
    try:
        return float(m.group(1)) * _UNIT[m.group(2).upper()]
    except ValueError:
        return None


def memory_ratio(groups: Mapping[str, str]) -> dict[str, str]:
    """``ratio``: needed ÷ available, and ``over``: how much does not fit, in GiB."""
    needed = parse_size(groups.get("needed", ""))
    available = parse_size(groups.get("available", ""))
    if not needed or not available:
        return {}
    over = (needed - available) / 2**30
    verdict = f"{over:.2f}G too much" if over > 0 else "it should fit: free memory is fragmented"
    return {"ratio": f"{needed / available:.2f}", "over": verdict}


def sharding_split(groups: Mapping[str, str]) -> dict[str, str]:
    """How to split ``parts`` devices so FSDP divides ``size``: ``fsdp`` × ``data``."""
    try:
        parts, size = int(groups["parts"]), int(groups["size"])
    except (KeyError, ValueError):
        return {}
    fsdp = math.gcd(parts, size) or 1
    shape = groups.get("shape")
    return {
        "fsdp": str(fsdp),
        "data": str(max(parts // fsdp, 1)),
        "shape_note": f" (full shape {shape})" if shape else "",
    }


# MaxText 0.2.5 builds its logical mesh in this order (checked against its AOT logs: fsdp is
# index 3, tensor index 8); older releases had no ``diloco`` axis, so their indices are one less.
MESH_AXES = (
    "diloco",
    "data",
    "stage",
    "fsdp",
    "fsdp_transpose",
    "sequence",
    "context",
    "context_autoregressive",
    "tensor",
    "tensor_transpose",
    "tensor_sequence",
    "expert",
)


def mesh_axis(groups: Mapping[str, str]) -> dict[str, str]:
    """Names of the logical axis ``axis`` in 0.2.5's mesh order and in the older one."""
    try:
        index = int(groups["axis"])
    except (KeyError, ValueError):
        return {}
    new = MESH_AXES[index] if 0 <= index < len(MESH_AXES) else "?"
    old = MESH_AXES[index + 1] if 0 <= index + 1 < len(MESH_AXES) else "?"
    return {"axis_name": new, "old_axis_name": old}


# Keys people pass that MaxText spells differently. Exact renames win over fuzzy matching.
KEY_RENAMES: Mapping[str, tuple[str, ...]] = {
    "weight_decay": ("adam_weight_decay", "muon_weight_decay"),
    "batch_size": ("per_device_batch_size",),
    "seq_len": ("max_target_length",),
    "seq_length": ("max_target_length",),
    "max_seq_len": ("max_target_length",),
    "max_steps": ("steps",),
    "num_steps": ("steps",),
    "train_steps": ("steps",),
    "lr": ("learning_rate",),
    "optimizer": ("opt_type",),
    "model": ("model_name",),
    "output_dir": ("base_output_directory",),
    "warmup_steps": ("warmup_steps_fraction",),
    "grad_clip": ("gradient_clipping_threshold",),
    "max_grad_norm": ("gradient_clipping_threshold",),
    "fsdp": ("ici_fsdp_parallelism",),
    "tensor_parallelism": ("ici_tensor_parallelism",),
    "tokenizer": ("tokenizer_path",),
    "dataset": ("dataset_type", "dataset_path"),
    "remat": ("remat_policy",),
    "save_period": ("checkpoint_period",),
    "eval_every": ("eval_interval",),
}

# A small list of MaxText keys recipes and users set most (all present in 0.2.5's base.yml).
COMMON_MAXTEXT_KEYS = (
    "run_name",
    "model_name",
    "base_output_directory",
    "hardware",
    "steps",
    "log_period",
    "per_device_batch_size",
    "max_target_length",
    "gradient_accumulation_steps",
    "learning_rate",
    "lr_schedule_type",
    "warmup_steps_fraction",
    "learning_rate_schedule_steps",
    "opt_type",
    "adam_b1",
    "adam_b2",
    "adam_eps",
    "adam_weight_decay",
    "muon_weight_decay",
    "muon_beta",
    "mu_dtype",
    "gradient_clipping_threshold",
    "dtype",
    "weight_dtype",
    "remat_policy",
    "decoder_layer_input",
    "scan_layers",
    "attention",
    "quantization",
    "use_qwix_quantization",
    "dataset_type",
    "dataset_path",
    "tokenizer_path",
    "tokenizer_type",
    "train_split",
    "hf_path",
    "packing",
    "num_epoch",
    "enable_data_shuffling",
    "grain_worker_count",
    "enable_checkpointing",
    "async_checkpointing",
    "checkpoint_period",
    "max_num_checkpoints_to_keep",
    "load_parameters_path",
    "load_full_state_path",
    "eval_interval",
    "eval_steps",
    "profiler",
    "profiler_steps",
    "skip_first_n_steps_for_profiler",
    "ici_data_parallelism",
    "ici_fsdp_parallelism",
    "ici_fsdp_transpose_parallelism",
    "ici_tensor_parallelism",
    "ici_context_parallelism",
    "ici_sequence_parallelism",
    "ici_expert_parallelism",
    "ici_pipeline_parallelism",
    "dcn_data_parallelism",
    "dcn_fsdp_parallelism",
    "dcn_pipeline_parallelism",
    "num_slices",
    "allow_split_physical_axes",
    "compile_topology",
    "compile_topology_num_slices",
    "skip_jax_distributed_system",
    "override_model_config",
    "base_emb_dim",
    "base_mlp_dim",
    "base_num_decoder_layers",
    "base_num_query_heads",
    "base_num_kv_heads",
    "head_dim",
    "vocab_size",
    "num_experts",
    "num_experts_per_tok",
    "capacity_factor",
    "sparse_matmul",
    "megablox",
    "optimizer_memory_host_offload",
    "parameter_memory_host_offload",
)

_QUOTED_KEY = re.compile(r"'([A-Za-z_][A-Za-z0-9_]*)'")


def suggest_keys(key: str, valid: tuple[str, ...] = COMMON_MAXTEXT_KEYS) -> tuple[str, ...]:
    """MaxText keys the user probably meant by ``key``: known renames, else close spellings."""
    renamed = KEY_RENAMES.get(key) or KEY_RENAMES.get(key.lower())
    if renamed:
        return renamed
    return tuple(difflib.get_close_matches(key, valid, n=3, cutoff=0.6))


def key_suggestion(groups: Mapping[str, str]) -> dict[str, str]:
    """``suggestion``: what to write instead of the unknown ``key``.

    When the error line lists the valid fields (MaxText ≥ 0.2 does), they are the candidates;
    otherwise :data:`COMMON_MAXTEXT_KEYS`.
    """
    key = groups.get("key", "")
    listed = tuple(dict.fromkeys(_QUOTED_KEY.findall(groups.get("valid") or "")))
    valid = tuple(k for k in listed if k != key) or COMMON_MAXTEXT_KEYS
    found = suggest_keys(key, valid)
    if key == "weight_decay":
        text = "`adam_weight_decay=<v>` (AdamW) and, with opt_type=muon, `muon_weight_decay=<v>`"
    elif found:
        text = " or ".join(f"`{k}=`" for k in found)
    else:
        text = "a key of maxtext/configs/base.yml (no close match found)"
    return {"suggestion": text}


def first_container(groups: Mapping[str, str]) -> dict[str, str]:
    names = (groups.get("containers") or "").split()
    return {"container": names[0] if names else "jax-tpu-1"}


DERIVES: Mapping[str, tuple[Derive, frozenset[str]]] = {
    "memory_ratio": (memory_ratio, frozenset({"ratio", "over"})),
    "sharding_split": (sharding_split, frozenset({"fsdp", "data", "shape_note"})),
    "mesh_axis": (mesh_axis, frozenset({"axis_name", "old_axis_name"})),
    "key_suggestion": (key_suggestion, frozenset({"suggestion"})),
    "first_container": (first_container, frozenset({"container"})),
}
"""Derive functions by the name the catalog uses, with the placeholders each one fills."""
