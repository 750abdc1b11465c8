"""Every sharded parameter dimension must divide evenly over its mesh axes: the verdict.

MaxText names each parameter dimension with a logical axis (``kv_lora``, ``embed``, ``exp``...);
``logical_axis_rules`` maps those onto mesh axes, first free rule wins, as Flax does. A
dimension sharded over mesh axes whose sizes multiply to more than it (or to a non-divisor)
makes JAX raise ``IndivisibleError`` before compiling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_trainer.checks import mesh_mapping, mesh_resolve
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs, parse_value
from tpu_trainer.frameworks.maxtext.model_shape import ModelShape
from tpu_trainer.frameworks.maxtext.params import MODELLED_BLOCKS, ParamSpec, model_params
from tpu_trainer.plan.slices import Slice

Rules = tuple[tuple[str, tuple[str, ...]], ...]
GIB = 1024**3


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
    custom = mesh_resolve.custom_mesh_file(configs, effective)
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
    effective = mesh_resolve.with_custom_mesh(configs, configs.effective(setup.args))
    try:
        resolved = mesh_resolve.resolve_mesh(effective, setup.slice.jax_devices, setup.num_slices)
    except mesh_resolve.MeshError as e:
        return Verdict((), 0.0, {}, {}, mesh_error=e.message)
    ici = {a.name: a.ici for a in resolved.axes}
    if not mesh_mapping.mesh_target(setup.slice, effective).accepts(resolved.ici_shape):
        error = f"the ICI mesh {list(resolved.ici_shape)} does not map onto {setup.slice}"
        return Verdict((), 0.0, resolved.sizes, ici, mesh_error=error)
    dims = ModelShape.from_config(effective)
    params = model_params(dims)
    rules = logical_rules(configs, setup.args, effective)
    gib = state_gib_per_device(params, rules, resolved.sizes, state_bytes_per_param(effective))
    failures = tuple(indivisible(params, rules, resolved.sizes))
    ways = max((_ways(p, rules, resolved.sizes) for p in params), default=1)
    return Verdict(failures, gib, resolved.sizes, ici, dims.experts, ways, note=_note(dims))


def _note(dims: ModelShape) -> str:
    notes = []
    if dims.block not in MODELLED_BLOCKS:
        notes.append(f"{dims.block} layers checked as MaxText's generic attention/MLP/MoE layers")
    if dims.pipeline:
        notes.append("pipeline stages regroup the layers: the layer dimension is not checked")
    return "; ".join(notes)
