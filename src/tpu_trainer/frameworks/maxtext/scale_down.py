"""A TPU recipe's MaxText arguments, scaled down to a smoke test on this machine's CPU (pure).

The model family and every argument the recipe gives are kept; the model's dimensions are
shrunk (keeping its structure: GQA ratio, MLA, dense layers before MoE ones, the attention
pattern, shared experts), the data becomes synthetic, and what only a TPU slice or Google
Cloud can do is dropped or turned off. Each change is returned with the reason for it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_trainer.frameworks.maxtext.model_shape import ModelShape
from tpu_trainer.frameworks.maxtext.scale_down_rules import (
    ATTENTION_PERIODS,
    CLOUD_SWITCHES,
    CPU_ATTENTION,
    CPU_KERNEL_SWITCHES,
    DATA_KEYS,
    DATA_PREFIXES,
    GPU_QUANTIZATION,
    LAUNCHER_KEYS,
    PROFILER_KEYS,
    PROFILER_PREFIXES,
    TOPOLOGY_KEYS,
    TPU_ATTENTION,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """The CPU-sized shape (a few million parameters: ~1 minute on 2 cores, most of it start-up)."""

    emb_dim: int = 256
    mlp_dim: int = 512
    """Dense MLP width; the MoE width keeps the model's MoE/dense ratio."""
    query_heads: int = 8
    """About this many query heads; the exact count keeps the model's GQA ratio."""
    head_dim_divisor: int = 4
    min_head_dim: int = 16
    experts: int = 4
    experts_per_tok: int = 2
    vocab_size: int = 1024
    seq_len: int = 128
    window: int = 64
    """Sliding/chunked attention window (kept below seq_len so it still masks)."""
    steps: int = 10


@dataclass(frozen=True, slots=True)
class Change:
    """One argument the scale-down set, replaced or dropped."""

    key: str
    before: str | None
    """The recipe's value (or the model file's), None when the key was not set."""
    after: str | None
    """The value used on CPU, None when the argument is dropped."""
    why: str

    def describe(self) -> str:
        if self.after is None:
            return f"{self.key}={self.before} dropped: {self.why}"
        was = "" if self.before is None else f"{self.before} → "
        return f"{self.key}: {was}{self.after} ({self.why})"

    def to_json(self) -> dict[str, str | None]:
        return {"key": self.key, "before": self.before, "after": self.after, "why": self.why}


@dataclass(frozen=True, slots=True)
class ScaledArgs:
    """The CPU argument list and how it differs from the recipe's."""

    args: tuple[str, ...]
    changes: tuple[Change, ...]
    summary: str
    """The scaled model in a few words (layers, width, heads, experts, sequence, steps)."""
    unknown: tuple[str, ...] = ()
    """Recipe keys this MaxText's base.yml does not have (MaxText may refuse them), with the
    closest known key when there is one."""

    def to_json(self) -> dict[str, Any]:
        return {
            "args": list(self.args),
            "changes": [c.to_json() for c in self.changes],
            "summary": self.summary,
            "unknown": list(self.unknown),
        }


class _Edit:
    """The ordered ``key=value`` arguments being rewritten, and the changes made so far."""

    def __init__(self, args: Sequence[str], fixed: Collection[str]) -> None:
        self.fixed = frozenset(fixed)
        self.values: dict[str, str] = {}
        self.loose: list[str] = []
        for text in args:
            key, sep, value = text.partition("=")
            if not sep:
                self.loose.append(text)
                continue
            self.values.pop(key, None)
            self.values[key] = value
        self.changes: list[Change] = []

    def set(self, key: str, value: str, why: str, before: str | None = None) -> None:
        """Set ``key``; ``before`` is the model file's value when the recipe does not give one.
        Nothing is recorded when the value is already the one wanted."""
        given = self.values.get(key)
        old = given if given is not None else before
        if key in self.fixed or (old is not None and _same(old, value)):
            return
        self.values[key] = value
        self.changes.append(Change(key, old, value, why))

    def drop(self, key: str, why: str) -> None:
        if key in self.values and key not in self.fixed:
            self.changes.append(Change(key, self.values.pop(key), None, why))

    def args(self) -> tuple[str, ...]:
        return (*self.loose, *(f"{k}={v}" for k, v in self.values.items()))


def _same(a: str, b: str) -> bool:
    return a.strip().lower() == b.strip().lower()


def _int(config: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = config.get(key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _text(config: Mapping[str, Any], key: str) -> str | None:
    value = config.get(key)
    return None if value is None else str(value)


def _round_up(value: float, multiple: int) -> int:
    return max(multiple, math.ceil(value / multiple) * multiple)


def _is_true(value: str | None) -> bool:
    return value is not None and value.strip().strip("'\"").lower() in ("true", "1", "yes")


# ---------------------------------------------------------------------------------------------
# The model's shape


def _heads(shape: ModelShape, target: Target) -> tuple[int, int, int]:
    """(query heads, kv heads, GQA ratio) on CPU: about ``target.query_heads`` query heads,
    the model's query/kv ratio kept."""
    q = max(1, shape.heads)
    kv = max(1, shape.kv_heads)
    ratio = q // kv if q % kv == 0 else 1
    if ratio == 1 and q != kv:
        return min(q, target.query_heads), min(q, target.query_heads), 1
    kv_cpu = max(1, min(kv, target.query_heads // ratio))
    return kv_cpu * ratio, kv_cpu, ratio


def _head_dim(value: int, target: Target) -> int:
    return max(target.min_head_dim, _round_up(value / target.head_dim_divisor, 8))


def _layers(config: Mapping[str, Any], shape: ModelShape) -> tuple[int, int, int, str]:
    """(layers, dense layers first, KV-shared layers last, how) keeping the layer structure:
    one full cycle of the attention/MoE pattern, a dense layer before MoE ones when the model
    has them, and one more layer reusing the cycle's K/V when the model shares K/V."""
    name = str(config.get("model_name", ""))
    block = str(config.get("decoder_block", ""))
    periods = [
        ATTENTION_PERIODS.get(name, ATTENTION_PERIODS.get(block, 1)),
        max(1, _int(config, "inhomogeneous_layer_cycle_interval", 1)),
        shape.moe_every,
        max(1, _int(config, "nope_layer_interval", 1)),
    ]
    cycle = math.lcm(*periods)
    dense = 1 if shape.dense_layers > 0 else 0
    shared = 1 if _int(config, "num_kv_shared_layers") > 0 else 0
    if dense:
        return dense + cycle, dense, 0, f"{dense} dense + {cycle} MoE"
    how = f"one {cycle}-layer cycle of its pattern" if cycle > 1 else ""
    if shared:
        how += ", then a layer reusing its K/V"
    return max(2, cycle + shared), 0, shared, how


@dataclass(frozen=True, slots=True)
class _Resize:
    """Sets model-file sizes, recording the model file's value as the one replaced."""

    edit: _Edit
    config: Mapping[str, Any]
    why: str

    def __call__(self, key: str, value: int, why: str = "") -> None:
        self.edit.set(key, str(value), why or self.why, before=_text(self.config, key))


def _shape(edit: _Edit, config: Mapping[str, Any], target: Target) -> list[str]:
    """Shrink the model file's dimensions; returns the words of the summary."""
    model = str(config.get("model_name", "default"))
    resize = _Resize(edit, config, f"scaled down from {model}")
    shape = ModelShape.configured(config)
    resize("base_emb_dim", target.emb_dim)
    layers, dense, shared, how = _layers(config, shape)
    resize(
        "base_num_decoder_layers",
        layers,
        f"scaled down from {model}" + (f", keeping {how}" if how else ""),
    )
    if dense:
        resize("first_num_dense_layers", dense, "one dense layer before the MoE ones")
    if shared:
        resize("num_kv_shared_layers", shared, "the last layer reuses an earlier layer's K/V")
    resize("base_mlp_dim", target.mlp_dim)
    return [
        f"{layers} layers" + (f" ({how})" if how else ""),
        f"emb {target.emb_dim}",
        *_attention(resize, config, shape, target),
        *_experts(resize, config, shape, target),
    ]


def _attention(
    resize: _Resize, config: Mapping[str, Any], shape: ModelShape, target: Target
) -> list[str]:
    q, kv, ratio = _heads(shape, target)
    kept = "multi-head attention kept" if q == kv else f"GQA ratio {ratio} kept"
    resize("base_num_query_heads", q, f"{resize.why}, {kept}")
    resize("base_num_kv_heads", kv, f"{resize.why}, {kept}")
    words = [f"{q}/{kv} heads"]
    if shape.mla:
        scale = target.emb_dim / max(1, shape.emb)
        for key, rank in (("q_lora_rank", shape.q_lora), ("kv_lora_rank", shape.kv_lora)):
            if rank > 0:
                why = "MLA low-rank projection, scaled with the embedding"
                resize(key, _round_up(rank * scale, 16), why)
        mla_dims = (
            ("qk_nope_head_dim", shape.qk_nope),
            ("qk_rope_head_dim", shape.qk_rope),
            ("v_head_dim", shape.v_head),
        )
        for key, dim in mla_dims:
            resize(key, _head_dim(dim, target), "MLA head dim, scaled")
        if config.get("use_indexer") and _int(config, "indexer_n_heads") > 0:
            resize("indexer_n_heads", 4, "sparse-attention indexer, scaled")
            resize("indexer_head_dim", _head_dim(_int(config, "indexer_head_dim", 128), target))
            resize("indexer_topk", target.seq_len // 4, "below the scaled sequence length")
        return [*words, "MLA"]
    resize("head_dim", _head_dim(shape.head_dim, target))
    words[0] += f" of {_head_dim(shape.head_dim, target)}"
    if _int(config, "global_head_dim") > 0:
        resize("global_head_dim", _head_dim(_int(config, "global_head_dim"), target))
    global_kv = _int(config, "global_num_kv_heads")
    if global_kv > 0:
        share = max(1, kv * global_kv // max(1, shape.kv_heads))
        resize("global_num_kv_heads", share, "global layers keep their share of the KV heads")
    per_layer = _int(config, "hidden_size_per_layer_input")
    if per_layer > 0:
        scale = target.emb_dim / max(1, shape.emb)
        resize("hidden_size_per_layer_input", _round_up(per_layer * scale, 16), resize.why)
    return words


def _experts(
    resize: _Resize, config: Mapping[str, Any], shape: ModelShape, target: Target
) -> list[str]:
    experts = shape.experts
    if experts <= 1:
        return []
    mlp = max(1, shape.mlp)
    moe = _int(config, "base_moe_mlp_dim", -1)
    if moe > 0:
        width = target.mlp_dim if moe == mlp else _round_up(target.mlp_dim * moe / mlp, 128)
        resize("base_moe_mlp_dim", width, "expert width, about the model's MoE/dense ratio")
    count = min(experts, target.experts)
    per_tok = max(1, min(shape.top_k, target.experts_per_tok, count))
    resize("num_experts", count, "still a mixture of experts, few enough for a CPU")
    resize("num_experts_per_tok", per_tok, f"each token routed to {per_tok} of {count}")
    if config.get("megablox") is True:  # base.yml's default, set or not by the recipe
        resize.edit.set(
            "megablox", "false", CPU_KERNEL_SWITCHES["megablox"], before=_text(config, "megablox")
        )
    if _int(config, "n_routing_groups", -1) > 0:
        resize("n_routing_groups", 2, "expert groups must divide the experts")
        resize("topk_routing_group", 1, "at most the number of groups")
    shared = shape.shared_experts
    return [f"{count} experts, top-{per_tok}" + (f", {shared} shared" if shared else "")]


# ---------------------------------------------------------------------------------------------
# Data, length, steps


def _run_size(edit: _Edit, config: Mapping[str, Any], target: Target) -> None:
    edit.set(
        "vocab_size",
        str(target.vocab_size),
        "synthetic batches draw tokens below vocab_size, so a small vocabulary is safe",
        before=_text(config, "vocab_size"),
    )
    if _int(config, "vocab_size_per_layer_input") > 0:
        edit.set(
            "vocab_size_per_layer_input",
            str(target.vocab_size),
            "per-layer embeddings follow the vocabulary",
            before=_text(config, "vocab_size_per_layer_input"),
        )
    edit.set("max_target_length", str(target.seq_len), "a short sequence for a CPU")
    for key in ("sliding_window_size", "chunk_attn_window_size"):
        if _int(config, key) > target.window:
            edit.set(
                key,
                str(target.window),
                "shorter than the scaled sequence, so the window still masks",
                before=_text(config, key),
            )
    if _int(config, "max_prefill_predict_length") > target.seq_len:
        edit.set("max_prefill_predict_length", str(target.seq_len // 2), "below the sequence")
    edit.set("per_device_batch_size", "1", "one sequence per step on one CPU device")
    if "gradient_accumulation_steps" in edit.values:
        edit.set("gradient_accumulation_steps", "1", "one micro-batch per step")
    edit.set("steps", str(target.steps), "enough steps for a steady state, not more")


def _data(edit: _Edit) -> None:
    kind = edit.values.get("dataset_type", "").strip("'\"")
    if kind and kind != "synthetic":
        edit.set("dataset_type", "synthetic", f"the recipe's {kind} data is not on this machine")
    elif not kind:
        edit.set("dataset_type", "synthetic", "no dataset on this machine")
    for key in list(edit.values):
        if key in DATA_KEYS or key.startswith(DATA_PREFIXES):
            edit.drop(key, "a data source; synthetic batches are used")
    edit.set("enable_checkpointing", "false", "a smoke test keeps no checkpoints")


# ---------------------------------------------------------------------------------------------
# What only a TPU slice or Google Cloud can do


_DROP = None
"""A rule's new value meaning: drop the argument."""


def _key_rule(key: str, value: str) -> tuple[str | None, str] | None:
    """What one recipe argument becomes on a CPU: (new value or None to drop it, why), or None
    when it is kept as it is."""
    if key in TOPOLOGY_KEYS:
        return _DROP, "describes the TPU slice"
    if key.startswith(("ici_", "dcn_")) and key.endswith("_parallelism"):
        if value.strip() in ("1", "-1"):
            return None
        return "1", "one CPU device: no parallelism across chips or slices"
    if key in PROFILER_KEYS or key.startswith(PROFILER_PREFIXES):
        return _DROP, "TPU profiling"
    if key in CPU_KERNEL_SWITCHES and _is_true(value):
        return "false", CPU_KERNEL_SWITCHES[key]
    if key in CLOUD_SWITCHES and _is_true(value):
        return "false", "needs Google Cloud"
    if key == "use_random_routing" and _is_true(value):
        return "false", "MaxText allows it only with expert parallelism > 1"
    if key == "attention" and value.strip("'\"") in TPU_ATTENTION:
        return CPU_ATTENTION, f"{value} attention is a TPU/GPU kernel"
    if key == "quantization" and value.strip("'\"") in GPU_QUANTIZATION:
        return _DROP, f"{value} needs a GPU"
    if "gs://" in value and key not in LAUNCHER_KEYS:
        return _DROP, "names a Cloud Storage path"
    return None


def _tpu_only(edit: _Edit) -> None:
    """Drop or turn off what only a TPU slice, a GPU or Google Cloud can do."""
    for key in list(edit.values):
        rule = _key_rule(key, edit.values[key])
        if rule is None:
            continue
        value, why = rule
        if value is None:
            edit.drop(key, why)
        else:
            edit.set(key, value, why)


def _closest(key: str, known: Collection[str]) -> str | None:
    """A known key with the same words in another order, else the most similar spelling."""
    words = sorted(key.split("_"))
    same = [k for k in known if sorted(k.split("_")) == words]
    if same:
        return same[0]
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.8)
    return close[0] if close else None


def _unknown(edit: _Edit, known: Collection[str]) -> tuple[str, ...]:
    if not known:
        return ()
    out = []
    for key in edit.values:
        if key in known or key in LAUNCHER_KEYS:
            continue
        close = _closest(key, known)
        out.append(f"{key} (did you mean {close}?)" if close else key)
    return tuple(out)


def scale_down(
    args: Sequence[str],
    config: Mapping[str, Any],
    known: Collection[str] = (),
    *,
    fixed: Collection[str] = (),
    target: Target = Target(),
) -> ScaledArgs:
    """The CPU arguments for a recipe.

    ``args`` are the recipe's MaxText ``key=value`` arguments, references expanded; ``config``
    is the configuration MaxText would build from them (base.yml, then the model file, then
    the arguments); ``known`` are the keys of base.yml (to flag keys MaxText may refuse);
    ``fixed`` are keys the user set (``--set``), left as they are.
    """
    edit = _Edit(args, fixed)
    edit.set("override_model_config", "true", "lets the arguments shrink the model file's sizes")
    words = _shape(edit, config, target)
    _run_size(edit, config, target)
    _data(edit)
    _tpu_only(edit)
    words += [f"seq {edit.values['max_target_length']}", f"{edit.values['steps']} steps"]
    return ScaledArgs(edit.args(), tuple(edit.changes), ", ".join(words), _unknown(edit, known))
