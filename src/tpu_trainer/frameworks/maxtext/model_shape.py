"""The one description of a MaxText model's shape, read from MaxText's effective configuration.

The sharding check, the memory estimate and the CPU scale-down all read the model through this
class. Defaults are MaxText 0.2.5's ``base.yml`` values; the five ``base_*`` sizes have none:
every effective configuration (base.yml, the model file, the command) holds them, and a
configuration without them is not MaxText's (reading one raises ``KeyError``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BLOCKS_PER_LAYER: Mapping[str, int] = {"gemma2": 2}
"""Decoder blocks whose one configured layer holds several transformer blocks (Gemma 2 pairs a
local and a global attention layer)."""

MoeAxes = tuple[tuple[str | None, ...], tuple[str | None, ...]]


def _int(cfg: Mapping[str, Any], key: str, default: int) -> int:
    """``cfg[key]`` as an integer (a YAML-typed number or its text), else ``default``."""
    value = cfg.get(key, default)
    if isinstance(value, bool) or value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _required(cfg: Mapping[str, Any], key: str) -> int:
    return int(cfg[key])


def parameter_scales(scale: int) -> tuple[int, int, int, int]:
    """MaxText's split of ``global_parameter_scale`` (a power of two) into the factors of the
    (emb, heads, mlp, layers) dimensions."""
    log2 = max(int(math.log2(scale)), 0) if scale > 0 else 0
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return 2 ** (base + int(rem > 1)), 2**heads, 2**heads, 2**base


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelShape:
    """The numbers of the effective configuration that shape a MaxText model."""

    emb: int
    vocab: int = 32000
    layers: int
    """Configured decoder layers (``base_num_decoder_layers`` × the parameter scale)."""
    heads: int
    kv_heads: int
    head_dim: int = 128
    mlp: int
    moe_mlp: int
    """Width of one routed expert (the dense MLP width when ``base_moe_mlp_dim`` is unset)."""
    activations: int = 2
    """Input projections per MLP: 2 for gated activations (``["silu", "linear"]``)."""
    experts: int = 1
    top_k: int = 1
    shared_experts: int = 0
    dense_layers: int = 0
    moe_every: int = 1
    mla: bool = False
    q_lora: int = 0
    kv_lora: int = 512
    qk_nope: int = 128
    qk_rope: int = 64
    v_head: int = 128
    block: str = "llama2"
    blocks_per_layer: int = 1
    scan: bool = True
    scan_axis: int = 1
    pipeline: bool = False
    """Pipeline stages regroup the layers."""
    logits_via_embedding: bool = False
    fused_qkv: bool = False
    fused_mlp: bool = False
    qk_norm: bool = False
    shard_exp_on_fsdp: bool = False
    fsdp_2d: bool = False
    attention_axes: bool = True
    """False when ``ici_context_autoregressive_parallelism`` > 1 replicates attention."""

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ModelShape:
        """The model MaxText builds, with ``global_parameter_scale`` applied."""
        return cls.configured(cfg, scale=_int(cfg, "global_parameter_scale", 1))

    @classmethod
    def configured(cls, cfg: Mapping[str, Any], *, scale: int = 1) -> ModelShape:
        """The sizes as the configuration writes them (``scale`` 1: no parameter scale)."""
        emb_s, head_s, mlp_s, layer_s = parameter_scales(scale)
        mlp = mlp_s * _required(cfg, "base_mlp_dim")
        moe_mlp = mlp_s * _int(cfg, "base_moe_mlp_dim", -1)
        block = str(cfg.get("decoder_block", "llama2"))
        pipeline = _int(cfg, "ici_pipeline_parallelism", 1) * _int(
            cfg, "dcn_pipeline_parallelism", 1
        )
        return cls(
            emb=emb_s * _required(cfg, "base_emb_dim"),
            vocab=_int(cfg, "vocab_size", 32000),
            layers=layer_s * _required(cfg, "base_num_decoder_layers"),
            heads=head_s * _required(cfg, "base_num_query_heads"),
            kv_heads=head_s * _required(cfg, "base_num_kv_heads"),
            head_dim=_int(cfg, "head_dim", 128),
            mlp=mlp,
            moe_mlp=moe_mlp if moe_mlp > 0 else mlp,
            activations=max(len(list(cfg.get("mlp_activations") or ["silu", "linear"])), 1),
            experts=_int(cfg, "num_experts", 1),
            top_k=_int(cfg, "num_experts_per_tok", 1),
            shared_experts=_int(cfg, "shared_experts", 0),
            dense_layers=_int(cfg, "first_num_dense_layers", 0),
            moe_every=max(_int(cfg, "interleave_moe_layer_step", 1), 1),
            mla=cfg.get("attention_type") == "mla",
            q_lora=_int(cfg, "q_lora_rank", 0),
            kv_lora=_int(cfg, "kv_lora_rank", 512),
            qk_nope=_int(cfg, "qk_nope_head_dim", 128),
            qk_rope=_int(cfg, "qk_rope_head_dim", 64),
            v_head=_int(cfg, "v_head_dim", 128),
            block=block,
            blocks_per_layer=BLOCKS_PER_LAYER.get(block, 1),
            scan=cfg.get("scan_layers", True) is not False,
            scan_axis=_int(cfg, "param_scan_axis", 1),
            pipeline=pipeline != 1,
            logits_via_embedding=cfg.get("logits_via_embedding") is True,
            fused_qkv=cfg.get("fused_qkv") is True,
            fused_mlp=cfg.get("fused_mlp") is True,
            qk_norm=cfg.get("use_qk_norm") is True and cfg.get("qk_norm_with_scale") is not False,
            shard_exp_on_fsdp=cfg.get("shard_exp_on_fsdp") is True,
            fsdp_2d=cfg.get("use_2d_fsdp_sharding") is True,
            attention_axes=_int(cfg, "ici_context_autoregressive_parallelism", 1) <= 1,
        )

    @property
    def deepseek(self) -> bool:
        return self.block == "deepseek"

    @property
    def qk_head(self) -> int:
        """MLA: query/key width per head (the no-RoPE and the RoPE part)."""
        return self.qk_nope + self.qk_rope

    @property
    def blocks(self) -> int:
        """Transformer blocks of the decoder (a Gemma 2 layer holds two)."""
        return self.layers * self.blocks_per_layer

    @property
    def moe_blocks(self) -> int:
        """Blocks with routed experts: those after the dense ones, every ``moe_every``-th."""
        if self.experts <= 1:
            return 0
        return (self.blocks - self.dense_layers) // self.moe_every

    @property
    def moe_axes(self) -> MoeAxes:
        """Logical axes of the routed experts' (wi, wo) kernels."""
        if self.shard_exp_on_fsdp:
            return ("embed_moe", None, "mlp_moe"), ("embed_moe", "mlp_moe", None)
        if self.fsdp_2d:
            return ("embed_moe", "mlp_moe", None), ("embed_moe", "mlp_moe", None)
        return ("exp", "embed_moe", "mlp_moe"), ("exp", "mlp_moe", "embed_moe")
