"""The parameter arrays of a MaxText model: path, shape and the logical axis of each dimension.

They follow MaxText 0.2.5's embedding, attention (MHA/GQA and MLA), MLP and MoE layers, in
JAX's tree order, for the model a :class:`ModelShape` describes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tpu_trainer.frameworks.maxtext.model_shape import ModelShape

MODELLED_BLOCKS = frozenset(
    {"default", "llama2", "mistral", "mixtral", "deepseek", "qwen3", "qwen3_moe"}
)
"""Decoder blocks whose every parameter's shape and sharding were compared with MaxText's own
(others are checked as the generic attention, MLP and MoE layers they share)."""


@dataclass(frozen=True, slots=True)
class ParamSpec:
    """One parameter array: where it sits, its shape and the logical axis of each dimension."""

    path: str
    shape: tuple[int, ...]
    axes: tuple[str | None, ...]
    copies: int = 1
    """How many arrays of this shape exist (layers that are not scanned)."""

    @property
    def size(self) -> int:
        return math.prod(self.shape) * self.copies


def _p(path: str, shape: Sequence[int], axes: Sequence[str | None]) -> ParamSpec:
    return ParamSpec(path, tuple(shape), tuple(axes))


def _attention(d: ModelShape) -> list[ParamSpec]:
    a = "self_attention/"
    on = d.attention_axes

    def ax(*names: str | None) -> tuple[str | None, ...]:
        return names if on else (None,) * len(names)

    if d.mla:
        qk = d.qk_nope + d.qk_rope
        out = [
            _p(
                a + "wkv_a/kernel",
                (d.emb, d.kv_lora + d.qk_rope),
                ("embed_attn", "kv_lora_up_proj"),
            ),
            _p(a + "kv_norm/scale", (d.kv_lora,), ("norm",)),
            _p(
                a + "wkv_b/kernel",
                (d.kv_lora, d.heads, d.qk_nope + d.v_head),
                ("kv_lora", "kv_heads", "kv_head_dim"),
            ),
            _p(a + "out/kernel", (d.heads, d.v_head, d.emb), ("heads", "kv", "embed_attn")),
        ]
        if d.q_lora > 0:
            return [
                *out,
                _p(a + "wq_a/kernel", (d.emb, d.q_lora), ("embed_attn", "q_lora_up_proj")),
                _p(a + "q_norm/scale", (d.q_lora,), ("norm",)),
                _p(a + "wq_b/kernel", (d.q_lora, d.heads, qk), ("q_lora", "q_heads", "kv")),
            ]
        return [*out, _p(a + "query/kernel", (d.emb, d.heads, qk), ("embed_attn", "q_heads", "kv"))]
    out_kernel = _p(a + "out/kernel", (d.heads, d.head_dim, d.emb), ax("heads", "kv", "embed_attn"))
    if d.fused_qkv:
        fused = (d.emb, d.heads + 2 * d.kv_heads, d.head_dim)
        return [_p(a + "qkv_proj/kernel", fused, ("embed_attn", "heads", "kv")), out_kernel]
    kv = (d.emb, d.kv_heads, d.head_dim)
    kv_axes = ax("embed_attn", "kv_heads", "kv_head_dim")
    norms = [_p(a + f"{n}_norm/scale", (d.head_dim,), ("norm",)) for n in ("query", "key")]
    return [
        _p(a + "query/kernel", (d.emb, d.heads, d.head_dim), ax("embed_attn", "q_heads", "kv")),
        _p(a + "key/kernel", kv, kv_axes),
        _p(a + "value/kernel", kv, kv_axes),
        out_kernel,
        *(norms if d.qk_norm else []),
    ]


def _mlp(d: ModelShape, where: str, hidden: int) -> list[ParamSpec]:
    if d.fused_mlp:
        wi = [
            _p(
                where + "wi/kernel",
                (d.emb, d.activations, hidden),
                ("embed", "num_activations", "mlp"),
            )
        ]
    elif d.activations == 1:
        wi = [_p(where + "wi/kernel", (d.emb, hidden), ("embed", "mlp"))]
    else:
        wi = [
            _p(f"{where}wi_{i}/kernel", (d.emb, hidden), ("embed", "mlp"))
            for i in range(d.activations)
        ]
    return [*wi, _p(where + "wo/kernel", (hidden, d.emb), ("mlp", "embed"))]


_MOE_PATHS = {"deepseek": "DeepSeekMoeBlock_0/MoeBlock_0/", "qwen3_moe": "moe_block/"}
"""Where a decoder block keeps its routed experts (MoeBlock_0/ elsewhere)."""


def _moe(d: ModelShape) -> list[ParamSpec]:
    where = _MOE_PATHS.get(d.block, "MoeBlock_0/")
    router = "embed_router" if d.deepseek else "embed"
    wi_axes, wo_axes = d.moe_axes
    wi = (d.experts, d.emb, d.moe_mlp)
    out = [
        _p(where + "gate/kernel", (d.emb, d.experts), (router, None)),
        _p(where + "wi_0", wi, wi_axes),
        _p(where + "wi_1", wi, wi_axes),
        _p(where + "wo", (d.experts, d.moe_mlp, d.emb), wo_axes),
    ]
    if d.shared_experts > 0:
        shared = "DeepSeekMoeBlock_0/shared_experts/" if d.deepseek else "shared_experts/"
        out += _mlp(d, shared, d.shared_experts * d.moe_mlp)
    return out


def _norms(d: ModelShape) -> list[ParamSpec]:
    return [
        _p(f"{name}/scale", (d.emb,), ("norm",))
        for name in ("pre_self_attention_layer_norm", "post_self_attention_layer_norm")
    ]


def _stack(d: ModelShape, group: str, count: int, layer: list[ParamSpec]) -> list[ParamSpec]:
    """``count`` layers: scanned (one array with a layer dimension) or ``count`` copies."""
    if count <= 0:
        return []
    out = []
    for p in layer:
        shape = p.shape
        path = f"decoder/{group}/{p.path}"
        name = None if d.pipeline else group
        if d.scan:
            at = min(d.scan_axis, len(shape))
            out.append(
                ParamSpec(
                    path, (*shape[:at], count, *shape[at:]), (*p.axes[:at], name, *p.axes[at:])
                )
            )
        else:
            out.append(ParamSpec(path, shape, p.axes, count))
    return out


def model_params(d: ModelShape) -> tuple[ParamSpec, ...]:
    """The model's parameter arrays, in JAX's tree order (sorted paths)."""
    dense_layer = [*_attention(d), *_mlp(d, "mlp/", d.mlp), *_norms(d)]
    moe_layer = [*_attention(d), *_moe(d), *_norms(d)]
    if d.experts <= 1:
        params = _stack(d, "layers", d.layers, dense_layer)
    elif d.deepseek:
        params = _stack(d, "dense_layers", d.dense_layers, dense_layer)
        params += _stack(d, "moe_layers", d.layers - d.dense_layers, moe_layer)
    else:
        moe_count = d.layers // d.moe_every
        params = _stack(d, "layers", moe_count, moe_layer)
        params += _stack(
            d,
            "layers",
            d.layers - moe_count,
            [replace(p, path="dense/" + p.path) for p in dense_layer],
        )
    params += [
        _p("token_embedder/embedding", (d.vocab, d.emb), ("vocab", "embed_vocab")),
        _p("decoder/decoder_norm/scale", (d.emb,), ("norm",)),
    ]
    if not d.logits_via_embedding:
        params.append(_p("decoder/logits_dense/kernel", (d.emb, d.vocab), ("embed_vocab", "vocab")))
    return tuple(sorted(params, key=lambda p: p.path.split("/")))
