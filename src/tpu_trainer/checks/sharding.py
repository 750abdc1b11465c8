"""The sharding check: FAIL on the first parameter JAX would refuse to shard, with ways out
(a factor moved to another mesh axis, or the slice split over DCN), each checked again in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tpu_trainer.checks.mesh_resolve import setting_key
from tpu_trainer.checks.sharding_rules import (
    GIB,
    Indivisible,
    Rules,
    Setup,
    Verdict,
    evaluate,
    indivisible,
    logical_rules,
    state_bytes_per_param,
    state_gib_per_device,
    to_mesh_axes,
)
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.mesh_axes import MeshAxisName
from tpu_trainer.frameworks.maxtext.model_shape import ModelShape
from tpu_trainer.frameworks.maxtext.params import ParamSpec, model_params
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

__all__ = [
    "GIB",
    "Indivisible",
    "ParamSpec",
    "Rules",
    "Setup",
    "Verdict",
    "WayOut",
    "check_sharding",
    "evaluate",
    "indivisible",
    "logical_rules",
    "model_dims",
    "model_params",
    "state_bytes_per_param",
    "state_gib_per_device",
    "to_mesh_axes",
    "way_text",
    "ways_out",
]

model_dims = ModelShape.from_config
"""The model's shape read from an effective configuration."""


WAY_AXES = (MeshAxisName.DATA, MeshAxisName.TENSOR, MeshAxisName.EXPERT)
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
    src, dst = setting_key(source, "ici"), setting_key(target, "ici")
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
    targets = [t for t in WAY_AXES if t is not MeshAxisName.EXPERT or here.experts > 1]
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
        key = setting_key(source, "ici") or ""
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
