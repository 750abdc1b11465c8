"""An instant, analytic estimate of HBM per device for a MaxText training step (pure).

Parameters are counted from the effective configuration (embeddings, attention with GQA or
MLA, gated MLPs, MoE experts and shared experts, the dense layers before them, the logits
layer); weights, Adam moments and gradients are sharded over every mesh axis but the data
ones; activations follow the remat policy (the layer input a scanned decoder always keeps,
plus the named tensors the policy saves), one layer's recomputation and the logits.

It is an estimate: the figure is scaled by a ratio measured against real AOT compiles
(:data:`CALIBRATION`, in frameworks/maxtext/data/memory_estimate.yaml), and
``tpu-trainer check --aot`` gives the compiler's own answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tpu_trainer.frameworks.maxtext.memory_tables import CalibrationPoint, memory_tables
from tpu_trainer.frameworks.maxtext.mesh_axes import REPLICATING_AXES
from tpu_trainer.frameworks.maxtext.model_shape import ModelShape
from tpu_trainer.plan.slices import Slice

GIB = 2**30
_TABLES = memory_tables()
_DTYPE_BYTES = _TABLES.dtype_bytes
SAVED_ON_DEVICE = _TABLES.saved_on_device
"""Per remat policy (MaxText's ``remat_policy``), the named tensors kept in HBM for the
backward pass; ``custom`` reads them from the per-tensor keys, ``none`` keeps everything."""
OPTIMIZER_OFFLOAD_SAVING = _TABLES.optimizer_offload_saving
"""Share of the optimizer state ``optimizer_memory_host_offload=true`` takes off a device."""
CALIBRATION: tuple[CalibrationPoint, ...] = _TABLES.calibration
"""Estimate ÷ AOT for cases compiled with MaxText 0.2.5 (``tests/test_check_memory_estimate``
recomputes the ratios, so a change to the arithmetic must re-record them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamCount:
    embedding: int
    attention: int
    """All layers."""
    mlp: int
    """Dense MLPs (all layers that have one)."""
    moe: int
    """Routed experts, shared experts and routers."""
    logits: int
    norms: int

    @property
    def total(self) -> int:
        return self.embedding + self.attention + self.mlp + self.moe + self.logits + self.norms

    def largest_layer(self, s: ModelShape, expert_shards: int = 1) -> float:
        """Parameters of the largest decoder layer (MoE experts split ``expert_shards`` ways)."""
        common = (self.attention + self.norms) / max(s.blocks, 1)
        dense = self.mlp / (s.blocks - s.moe_blocks) if s.blocks > s.moe_blocks else 0.0
        moe = self.moe / s.moe_blocks / expert_shards if s.moe_blocks else 0.0
        return common + max(dense, moe)


def count_parameters(s: ModelShape) -> ParamCount:
    """Parameters of the decoder (pure arithmetic on the shape)."""
    if s.mla:
        q = s.emb * s.heads * s.qk_head
        if s.q_lora:
            q = s.emb * s.q_lora + s.q_lora + s.q_lora * s.heads * s.qk_head
        kv = s.emb * (s.kv_lora + s.qk_rope) + s.kv_lora
        kv += s.kv_lora * s.heads * (s.qk_head - s.qk_rope + s.v_head)
        attention = q + kv + s.heads * s.v_head * s.emb
    else:
        attention = s.emb * s.head_dim * (2 * s.heads + 2 * s.kv_heads)
    one_mlp = (s.activations + 1) * s.emb * s.mlp
    one_expert = (s.activations + 1) * s.emb * s.moe_mlp
    moe = s.moe_blocks * (
        s.experts * one_expert + s.shared_experts * one_expert + s.emb * s.experts
    )
    return ParamCount(
        embedding=s.vocab * s.emb,
        attention=attention * s.blocks,
        mlp=one_mlp * (s.blocks - s.moe_blocks),
        moe=moe,
        logits=0 if s.logits_via_embedding else s.emb * s.vocab,
        norms=2 * s.emb * s.blocks + s.emb,
    )


def _resolve(cfg: Mapping[str, Any], prefix: str, devices: int) -> dict[str, int]:
    """``ici_*`` / ``dcn_*`` parallelism by axis, with the one ``-1`` axis filled in."""
    start, end = f"{prefix}_", "_parallelism"
    values = {
        key[len(start) : -len(end)]: int(value or 1)
        for key, value in cfg.items()
        if key.startswith(start) and key.endswith(end) and isinstance(value, int)
    }
    fixed = math.prod(v for v in values.values() if v > 0)
    for axis, value in values.items():
        if value < 0:
            values[axis] = max(devices // max(fixed, 1), 1)
    return values


def _saved_names(cfg: Mapping[str, Any], names: Iterable[str]) -> tuple[frozenset[str], bool]:
    """Which of ``names`` (a layer's named tensors) stay in HBM for the backward pass, and
    whether the layer input does; ``remat_policy=custom`` reads one key per tensor."""
    policy = str(cfg.get("remat_policy", "full"))
    if policy == "custom":
        on_device = frozenset(t for t in names if cfg.get(t) == "device")
        return on_device, cfg.get("decoder_layer_input", "device") != "offload"
    if policy == "none":
        return frozenset(names), True
    return SAVED_ON_DEVICE.get(policy, frozenset()), True


def _widths(s: ModelShape, moe_layer: bool) -> dict[str, int]:
    """Per-token width of each named tensor of one decoder layer (a fused ``qkv_proj`` or
    ``kv_proj`` is counted through its parts)."""
    if s.mla:
        q, k, v = s.heads * s.qk_head, s.heads * s.qk_head, s.heads * s.v_head
    else:
        q, k, v = s.heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim
    mlp = s.moe_mlp * s.shared_experts if moe_layer else s.mlp
    routed = s.moe_mlp * s.top_k if moe_layer else 0
    return {
        "query_proj": q,
        "key_proj": k,
        "value_proj": v,
        "context": v if s.mla else q,
        "out_proj": s.emb,
        "mlpwi_0": mlp if s.activations > 1 else 0,
        "mlpwi_1": mlp if s.activations > 1 else 0,
        "mlpwi": mlp if s.activations == 1 else 0,
        "mlpwo": s.emb if mlp else 0,
        "moe_mlpwi_0": routed,
        "moe_mlpwi_1": routed,
        "moe_mlpwo": s.emb * s.top_k if moe_layer else 0,
        "mla_q": s.q_lora if s.mla else 0,
        "mla_kv": s.kv_lora + s.qk_rope if s.mla else 0,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Bytes per device of one training step, by part (already calibrated)."""

    params: int
    devices: int
    """JAX devices of all slices."""
    param_shards: int
    """How many ways weights, optimizer state and gradients are split."""
    weights: float
    optimizer: float
    gradients: float
    activations: float
    """Grows with per_device_batch_size: saved layer tensors, one layer's recomputation, logits."""
    layer_inputs: float
    """The part of ``activations`` that ``decoder_layer_input=offload`` moves to the host."""
    gathered: float
    """The largest layer's weights gathered for FSDP, twice (the next one is fetched while one
    computes); does not shrink with more devices."""
    calibration: float
    """Raw estimate ÷ AOT bytes of the nearest calibration case (1.0: none applied)."""
    calibrated_on: str

    @property
    def sharded(self) -> float:
        return self.weights + self.optimizer + self.gradients

    @property
    def fixed(self) -> float:
        """Bytes that do not change with the batch."""
        return self.sharded + self.gathered

    @property
    def total(self) -> float:
        return self.fixed + self.activations

    def times(self, f: float) -> MemoryEstimate:
        """Every part multiplied by ``f``."""
        return replace(
            self,
            weights=self.weights * f,
            optimizer=self.optimizer * f,
            gradients=self.gradients * f,
            activations=self.activations * f,
            layer_inputs=self.layer_inputs * f,
            gathered=self.gathered * f,
        )

    def on_devices(self, devices: int) -> MemoryEstimate:
        """The same step with FSDP spread over ``devices`` instead (activations per device
        stay: per_device_batch_size is per device)."""
        shards = max(self.param_shards * devices // max(self.devices, 1), 1)
        f = self.param_shards / shards
        return replace(
            self,
            devices=devices,
            param_shards=shards,
            weights=self.weights * f,
            optimizer=self.optimizer * f,
            gradients=self.gradients * f,
        )


def _dtype(cfg: Mapping[str, Any], key: str, default: str) -> int:
    return _DTYPE_BYTES.get(str(cfg.get(key) or default), 4)


def _state(cfg: Mapping[str, Any], n: int, shards: int, replicas: int) -> tuple[float, ...]:
    """Weights, optimizer state and gradients per device for ``n`` parameters."""
    w_bytes = _dtype(cfg, "weight_dtype", "float32")
    mu_bytes = _DTYPE_BYTES.get(str(cfg.get("mu_dtype") or cfg.get("weight_dtype")), 4)
    moments = {"adamw": mu_bytes + w_bytes, "adam_pax": mu_bytes + w_bytes, "sgd": 0}
    opt_bytes = moments.get(str(cfg.get("opt_type", "adamw")), mu_bytes)
    opt_shards = shards * (replicas if cfg.get("shard_optimizer_over_data") else 1)
    grad_copies = 2 if int(cfg.get("gradient_accumulation_steps", 1) or 1) > 1 else 1
    offload = OPTIMIZER_OFFLOAD_SAVING if cfg.get("optimizer_memory_host_offload") else 0.0
    return (
        0.0 if cfg.get("parameter_memory_host_offload") else n * w_bytes / shards,
        n * opt_bytes / opt_shards * (1 - offload),
        grad_copies * n * _dtype(cfg, "grad_dtype", "float32") / shards,
    )


def _activations(cfg: Mapping[str, Any], s: ModelShape, tensor: int) -> tuple[float, float]:
    """Batch-proportional bytes per device, and the layer-input part of them."""
    a_bytes = _dtype(cfg, "dtype", "bfloat16")
    tokens = float(cfg.get("per_device_batch_size", 1)) * int(cfg.get("max_target_length", 2048))
    widths = [_widths(s, moe_layer=False)] * (s.blocks - s.moe_blocks)
    widths += [_widths(s, moe_layer=True)] * s.moe_blocks
    saved, keep_input = _saved_names(cfg, _widths(s, moe_layer=True))
    saved_width = sum(sum(w.get(n, 0) for n in saved) for w in widths)
    layer_inputs = tokens * s.emb * a_bytes * s.blocks if keep_input else 0.0
    working = max((2 * sum(w.values()) + 4 * s.emb for w in widths), default=0)
    tiling = max(int(cfg.get("num_vocab_tiling", 1) or 1), 1)
    logits = 2 * 4 * tokens * s.vocab / tensor / tiling  # float32 logits and their gradient
    total = layer_inputs + (saved_width + working) * tokens * a_bytes + logits
    return total, layer_inputs


def raw_estimate(cfg: Mapping[str, Any], slice_: Slice, num_slices: int = 1) -> MemoryEstimate:
    """The uncalibrated estimate for ``cfg`` (MaxText's effective configuration)."""
    s = ModelShape.from_config(cfg)
    count = count_parameters(s)
    devices = slice_.jax_devices * max(num_slices, 1)
    ici, dcn = _resolve(cfg, "ici", slice_.jax_devices), _resolve(cfg, "dcn", num_slices)
    replicas = max(math.prod(ici.get(a, 1) * dcn.get(a, 1) for a in REPLICATING_AXES), 1)
    shards = max(devices // replicas, 1)
    tensor = max(ici.get("tensor", 1) * dcn.get("tensor", 1), 1)
    weights, optimizer, gradients = _state(cfg, count.total, shards, replicas)
    activations, layer_inputs = _activations(cfg, s, tensor)
    a_bytes = _dtype(cfg, "dtype", "bfloat16")
    layer = count.largest_layer(s, max(ici.get("expert", 1) * dcn.get("expert", 1), 1))
    gathered = 2 * a_bytes * layer / tensor if shards > 1 else 0.0
    return MemoryEstimate(
        params=count.total,
        devices=devices,
        param_shards=shards,
        weights=weights,
        optimizer=optimizer,
        gradients=gradients,
        activations=activations,
        layer_inputs=layer_inputs,
        gathered=gathered,
        calibration=1.0,
        calibrated_on="",
    )


def calibrate(
    raw: MemoryEstimate, points: tuple[CalibrationPoint, ...] = CALIBRATION
) -> MemoryEstimate:
    """Scale every part by the ratio of the calibration case nearest in parameter count."""
    known = [p for p in points if p.ratio > 0 and p.params > 0]
    if not known or raw.params <= 0:
        return raw
    point = min(known, key=lambda p: abs(math.log(p.params / raw.params)))
    return replace(raw.times(1.0 / point.ratio), calibration=point.ratio, calibrated_on=point.label)


def estimate_memory(cfg: Mapping[str, Any], slice_: Slice, num_slices: int = 1) -> MemoryEstimate:
    """Calibrated bytes per device for ``cfg`` on ``num_slices`` × ``slice_``."""
    return calibrate(raw_estimate(cfg, slice_, num_slices))


def usable_hbm(slice_: Slice) -> tuple[float, bool]:
    """Bytes of HBM a JAX device may use, and whether that is XLA's measured figure (else the
    nominal HBM per device)."""
    acc = slice_.accelerator
    if acc.usable_hbm_gib_per_device:
        return acc.usable_hbm_gib_per_device * GIB, True
    return acc.hbm_gb_per_chip * 1e9 / acc.jax_devices_per_chip, False


def gib(value: float) -> str:
    return f"{value / GIB:.2f} GiB"
