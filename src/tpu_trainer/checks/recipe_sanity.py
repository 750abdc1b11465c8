"""Recipe sanity: precision arguments that match the folder, topology-specific arguments not
mixed across recipes, and a submit zone that matches the reservations'.

(The folder topology vs the script's device type, and ``tpu7x-N`` read as TensorCores, are
found while planning: they are among the plan's findings.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.config.model import Reservation
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.plan.plan import ArgChange, Finding, Level, Plan

FP8_ONLY = re.compile(
    r"^(use_qwix_quantization|weight_quantization_calibration_method|"
    r"act_quantization_calibration_method|bwd_quantization_calibration_method)$"
)
"""Arguments seed 000 lists as belonging to the fp8 recipes (with ``quantization=fp8_full``).
(The ``wi_tile_*``/``wo_tile_*`` kernel tiles appear in bf16 MoE recipes too.)"""


def _is_fp8(quantization: str | None) -> bool:
    return "fp8" in (quantization or "").lower()


def check_precision(precision: Precision, args: Mapping[str, str]) -> list[Finding]:
    """The folder's precision against the quantization arguments."""
    quantization = args.get("quantization")
    extras = sorted(k for k in args if FP8_ONLY.match(k))
    if precision is Precision.FP8 and not _is_fp8(quantization):
        return [
            Finding(
                "recipe-precision",
                Level.FAIL,
                f"the folder says fp8 but quantization is {quantization or 'not set'}: "
                "the run would train in bf16 and be compared as fp8",
                fix="copy the fp8 recipe's arguments whole (quantization=fp8_full and its "
                "tile/calibration settings), or use the bf16 folder",
            )
        ]
    if precision is Precision.BF16 and _is_fp8(quantization):
        return [
            Finding(
                "recipe-precision",
                Level.FAIL,
                f"the folder says bf16 but quantization={quantization}",
                fix="drop quantization (and the fp8 tile/calibration settings), or use the fp8 "
                "folder",
            )
        ]
    if precision is Precision.BF16 and extras:
        return [
            Finding(
                "recipe-precision",
                Level.WARN,
                f"fp8-only arguments in a bf16 recipe (no effect without quantization): "
                f"{', '.join(extras[:6])}",
                fix="the argument sets were mixed: copy the bf16 recipe's arguments whole",
            )
        ]
    return [
        Finding(
            "recipe-precision",
            Level.PASS,
            f"{precision.value} arguments match the folder"
            + (f" (quantization={quantization})" if quantization else ""),
        )
    ]


@dataclass(frozen=True, slots=True)
class Sibling:
    """Another recipe of the same model and precision, on another topology."""

    name: str
    args: Mapping[str, str]


def topology_specific(siblings: Sequence[Sibling], own: Mapping[str, str]) -> set[str]:
    """Keys whose value differs between the recipes of one model and precision."""
    keys: set[str] = set()
    every = [own, *(s.args for s in siblings)]
    for key in set().union(*every):
        if len({a.get(key) for a in every}) > 1:
            keys.add(key)
    return keys


def check_mixing(
    own_name: str,
    recipe_args: Mapping[str, str],
    changes: Sequence[ArgChange],
    siblings: Sequence[Sibling],
) -> list[Finding]:
    """``--set`` values that turn a topology-specific argument into another recipe's value."""
    specific = topology_specific(siblings, recipe_args)
    mixed: list[str] = []
    for change in changes:
        if change.why != "--set" or change.key not in specific:
            continue
        donors = [s.name for s in siblings if s.args.get(change.key) == change.after]
        if donors:
            mixed.append(
                f"{change.key}={change.after} (the {donors[0]} recipe's; this one has "
                f"{recipe_args.get(change.key, 'no value')})"
            )
    if mixed:
        return [
            Finding(
                "recipe-args-topology",
                Level.WARN,
                "arguments differ by topology and were set from another recipe: "
                + "; ".join(mixed),
                fix=f"keep the {own_name} recipe's values, or use the other recipe whole "
                "(seed 000: the arguments of different topologies must not be mixed)",
            )
        ]
    if siblings:
        return [
            Finding(
                "recipe-args-topology",
                Level.PASS,
                f"{len(specific)} arguments differ between this recipe and "
                f"{len(siblings)} other topologies; none was set from another",
            )
        ]
    return []


def check_zone(zone: str, reservations: Sequence[Reservation]) -> list[Finding]:
    """The submit zone against the zones of reservations the configuration names."""
    zones = sorted({r.zone for r in reservations if r.zone})
    if not zone or not zones or any(r.zone is None for r in reservations):
        return []  # a reservation of unknown zone may be in the submit zone
    if zone in zones:
        return [Finding("recipe-zone", Level.PASS, f"submit zone {zone} has a reservation")]
    return [
        Finding(
            "recipe-zone",
            Level.WARN,
            f"the submit zone is {zone} but the reservations are in {', '.join(zones)}: "
            "xpk would look for the slice in the wrong zone",
            fix="`train` submits to the zone of the node pool it gets; for the written submit "
            f"script pass --zone {zones[0]}",
        )
    ]


def _siblings(plan: Plan) -> list[Sibling]:
    from tpu_trainer.recipes.read import read_recipe_file
    from tpu_trainer.recipes.reader import parse_recipe
    from tpu_trainer.recipes.resolve import recipes_under

    own = plan.folder
    if own is None:
        return []
    out: list[Sibling] = []
    for ref in recipes_under(plan.model_dir):
        other = ref.parsed
        if (
            other is None
            or ref.script.resolve() == Path(plan.recipe_script).resolve()
            or other.precision is not own.precision
            or other.topology == own.topology
            or other.seq != own.seq
        ):
            continue
        try:
            recipe = parse_recipe(read_recipe_file(ref), str(ref.script))
        except TpuTrainerError:
            continue
        args = dict(w.render().partition("=")[::2] for w in recipe.entry.args)
        out.append(Sibling(other.name, args))
    return out


def check_recipe(plan: Plan) -> list[Finding]:
    """Every recipe-sanity finding for ``plan`` (reads sibling recipes of the model folder)."""
    recipe_args = dict(w.render().partition("=")[::2] for w in plan.recipe.entry.args)
    args = dict(plan.expand(t).partition("=")[::2] for t in plan.program_arg_texts)
    findings = check_precision(plan.precision, args)
    own_name = plan.folder.name if plan.folder else plan.model
    findings += check_mixing(own_name, recipe_args, plan.arg_changes, _siblings(plan))
    findings += check_zone(plan.value_of("ZONE"), plan.config.reservations)
    return findings
