"""The plan as JSON: a documented, versioned contract (see docs/plan-json.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tpu_trainer.config.model import KEY_NAMES
from tpu_trainer.plan.plan import Finding, Plan
from tpu_trainer.plan.scripts import submitted_argv

SCHEMA = "tpu-trainer.plan/1"


def slice_json(plan: Plan) -> dict[str, Any]:
    s = plan.slice
    key, value = s.configmap_entry(plan.num_slices)
    return {
        "family": s.family.value,
        "accelerator": s.accelerator.name,
        "device_type": s.device_type,
        "device_type_number": s.device_type_number,
        "topology": s.topology_name,
        "num_slices": plan.num_slices,
        "chips": s.chips,
        "tensorcores": s.tensorcores,
        "jax_devices": s.jax_devices,
        "hosts": s.hosts,
        "chips_per_host": s.chips_per_host,
        "machine_type": plan.config.machine_type or s.machine_type,
        "gke_accelerator": s.accelerator.gke_accelerator,
        "hbm_gb_per_chip": s.hbm_gb_per_chip,
        "peak_tflops_per_chip": s.peak_tflops_per_chip(plan.precision),
        "kueue_flavor": s.kueue_flavor(plan.num_slices),
        "kueue_quota": s.kueue_quota(plan.num_slices),
        "kueue_local_queue": plan.local_queue,
        "configmap_entry": {"key": key, "value": value},
        "workload_policy": s.workload_policy,
    }


def plan_findings(plan: Plan) -> tuple[Finding, ...]:
    """The one list of findings a plan shows, as a table or as JSON, and stores with a run:
    the plan's own, recipe sanity and every fast check (nothing downloaded)."""
    from tpu_trainer.checks.run import fast_findings

    return fast_findings(plan, fetch=False).findings


def plan_json(plan: Plan, findings: Sequence[Finding] | None = None) -> dict[str, Any]:
    """The plan as JSON; ``findings`` default to :func:`plan_findings`."""
    shown = plan_findings(plan) if findings is None else findings
    config = plan.config
    argv = submitted_argv(plan)
    flags: dict[str, str | bool] = {}
    for item in argv[3:]:
        name, eq, value = item.partition("=")
        flags[name] = value if eq else True
    return {
        "schema": SCHEMA,
        "model": plan.model,
        "recipe": str(plan.recipe_script),
        "framework": plan.recipe.framework.value,
        "precision": plan.precision.value,
        "slice": slice_json(plan),
        "workload_name": plan.workload_name,
        "config": {
            key: {
                "value": _json_value(getattr(config, key)),
                "source": str(config.sources[key]) if key in config.sources else None,
            }
            for key in KEY_NAMES
        },
        "variables": [
            {"name": v.name, "template": v.template, "value": v.value, "source": v.source}
            for v in plan.variables
        ],
        "xla_flags": list(plan.xla_flags),
        "maxtext_args": list(plan.program_arg_texts),
        "recipe_maxtext_args": list(plan.recipe.program_args),
        "arg_changes": [
            {"key": c.key, "before": c.before, "after": c.after, "why": c.why}
            for c in plan.arg_changes
        ],
        "entry": {
            "interpreter": plan.recipe.entry.interpreter,
            "module": plan.recipe.entry.module,
            "base_config": plan.recipe.entry.base_config,
        },
        "xpk_flags": flags,
        "files": [str(p) for p in plan.files],
        "commands": [
            ["bash", str(plan.files[0])],
            ["bash", str(plan.files[1])],
            argv,
        ],
        "findings": [
            {"name": f.name, "status": f.status.value, "message": f.message, "fix": f.fix}
            for f in shown
        ],
    }


def _json_value(value: object) -> Any:
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {k: _json_value(getattr(value, k)) for k in value.__dataclass_fields__}
    return str(value)
