"""An instant, analytic estimate of HBM per device for a MaxText training step (pure).

Parameters are counted from the effective configuration (embeddings, attention with GQA or
MLA, gated MLPs, MoE experts and shared experts, the dense layers before them, the logits
layer); weights, Adam moments and gradients are sharded over every mesh axis but the data
ones; activations follow the remat policy (the layer input a scanned decoder always keeps,
plus the named tensors the policy saves), one layer's recomputation and the logits.

It is an estimate: the figure is scaled by a ratio measured against real AOT compiles
(:data:`CALIBRATION`), and ``tpu-trainer check --aot`` gives the compiler's own answer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice, valid_topologies

CHECK_NAME = "memory-fit (estimate)"
GIB = 2**30
_DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "fp8": 1, "float8_e4m3fn": 1, "int8": 1}
_REPLICATING_AXES = ("data", "diloco")
"""Mesh axes that copy the weights instead of splitting them."""

_MINIMAL = frozenset(
    {"query_proj", "key_proj", "value_proj", "kv_proj", "qkv_proj", "out_proj"}
    | {"mlpwi_0", "mlpwi_1", "mlpwi", "mlpwo"}
)
_QKV = frozenset({"query_proj", "key_proj", "value_proj", "kv_proj", "qkv_proj"})
SAVED_ON_DEVICE: Mapping[str, frozenset[str]] = {
    "full": frozenset(),
    "minimal": _MINIMAL,
    "minimal_with_context": _MINIMAL | {"context"},
    "minimal_flash": _MINIMAL | {"context"},
    "minimal_with_quantization": _MINIMAL,
    "minimal_with_context_and_quantization": _MINIMAL | {"context"},
    "save_dot_with_context_except_mlp": _QKV | {"context", "out_proj"},
    "save_dot_except_mlpwi": _QKV | {"out_proj", "mlpwo"},
    "save_dot_except_mlp": _QKV | {"out_proj"},
    "save_qkv_proj": _QKV,
    "qkv_proj_offloaded": frozenset(),
    "minimal_offloaded": frozenset(),
    "save_out_proj": frozenset({"out_proj"}),
}
"""Per remat policy (MaxText's ``remat_policy``), the named tensors kept in HBM for the
backward pass; ``custom`` reads them from the per-tensor keys, ``none`` keeps everything."""
OPTIMIZER_OFFLOAD_SAVING = 0.47
"""Share of the optimizer state ``optimizer_memory_host_offload=true`` takes off a device:
the update still stages it through HBM (measured: llama3-70b on tpu7x-8 needs 151.15 GiB per
device, 117.77 GiB with the offload, of an estimated 71.0 GiB of optimizer state)."""
_BLOCKS_PER_LAYER = {"gemma2": 2}
"""Decoder blocks whose one configured layer holds several transformer blocks (Gemma 2 pairs a
local and a global attention layer)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelShape:
    """The dimensions that decide memory, read from MaxText's effective configuration."""

    emb: int
    layers: int
    q_heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    moe_mlp: int
    vocab: int
    mlp_inputs: int
    """Input projections per MLP: 2 for gated activations (``["silu", "linear"]``)."""
    experts: int
    top_k: int
    shared_experts: int
    moe_layers: int
    logits_via_embedding: bool
    mla: bool
    q_lora_rank: int
    kv_lora_rank: int
    qk_head: int
    """MLA: query/key width per head (no-RoPE + RoPE part)."""
    v_head: int
    qk_rope: int

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> ModelShape:
        scale = int(cfg.get("global_parameter_scale", 1) or 1)
        emb_s, head_s, mlp_s, layer_s = _scales(scale)
        blocks = _BLOCKS_PER_LAYER.get(str(cfg.get("decoder_block", "")), 1)
        layers = int(cfg["base_num_decoder_layers"]) * 2**layer_s * blocks
        experts = int(cfg.get("num_experts", 1) or 1)
        moe_layers = 0
        if experts > 1:
            dense = int(cfg.get("first_num_dense_layers", 0) or 0)
            step = int(cfg.get("interleave_moe_layer_step", 1) or 1)
            moe_layers = (layers - dense) // max(step, 1)
        mlp = int(cfg["base_mlp_dim"]) * 2**mlp_s
        moe_mlp = int(cfg.get("base_moe_mlp_dim", -1) or -1)
        mla = str(cfg.get("attention_type", "global")) == "mla"
        return cls(
            emb=int(cfg["base_emb_dim"]) * 2**emb_s,
            layers=layers,
            q_heads=int(cfg["base_num_query_heads"]) * 2**head_s,
            kv_heads=int(cfg["base_num_kv_heads"]) * 2**head_s,
            head_dim=int(cfg.get("head_dim", 128)),
            mlp=mlp,
            moe_mlp=moe_mlp * 2**mlp_s if moe_mlp > 0 else mlp,
            vocab=int(cfg.get("vocab_size", 32000)),
            mlp_inputs=max(len(list(cfg.get("mlp_activations") or ["relu"])), 1),
            experts=experts,
            top_k=int(cfg.get("num_experts_per_tok", 1) or 1),
            shared_experts=int(cfg.get("shared_experts", 0) or 0),
            moe_layers=moe_layers,
            logits_via_embedding=bool(cfg.get("logits_via_embedding", False)),
            mla=mla,
            q_lora_rank=int(cfg.get("q_lora_rank", 0) or 0),
            kv_lora_rank=int(cfg.get("kv_lora_rank", 0) or 0),
            qk_head=int(cfg.get("qk_nope_head_dim", 128)) + int(cfg.get("qk_rope_head_dim", 64)),
            v_head=int(cfg.get("v_head_dim", 128)),
            qk_rope=int(cfg.get("qk_rope_head_dim", 64)),
        )


def _scales(scale: int) -> tuple[int, int, int, int]:
    """How MaxText spreads ``global_parameter_scale`` (a power of two) over the dimensions."""
    log2 = max(int(math.log2(scale)), 0) if scale > 0 else 0
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return base + int(rem > 1), heads, heads, base


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
        common = (self.attention + self.norms) / max(s.layers, 1)
        dense = self.mlp / (s.layers - s.moe_layers) if s.layers > s.moe_layers else 0.0
        moe = self.moe / s.moe_layers / expert_shards if s.moe_layers else 0.0
        return common + max(dense, moe)


def count_parameters(s: ModelShape) -> ParamCount:
    """Parameters of the decoder (pure arithmetic on the shape)."""
    if s.mla:
        q = s.emb * s.q_heads * s.qk_head
        if s.q_lora_rank:
            q = s.emb * s.q_lora_rank + s.q_lora_rank + s.q_lora_rank * s.q_heads * s.qk_head
        kv = s.emb * (s.kv_lora_rank + s.qk_rope) + s.kv_lora_rank
        kv += s.kv_lora_rank * s.q_heads * (s.qk_head - s.qk_rope + s.v_head)
        attention = q + kv + s.q_heads * s.v_head * s.emb
    else:
        attention = s.emb * s.head_dim * (2 * s.q_heads + 2 * s.kv_heads)
    one_mlp = (s.mlp_inputs + 1) * s.emb * s.mlp
    one_expert = (s.mlp_inputs + 1) * s.emb * s.moe_mlp
    moe = s.moe_layers * (
        s.experts * one_expert + s.shared_experts * one_expert + s.emb * s.experts
    )
    return ParamCount(
        embedding=s.vocab * s.emb,
        attention=attention * s.layers,
        mlp=one_mlp * (s.layers - s.moe_layers),
        moe=moe,
        logits=0 if s.logits_via_embedding else s.emb * s.vocab,
        norms=2 * s.emb * s.layers + s.emb,
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
        q, k, v = s.q_heads * s.qk_head, s.q_heads * s.qk_head, s.q_heads * s.v_head
    else:
        q, k, v = s.q_heads * s.head_dim, s.kv_heads * s.head_dim, s.kv_heads * s.head_dim
    mlp = s.moe_mlp * s.shared_experts if moe_layer else s.mlp
    routed = s.moe_mlp * s.top_k if moe_layer else 0
    return {
        "query_proj": q,
        "key_proj": k,
        "value_proj": v,
        "context": v if s.mla else q,
        "out_proj": s.emb,
        "mlpwi_0": mlp if s.mlp_inputs > 1 else 0,
        "mlpwi_1": mlp if s.mlp_inputs > 1 else 0,
        "mlpwi": mlp if s.mlp_inputs == 1 else 0,
        "mlpwo": s.emb if mlp else 0,
        "moe_mlpwi_0": routed,
        "moe_mlpwi_1": routed,
        "moe_mlpwo": s.emb * s.top_k if moe_layer else 0,
        "mla_q": s.q_lora_rank if s.mla else 0,
        "mla_kv": s.kv_lora_rank + s.qk_rope if s.mla else 0,
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


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationPoint:
    """One real AOT compile the estimate was compared with."""

    label: str
    args: tuple[str, ...]
    device_type: str
    params: int
    """Parameters of the model (the estimate's count)."""
    aot_bytes: int
    """Bytes per device from the compile (argument + output − alias + temp, or the OOM's
    required figure)."""
    ratio: float
    """Raw estimate ÷ ``aot_bytes`` when it was recorded."""


_TINY = (
    "base_emb_dim=256",
    "base_num_decoder_layers=2",
    "base_mlp_dim=512",
    "base_num_query_heads=4",
    "base_num_kv_heads=4",
    "head_dim=64",
    "per_device_batch_size=1",
    "max_target_length=128",
)
CALIBRATION: tuple[CalibrationPoint, ...] = (
    CalibrationPoint(
        label="tiny (18M) on tpu7x-8",
        args=("model_name=default", *_TINY),
        device_type="tpu7x-2x2x1",
        params=17_696_000,
        aot_bytes=66_666_752,
        ratio=1.0873,
    ),
    CalibrationPoint(
        label="llama3.1-8b on tpu7x-8",
        args=("model_name=llama3.1-8b", "per_device_batch_size=2", "max_target_length=2048"),
        device_type="tpu7x-2x2x1",
        params=8_030_261_248,
        aot_bytes=21_090_879_232,
        ratio=1.0960,
    ),
    CalibrationPoint(
        label="llama3-70b on tpu7x-8 (OOM)",
        args=("model_name=llama3-70b", "per_device_batch_size=1", "max_target_length=2048"),
        device_type="tpu7x-2x2x1",
        params=70_553_706_496,
        aot_bytes=int(151.15 * GIB),
        ratio=0.9255,
    ),
)
"""Estimate ÷ AOT for cases compiled with MaxText 0.2.5 (``tests/test_check_memory_estimate``
recomputes the ratios, so a change to the arithmetic must re-record them)."""


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
    widths = [_widths(s, moe_layer=False)] * (s.layers - s.moe_layers)
    widths += [_widths(s, moe_layer=True)] * s.moe_layers
    saved, keep_input = _saved_names(cfg, _widths(s, moe_layer=True))
    saved_width = sum(sum(w.get(n, 0) for n in saved) for w in widths)
    layer_inputs = tokens * s.emb * a_bytes * s.layers if keep_input else 0.0
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
    replicas = max(math.prod(ici.get(a, 1) * dcn.get(a, 1) for a in _REPLICATING_AXES), 1)
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


# ---- what to change when it does not fit ------------------------------------------------

HEADROOM = 0.95
"""Suggestions aim at this share of a device's HBM (the split they rely on is estimated)."""
MAX_GROWTH = 16
"""A bigger slice is suggested up to this many times the chips."""


def _scaled(estimate: MemoryEstimate, total: float) -> MemoryEstimate:
    """``estimate`` with every part scaled so the parts add up to ``total`` (the AOT figure)."""
    return estimate.times(total / estimate.total if estimate.total > 0 else 1.0)


def _batch_fix(pdbs: float, split: MemoryEstimate | None, target: float) -> str:
    if split is None:
        return f"a smaller per_device_batch_size (now {pdbs:g}): activations grow with it"
    room = target - split.fixed
    per_unit = split.activations / pdbs
    if room < per_unit:
        return (
            f"per_device_batch_size alone cannot fit: even 1 needs about "
            f"{gib(split.fixed + per_unit)} per device, {gib(split.fixed)} of which does not "
            "depend on the batch"
        )
    batch = int(room // per_unit)
    return (
        f"per_device_batch_size={batch} (now {pdbs:g}): about "
        f"{gib(split.fixed + per_unit * batch)} per device, assuming activations grow "
        "linearly with the batch"
    )


def _offload_fixes(cfg: Mapping[str, Any], split: MemoryEstimate | None, over: float) -> list[str]:
    options: list[tuple[float, str, str]] = []
    custom = cfg.get("remat_policy") == "custom"
    if not (custom and cfg.get("decoder_layer_input") == "offload"):
        saved = split.layer_inputs if split else 0.0
        options.append(
            (
                saved,
                "remat_policy=custom decoder_layer_input=offload",
                "each layer's input to host memory",
            )
        )
    if not cfg.get("optimizer_memory_host_offload"):
        saved = split.optimizer * OPTIMIZER_OFFLOAD_SAVING if split else 0.0
        options.append(
            (saved, "optimizer_memory_host_offload=true", "the optimizer state to host memory")
        )
    fixes = []
    for saved, setting, what in sorted(options, key=lambda o: -o[0]):
        if split is None:
            fixes.append(f"{setting} ({what})")
            continue
        enough = ", enough on its own" if saved >= over else ""
        fixes.append(f"{setting} ({what}: about {gib(saved)} less per device{enough})")
    return fixes


def _chips_fix(
    cfg: Mapping[str, Any],
    slice_: Slice,
    num_slices: int,
    split: MemoryEstimate | None,
    target: float,
) -> str:
    acc = slice_.accelerator
    if split is None:
        return f"a bigger {acc.name} slice: more devices share the weights and optimizer state"
    fsdp_note = ""
    if int(cfg.get("ici_fsdp_parallelism", -1) or -1) > 0:
        fsdp_note = " once ici_fsdp_parallelism grows to fill the new devices"
    for topology in valid_topologies(acc, limit_chips=slice_.chips * MAX_GROWTH):
        bigger = Slice.of(acc.family, topology)
        if bigger.chips <= slice_.chips:
            continue
        need = split.on_devices(bigger.jax_devices * num_slices).total
        if need <= target:
            return (
                f"{bigger.device_type} ({bigger.jax_devices} devices per slice): about "
                f"{gib(need)} per device with weights and optimizer state spread over all "
                f"of them{fsdp_note}"
            )
    return (
        f"no {acc.name} slice up to {MAX_GROWTH}× this one fits: about "
        f"{gib(split.activations + split.gathered)} per device (activations and gathered "
        "layer weights) does not shrink with more devices"
    )


def memory_fixes(
    cfg: Mapping[str, Any],
    slice_: Slice,
    num_slices: int,
    needed: float,
    available: float,
    estimate: MemoryEstimate | None,
) -> list[str]:
    """Ways to fit, in the order to try them: a smaller batch, a remat policy that keeps less,
    host offload, more chips. ``needed`` is split like ``estimate`` to say how far each goes."""
    split = _scaled(estimate, needed) if estimate is not None else None
    target = available * HEADROOM
    fixes = []
    pdbs = float(cfg.get("per_device_batch_size", 1) or 1)
    if pdbs > 1:
        fixes.append(_batch_fix(pdbs, split, target))
    policy = str(cfg.get("remat_policy", "full"))
    if policy not in ("full", "custom"):
        fixes.append(
            f"remat_policy=full (now {policy}): recompute each layer in the backward pass "
            "instead of keeping its activations"
        )
    fixes += _offload_fixes(cfg, split, needed - target)
    fixes.append(_chips_fix(cfg, slice_, num_slices, split, target))
    return fixes


def numbered(fixes: list[str]) -> str:
    return "; ".join(f"{i}) {fix}" for i, fix in enumerate(fixes, start=1))


# ---- the check --------------------------------------------------------------------------


def describe(estimate: MemoryEstimate, cfg: Mapping[str, Any]) -> str:
    """The parts of an estimate, for a finding's message."""
    scale = (
        f"scaled ×{1 / estimate.calibration:.2f} from the AOT compile of {estimate.calibrated_on}"
        if estimate.calibrated_on
        else "not calibrated"
    )
    return (
        f"weights {gib(estimate.weights)}, optimizer {gib(estimate.optimizer)}, gradients "
        f"{gib(estimate.gradients)}, activations {gib(estimate.activations)} "
        f"(remat_policy={cfg.get('remat_policy', 'full')}, per_device_batch_size="
        f"{cfg.get('per_device_batch_size')} × max_target_length={cfg.get('max_target_length')}), "
        f"gathered layer weights {gib(estimate.gathered)}; {estimate.params / 1e9:.2f} B "
        f"parameters split {estimate.param_shards} ways; {scale}"
    )


def check_estimate(request: MaxTextRequest, _: object, cfg: Mapping[str, Any]) -> list[Finding]:
    """The estimate as a finding: pass up to 90 % of a device's HBM, warn above.

    An estimate never fails a recipe (published recipes that run well can exceed it, e.g. with
    remat policies it models coarsely); only the compile (`--aot`) can."""
    if request.slice.family is Family.CPU:
        return []
    try:
        estimate = estimate_memory(cfg, request.slice, request.num_slices)
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as e:
        return [Finding(CHECK_NAME, Level.WARN, f"cannot estimate memory: {e!r}")]
    available, measured = usable_hbm(request.slice)
    share = estimate.total / available
    status = Level.PASS if share <= 0.9 else Level.WARN
    message = (
        f"estimate: about {gib(estimate.total)} of {gib(available)}"
        f"{'' if measured else ' nominal'} per device ({100 * share:.0f} %): "
        + describe(estimate, cfg)
    )
    fix = ""
    if status is not Level.PASS:
        fixes = memory_fixes(
            cfg, request.slice, request.num_slices, estimate.total, available, estimate
        )
        fix = "confirm with `tpu-trainer check --aot`; if it does not fit: " + numbered(fixes)
    return [Finding(CHECK_NAME, status, message, fix)]
