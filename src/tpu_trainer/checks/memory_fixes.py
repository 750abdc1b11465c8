"""What to change when a training step does not fit a device's HBM: a smaller batch, a remat
policy that keeps less, host offload, more chips; each with how far it goes (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_trainer.checks.memory_model import OPTIMIZER_OFFLOAD_SAVING, MemoryEstimate, gib
from tpu_trainer.plan.slices import Slice, valid_topologies

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
