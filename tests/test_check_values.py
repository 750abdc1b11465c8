"""Values of the wrong type are findings naming the key and its type, never a traceback."""

from __future__ import annotations

import pytest

from conftest import RECIPES, at_recipes_root, plan_for
from tpu_trainer.checks.run import fast_findings
from tpu_trainer.plan.plan import Level

pytestmark = pytest.mark.unit


def _findings(value: str) -> dict[str, tuple[Level, str, str]]:
    key, _, text = value.partition("=")
    plan = plan_for(RECIPES["classic"], overrides=((key, text),))
    with at_recipes_root():
        report = fast_findings(plan, fetch=False)
    return {f.name: (f.status, f.message, f.fix) for f in report.findings}


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("steps=5 6", "steps takes an integer"),
        ("per_device_batch_size=abc", "per_device_batch_size takes a number"),
        ("max_target_length=1.5", "max_target_length takes an integer"),
    ],
)
def test_a_value_of_the_wrong_type_fails_naming_the_key_and_type(value: str, kind: str) -> None:
    found = _findings(value)
    status, message, fix = found["maxtext-config types"]
    assert status is Level.FAIL
    assert value.partition("=")[0] in message
    assert kind in fix
    assert found["mesh, sharding, memory, data"][0] is Level.WARN


def test_steps_in_exponent_form_is_the_integer_maxtext_reads() -> None:
    found = _findings("steps=1e3")
    assert found["maxtext-config types"][0] is Level.PASS
    assert found["data-sufficiency"][0] is Level.PASS
    assert found["mesh-ici"][0] is Level.PASS


def test_a_huge_wrong_value_is_shortened_in_the_finding() -> None:
    status, message, _ = _findings("steps=" + "9 " * 20_000)["maxtext-config types"]
    assert status is Level.FAIL
    assert len(message) < 400
