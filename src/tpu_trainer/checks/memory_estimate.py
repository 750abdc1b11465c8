"""The memory-fit estimate as a finding: the analytic estimate of HBM per device
(``memory_model``) against the device's HBM, with fixes (``memory_fixes``) when it is tight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.checks.memory_fixes import memory_fixes, numbered
from tpu_trainer.checks.memory_model import (
    CALIBRATION,
    GIB,
    OPTIMIZER_OFFLOAD_SAVING,
    SAVED_ON_DEVICE,
    MemoryEstimate,
    ParamCount,
    calibrate,
    count_parameters,
    estimate_memory,
    gib,
    raw_estimate,
    usable_hbm,
)
from tpu_trainer.frameworks.maxtext.memory_tables import CalibrationPoint
from tpu_trainer.frameworks.maxtext.model_shape import ModelShape
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.plan import Finding, Level

__all__ = [
    "CALIBRATION",
    "CHECK_NAME",
    "GIB",
    "OPTIMIZER_OFFLOAD_SAVING",
    "SAVED_ON_DEVICE",
    "CalibrationPoint",
    "MemoryEstimate",
    "ModelShape",
    "ParamCount",
    "calibrate",
    "check_estimate",
    "count_parameters",
    "describe",
    "estimate_memory",
    "gib",
    "memory_fixes",
    "numbered",
    "raw_estimate",
    "usable_hbm",
]

CHECK_NAME = "memory-fit (estimate)"


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
