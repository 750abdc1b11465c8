"""Recipe sanity: precision arguments, topology-specific arguments, the submit zone."""

from __future__ import annotations

import pytest

from conftest import RECIPES, plan_for
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.checks.recipe_sanity import (
    Sibling,
    check_mixing,
    check_precision,
    check_recipe,
    check_zone,
)
from tpu_trainer.config.model import Reservation
from tpu_trainer.plan.plan import ArgChange, Level

pytestmark = pytest.mark.unit

FP8 = {
    "quantization": "fp8_full",
    "use_qwix_quantization": "True",
    "act_quantization_calibration_method": "fixed,-224,224",
}


def test_fp8_folder_without_fp8_quantization_fails() -> None:
    findings = check_precision(Precision.FP8, {"model_name": "deepseek3-671b"})
    assert findings[0].status is Level.FAIL
    assert "fp8_full" in findings[0].fix


def test_bf16_folder_with_fp8_arguments() -> None:
    assert check_precision(Precision.BF16, FP8)[0].status is Level.FAIL
    mixed = check_precision(Precision.BF16, {k: v for k, v in FP8.items() if k != "quantization"})
    assert mixed[0].status is Level.WARN
    assert "use_qwix_quantization" in mixed[0].message
    assert check_precision(Precision.FP8, FP8)[0].status is Level.PASS


def test_a_topology_specific_value_from_another_recipe_is_flagged() -> None:
    # Seed 000: fp8 4x8x8 uses ici_fsdp_transpose_parallelism=2, 4x4x8 uses 1.
    own = {"ici_fsdp_transpose_parallelism": "1", "use_max_logit_estimate": "-1", "steps": "30"}
    other = Sibling(
        "4k-fp8-tpu7x-4x8x8",
        {"ici_fsdp_transpose_parallelism": "2", "use_max_logit_estimate": "22", "steps": "30"},
    )
    change = ArgChange("ici_fsdp_transpose_parallelism", "1", "2", "--set")
    findings = check_mixing("4k-fp8-tpu7x-4x4x8", own, [change], [other])
    assert findings[0].status is Level.WARN
    assert "4k-fp8-tpu7x-4x8x8" in findings[0].message
    steps = ArgChange("steps", "30", "5", "--set")  # not topology-specific
    assert check_mixing("own", own, [steps], [other])[0].status is Level.PASS
    assert check_mixing("own", own, [change], []) == []


def test_submit_zone_against_reservation_zones() -> None:
    known = [Reservation("a", "us-central1-c"), Reservation("b", "us-east5-a")]
    assert check_zone("us-central1-c", known)[0].status is Level.PASS
    wrong = check_zone("us-central1-ai1a", known)
    assert wrong[0].status is Level.WARN
    assert "--zone us-central1-c" in wrong[0].fix
    assert check_zone("us-central1-ai1a", [*known, Reservation("c")]) == []


def test_fixture_recipes_are_sane() -> None:
    fp8 = check_recipe(plan_for(RECIPES["tee-upload"]))
    assert fp8[0].name == "recipe-precision"
    assert fp8[0].status is Level.PASS
    assert "fp8_full" in fp8[0].message
    changed = check_recipe(plan_for(RECIPES["tee-upload"], overrides=(("quantization", ""),)))
    assert changed[0].status is Level.FAIL
