"""Every sharded parameter dimension must divide evenly over its mesh axes.

MaxText names each parameter dimension with a logical axis (``kv_lora``, ``embed``, ``exp``...);
``logical_axis_rules`` maps those onto mesh axes, first free rule wins, as Flax does. A
dimension sharded over mesh axes whose sizes multiply to more than it (or to a non-divisor)
makes JAX raise ``IndivisibleError`` before compiling. The big parameters' shapes and logical
axes below follow MaxText 0.2.5's embedding, attention (MHA/GQA and MLA), MLP and MoE layers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tpu_trainer.checks import mesh
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs, parse_value
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

Rules = tuple[tuple[str, tuple[str, ...]], ...]
GIB = 1024**3

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


# ---- the model's parameters -------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelDims:
    """The effective configuration's numbers that shape the parameters."""

    emb: int
    vocab: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    moe_mlp: int
    experts: int
    shared_experts: int
    dense_layers: int
    moe_every: int
    activations: int
    mla: bool
    q_lora: int
    kv_lora: int
    qk_nope: int
    qk_rope: int
    v_head: int
    block: str
    deepseek: bool
    scan: bool
    pipeline: bool
    """Pipeline stages regroup the layers: the layer dimension is then not checked."""
    scan_axis: int
    logits_via_embedding: bool
    fused_qkv: bool
    fused_mlp: bool
    qk_norm: bool
    moe_axes: tuple[tuple[str | None, ...], tuple[str | None, ...]]
    """Logical axes of the routed experts' (wi, wo) kernels."""
    attention_axes: bool
    """False when ``ici_context_autoregressive_parallelism`` > 1 replicates attention."""


def _int(effective: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = effective.get(key, default)
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _scales(scale: int) -> tuple[int, int, int, int]:
    """MaxText's split of global_parameter_scale into (emb, heads, mlp, layers) powers of 2."""
    log2 = max(int(math.log2(scale)), 0) if scale > 0 else 0
    base, rem = divmod(log2, 3)
    heads = base + int(rem > 0)
    return 2 ** (base + int(rem > 1)), 2**heads, 2**heads, 2**base


def model_dims(effective: Mapping[str, Any]) -> ModelDims:
    e = effective
    emb_s, head_s, mlp_s, layer_s = _scales(_int(e, "global_parameter_scale", 1))
    mlp = mlp_s * _int(e, "base_mlp_dim")
    moe_mlp = mlp_s * _int(e, "base_moe_mlp_dim", -1)
    if e.get("shard_exp_on_fsdp") is True:
        moe_axes: tuple[tuple[str | None, ...], ...] = (
            ("embed_moe", None, "mlp_moe"),
            ("embed_moe", "mlp_moe", None),
        )
    elif e.get("use_2d_fsdp_sharding") is True:
        moe_axes = (("embed_moe", "mlp_moe", None), ("embed_moe", "mlp_moe", None))
    else:
        moe_axes = (("exp", "embed_moe", "mlp_moe"), ("exp", "mlp_moe", "embed_moe"))
    return ModelDims(
        emb=emb_s * _int(e, "base_emb_dim"),
        vocab=_int(e, "vocab_size"),
        layers=layer_s * _int(e, "base_num_decoder_layers"),
        heads=head_s * _int(e, "base_num_query_heads"),
        kv_heads=head_s * _int(e, "base_num_kv_heads"),
        head_dim=_int(e, "head_dim", 128),
        mlp=mlp,
        moe_mlp=moe_mlp if moe_mlp > 0 else mlp,
        experts=_int(e, "num_experts", 1),
        shared_experts=_int(e, "shared_experts"),
        dense_layers=_int(e, "first_num_dense_layers"),
        moe_every=max(_int(e, "interleave_moe_layer_step", 1), 1),
        activations=max(len(e.get("mlp_activations") or ["silu"]), 1),
        mla=e.get("attention_type") == "mla",
        q_lora=_int(e, "q_lora_rank"),
        kv_lora=_int(e, "kv_lora_rank"),
        qk_nope=_int(e, "qk_nope_head_dim"),
        qk_rope=_int(e, "qk_rope_head_dim"),
        v_head=_int(e, "v_head_dim"),
        block=str(e.get("decoder_block", "")),
        deepseek=e.get("decoder_block") == "deepseek",
        pipeline=_int(e, "ici_pipeline_parallelism", 1) * _int(e, "dcn_pipeline_parallelism", 1)
        != 1,
        scan=e.get("scan_layers", True) is not False,
        scan_axis=_int(e, "param_scan_axis", 1),
        logits_via_embedding=e.get("logits_via_embedding") is True,
        fused_qkv=e.get("fused_qkv") is True,
        fused_mlp=e.get("fused_mlp") is True,
        qk_norm=e.get("use_qk_norm") is True and e.get("qk_norm_with_scale", True) is not False,
        moe_axes=(moe_axes[0], moe_axes[1]),
        attention_axes=_int(e, "ici_context_autoregressive_parallelism", 1) <= 1,
    )


def _p(path: str, shape: Sequence[int], axes: Sequence[str | None]) -> ParamSpec:
    return ParamSpec(path, tuple(shape), tuple(axes))


def _attention(d: ModelDims) -> list[ParamSpec]:
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


def _mlp(d: ModelDims, where: str, hidden: int) -> list[ParamSpec]:
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


def _moe(d: ModelDims) -> list[ParamSpec]:
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


def _norms(d: ModelDims) -> list[ParamSpec]:
    return [
        _p(f"{name}/scale", (d.emb,), ("norm",))
        for name in ("pre_self_attention_layer_norm", "post_self_attention_layer_norm")
    ]


def _stack(d: ModelDims, group: str, count: int, layer: list[ParamSpec]) -> list[ParamSpec]:
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


def model_params(d: ModelDims) -> tuple[ParamSpec, ...]:
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


# ---- logical axis rules -------------------------------------------------------------------


def _rules_of(value: Any) -> list[tuple[str, tuple[str, ...]]]:
    out: list[tuple[str, tuple[str, ...]]] = []
    for rule in value or []:
        if not isinstance(rule, list | tuple) or len(rule) != 2:
            continue
        name, target = rule
        axes = (target,) if isinstance(target, str) else tuple(str(a) for a in target or [])
        out.append((str(name), axes))
    return out


def _merge(
    base: list[tuple[str, tuple[str, ...]]], new: list[tuple[str, tuple[str, ...]]], override: bool
) -> list[tuple[str, tuple[str, ...]]]:
    """MaxText's merge: new rules replace every base rule of the same name (or all, on override)."""
    if override:
        return new
    if not new:
        return base
    names = {name for name, _ in new}
    return [r for r in base if r[0] not in names] + new


def logical_rules(
    configs: MaxTextConfigs, args: Mapping[str, str], effective: Mapping[str, Any]
) -> Rules:
    """base.yml's rules, merged with the model file's and then the command's, as MaxText does;
    a ``custom_mesh_and_rule`` file replaces them."""
    custom = mesh.custom_mesh_file(configs, effective)
    if custom:
        return tuple(_rules_of(custom.get("logical_axis_rules")))
    model = configs.model(args.get("model_name", str(configs.base.get("model_name", "default"))))
    rules = _rules_of(configs.base.get("logical_axis_rules"))
    rules = _merge(
        rules,
        _rules_of(model.get("logical_axis_rules")),
        model.get("override_logical_axis_rules") is True,
    )
    given = parse_value(args["logical_axis_rules"]) if "logical_axis_rules" in args else None
    override = str(args.get("override_logical_axis_rules", "")).lower() == "true"
    return tuple(_merge(rules, _rules_of(given), override))


def to_mesh_axes(axes: Sequence[str | None], rules: Rules) -> tuple[tuple[str, ...], ...]:
    """Flax's rule: for each rule in order, a dimension named by it that is still unassigned
    takes its mesh axes, unless another dimension already uses one of them."""
    result: list[tuple[str, ...] | None] = [None] * len(axes)
    used: set[str] = set()
    for name, targets in rules:
        if name not in axes:
            continue
        pos = axes.index(name)
        if result[pos] is None and not used.intersection(targets):
            result[pos] = targets
            used.update(targets)
    return tuple(r or () for r in result)


# ---- the check ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Indivisible:
    """A dimension its mesh axes do not divide."""

    param: ParamSpec
    dim: int
    axes: tuple[str, ...]
    ways: int

    def text(self, sizes: Mapping[str, int]) -> str:
        p = self.param
        used = " × ".join(f"{a}({sizes.get(a, 1)})" for a in self.axes if sizes.get(a, 1) > 1)
        return (
            f"{p.path}: array axis {self.dim} is partitioned {self.ways} times, but the dimension "
            f"size is {p.shape[self.dim]} (full shape: {p.shape}); {p.axes[self.dim]} is sharded "
            f"over {used} = {self.ways}"
        )


def indivisible(
    params: Sequence[ParamSpec], rules: Rules, sizes: Mapping[str, int]
) -> list[Indivisible]:
    """Every dimension whose mesh axes' product does not divide it, in JAX's tree order."""
    out = []
    for p in params:
        for dim, axes in enumerate(to_mesh_axes(p.axes, rules)):
            ways = math.prod(sizes.get(a, 1) for a in axes)
            if ways > 1 and p.shape[dim] % ways:
                out.append(Indivisible(p, dim, axes, ways))
    return out


def state_bytes_per_param(effective: Mapping[str, Any]) -> int:
    """Bytes a device holds per parameter: the weight and the optimizer's moments."""
    width = {"float32": 4, "bfloat16": 2, "float16": 2}
    weight = width.get(str(effective.get("weight_dtype", "float32")), 4)
    mu = width.get(str(effective.get("mu_dtype") or effective.get("weight_dtype")), weight)
    return weight + (0 if effective.get("opt_type") == "sgd" else mu + weight)


def state_gib_per_device(
    params: Sequence[ParamSpec], rules: Rules, sizes: Mapping[str, int], per_param: int
) -> float:
    """Parameters and optimizer state one device holds (each array split its own ways)."""
    return sum(p.size / _ways(p, rules, sizes) for p in params) * per_param / GIB


def _ways(param: ParamSpec, rules: Rules, sizes: Mapping[str, int]) -> int:
    """How many pieces the array is cut into (all dimensions together)."""
    axes = to_mesh_axes(param.axes, rules)
    return math.prod(sizes.get(a, 1) for dim in axes for a in dim)


@dataclass(frozen=True, slots=True)
class Setup:
    """One way to run: the slice, how many, and the command's arguments."""

    slice: Slice
    num_slices: int
    args: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a setup gives: the failures, the state per device, or why it is not a mesh."""

    failures: tuple[Indivisible, ...]
    gib: float
    sizes: Mapping[str, int]
    """Each mesh axis' total size (ICI × DCN)."""
    ici: Mapping[str, int]
    """Each mesh axis' ICI size."""
    experts: int = 1
    max_ways: int = 1
    """The most ways any parameter is split."""
    mesh_error: str = ""
    note: str = ""
    """What the check could not model for this configuration."""


def evaluate(setup: Setup, configs: MaxTextConfigs) -> Verdict:
    """Resolve the mesh (and its mapping) and check every parameter."""
    effective = mesh.with_custom_mesh(configs, configs.effective(setup.args))
    try:
        resolved = mesh.resolve_mesh(effective, setup.slice.jax_devices, setup.num_slices)
    except mesh.MeshError as e:
        return Verdict((), 0.0, {}, {}, mesh_error=e.message)
    ici = {a.name: a.ici for a in resolved.axes}
    if not mesh.mesh_target(setup.slice, effective).accepts(resolved.ici_shape):
        error = f"the ICI mesh {list(resolved.ici_shape)} does not map onto {setup.slice}"
        return Verdict((), 0.0, resolved.sizes, ici, mesh_error=error)
    dims = model_dims(effective)
    params = model_params(dims)
    rules = logical_rules(configs, setup.args, effective)
    gib = state_gib_per_device(params, rules, resolved.sizes, state_bytes_per_param(effective))
    failures = tuple(indivisible(params, rules, resolved.sizes))
    ways = max((_ways(p, rules, resolved.sizes) for p in params), default=1)
    return Verdict(failures, gib, resolved.sizes, ici, dims.experts, ways, note=_note(dims))


def _note(dims: ModelDims) -> str:
    notes = []
    if dims.block not in MODELLED_BLOCKS:
        notes.append(f"{dims.block} layers checked as MaxText's generic attention/MLP/MoE layers")
    if dims.pipeline:
        notes.append("pipeline stages regroup the layers: the layer dimension is not checked")
    return "; ".join(notes)


WAY_AXES = ("data", "tensor", "expert")
"""Axes a factor of an over-sharded axis can move to."""


@dataclass(frozen=True, slots=True)
class WayOut:
    """One change tried: the settings it changes and the verdict on the changed setup."""

    label: str
    setup: Setup
    changed: Mapping[str, str]
    verdict: Verdict

    @property
    def works(self) -> bool:
        return not self.verdict.failures and not self.verdict.mesh_error


def _moved(source: str, target: str, k: int, ici: Mapping[str, int]) -> dict[str, str]:
    src, dst = mesh.setting_key(source, "ici"), mesh.setting_key(target, "ici")
    if not src or not dst or target not in ici:
        return {}
    return {src: str(ici[source] // k), dst: str(ici[target] * k)}


def ways_out(setup: Setup, here: Verdict, configs: MaxTextConfigs) -> list[WayOut]:
    """Move a factor of an ICI axis sharding the first failure to data, tensor or expert, or
    split the slice over DCN; every candidate is checked again in full."""
    first = here.failures[0]
    sources = sorted(
        (a for a in first.axes if here.ici.get(a, 1) > 1), key=lambda a: -here.ici.get(a, 1)
    )
    targets = [t for t in WAY_AXES if t != "expert" or here.experts > 1]
    out = [w for t in targets if (w := _move_way(setup, here, sources, t, configs))]
    if sources:
        dcn = _dcn_way(setup, sources[0], here.ici[sources[0]], configs)
        out += [dcn] if dcn else []
    return out


def _move_way(
    setup: Setup, here: Verdict, sources: Sequence[str], target: str, configs: MaxTextConfigs
) -> WayOut | None:
    """The smallest factor moved from one source axis to ``target`` that passes (else the
    first attempt that fixes the failing dimension, to say why it is not enough)."""
    first = here.failures[0]
    attempts: list[WayOut] = []
    for source in sources:
        for k in _divisors(here.ici[source]):
            changed = _moved(source, target, k, here.ici)
            if not changed:
                return None
            trial = Setup(setup.slice, setup.num_slices, {**setup.args, **changed})
            way = WayOut(f"{target} parallelism", trial, changed, evaluate(trial, configs))
            if way.works:
                return way
            if first.param.shape[first.dim] % (first.ways // k) == 0:
                attempts.append(way)
                break
    attempts.sort(key=lambda w: bool(w.verdict.mesh_error))  # a sharding reason says more
    return attempts[0] if attempts else None


def _divisors(n: int) -> list[int]:
    return [k for k in range(2, n + 1) if n % k == 0]


def _dcn_way(setup: Setup, source: str, size: int, configs: MaxTextConfigs) -> WayOut | None:
    """Smaller slices joined over DCN (data parallel across slices), first that passes."""
    acc = setup.slice.accelerator
    for n in _divisors(setup.slice.xpk_number):
        try:
            smaller = Slice.parse(f"{acc.xpk_prefix}-{setup.slice.xpk_number // n}")
        except TpuTrainerError:
            continue
        if smaller.jax_devices * n != setup.slice.jax_devices or size % n:
            continue
        key = mesh.setting_key(source, "ici") or ""
        changed = {key: str(size // n), "dcn_data_parallelism": str(n * setup.num_slices)}
        trial = Setup(smaller, n * setup.num_slices, {**setup.args, **changed})
        way = WayOut("multi-slice over DCN", trial, changed, evaluate(trial, configs))
        if way.works:
            return way
    return None


_EFFECT = {
    "data": "gradients all-reduced over the data axis",
    "tensor": "more collectives per layer",
    "expert": "experts spread over the expert axis",
}


def _cost(now: float, then: float, usable: float | None) -> str:
    room = f" of {usable:g} GiB usable" if usable else ""
    if abs(then - now) < 0.05:
        return f"parameters + optimizer state unchanged at {then:.1f} GiB per device"
    return (
        f"parameters + optimizer state {now:.1f} → {then:.1f} GiB per device "
        f"({then - now:+.1f} GiB{room})"
    )


def way_text(way: WayOut, now_gib: float, usable: float | None) -> str:
    """One way out as the user reads it: the words to paste and what it costs."""
    words = " ".join(f"{k}={v}" for k, v in way.changed.items())
    cost = _cost(now_gib, way.verdict.gib, usable)
    if way.label.startswith("multi-slice"):
        return (
            f"{way.setup.num_slices} × {way.setup.slice.device_type} (--num-slices "
            f"{way.setup.num_slices}) with `{words}` ({cost}; gradients are reduced over DCN)"
        )
    return f"`{words}` ({way.label}: {cost}; {_EFFECT[way.label.split()[0]]})"


def _why_not(way: WayOut) -> str:
    words = " ".join(f"{k}={v}" for k, v in way.changed.items())
    verdict = way.verdict
    reason = verdict.mesh_error or verdict.failures[0].text(verdict.sizes)
    return f"`{words}` ({way.label}) still fails: {reason}"


def _first_text(verdict: Verdict) -> str:
    first = verdict.failures[0]
    others = sorted({f.param.path for f in verdict.failures[1:]} - {first.param.path})
    more = ""
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        more = f"; {len(others)} more: {shown}"
    note = f" ({verdict.note})" if verdict.note else ""
    return (
        f"{first.text(verdict.sizes)}: JAX will raise IndivisibleError before compiling{more}{note}"
    )


def check_sharding(
    request: MaxTextRequest, configs: MaxTextConfigs, effective: Mapping[str, Any]
) -> list[Finding]:
    """FAIL on the first parameter JAX would refuse to shard, with re-checked ways out."""
    del effective  # evaluated again for each setup, with any custom mesh file applied
    setup = Setup(request.slice, request.num_slices, request.args)
    try:
        verdict = evaluate(setup, configs)
    except TpuTrainerError as e:
        return [Finding("sharding", Level.WARN, f"not checked: {e.message}", e.fix)]
    if verdict.mesh_error:
        reason = "the mesh settings do not resolve or map (see the mesh checks)"
        return [Finding("sharding", Level.WARN, f"not checked: {reason}")]
    if not verdict.failures:
        message = (
            "every parameter dimension divides over its mesh axes (arrays split up to "
            f"{verdict.max_ways} ways); parameters + optimizer state ≈ {verdict.gib:.1f} GiB "
            "per device" + (f" ({verdict.note})" if verdict.note else "")
        )
        return [Finding("sharding", Level.PASS, message)]
    usable = request.slice.accelerator.usable_hbm_gib_per_device
    ways = ways_out(setup, verdict, configs)
    good = [way_text(w, verdict.gib, usable) for w in ways if w.works]
    bad = [_why_not(w) for w in ways if not w.works]
    fix = ("ways out, each checked again: " + "; ".join(good)) if good else "no single change found"
    if bad:
        fix += ". Not a way out: " + "; ".join(bad)
    return [Finding("sharding", Level.FAIL, _first_text(verdict), fix)]
