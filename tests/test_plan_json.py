"""The plan JSON contract (docs/plan-json.md): its keys and types are pinned here."""

from __future__ import annotations

import json

import pytest

from conftest import FIXTURES, GOLDEN, RECIPES, at_recipes_root, check_golden, plan_for
from tpu_trainer.app.plan_json import SCHEMA, plan_json

pytestmark = pytest.mark.unit

TOP_LEVEL: dict[str, type | tuple[type, ...]] = {
    "schema": str,
    "model": str,
    "recipe": str,
    "framework": str,
    "precision": str,
    "slice": dict,
    "workload_name": str,
    "config": dict,
    "variables": list,
    "xla_flags": list,
    "maxtext_args": list,
    "recipe_maxtext_args": list,
    "arg_changes": list,
    "entry": dict,
    "xpk_flags": dict,
    "files": list,
    "commands": list,
    "findings": list,
}
SLICE: dict[str, type | tuple[type, ...]] = {
    "family": str,
    "accelerator": str,
    "device_type": str,
    "device_type_number": str,
    "topology": str,
    "num_slices": int,
    "chips": int,
    "tensorcores": int,
    "jax_devices": int,
    "hosts": int,
    "chips_per_host": int,
    "machine_type": str,
    "gke_accelerator": str,
    "hbm_gb_per_chip": int,
    "peak_tflops_per_chip": float,
    "kueue_flavor": str,
    "kueue_local_queue": str,
    "kueue_quota": int,
    "configmap_entry": dict,
    "workload_policy": (str, type(None)),
}


@pytest.mark.parametrize("kind", sorted(RECIPES))
def test_plan_json_has_the_documented_keys_and_types(kind: str) -> None:
    data = plan_json(plan_for(RECIPES[kind]))
    assert data["schema"] == SCHEMA
    assert set(data) == set(TOP_LEVEL)
    for key, kind_ in TOP_LEVEL.items():
        assert isinstance(data[key], kind_), key
    assert set(data["slice"]) == set(SLICE)
    for key, kind_ in SLICE.items():
        assert isinstance(data["slice"][key], kind_), key
    assert all(isinstance(f, str) for f in data["xla_flags"])
    assert all(isinstance(a, str) and "=" in a for a in data["maxtext_args"])
    assert all(set(f) == {"name", "status", "message", "fix"} for f in data["findings"])
    assert all(f["status"] in ("pass", "warn", "fail") for f in data["findings"])
    json.dumps(data)


def test_plan_json_storage_recipe_numbers() -> None:
    data = plan_json(plan_for(RECIPES["storage"]))
    s = data["slice"]
    assert (s["chips"], s["jax_devices"], s["hosts"]) == (256, 512, 64)
    assert s["workload_policy"] == "tpu7x-512-4x8x8-placement-policy"
    assert data["xpk_flags"]["--tpu-type"] == "tpu7x-4x8x8"
    assert data["xpk_flags"]["--storage"] == "dataset-gcsfuse-volume"
    assert data["xpk_flags"]["--zone"] == "us-central1-ai1a"
    assert data["maxtext_args"][-3:] == [
        "profiler=xplane",
        "profiler_steps=3",
        "skip_first_n_steps_for_profiler=5",
    ]
    assert data["commands"][2][:3] == ["xpk", "workload", "create"]


def test_plan_json_profiler_override_replaces_in_place_and_is_reported() -> None:
    data = plan_json(plan_for(RECIPES["tee-upload"]))
    assert data["maxtext_args"].count("profiler_steps=3") == 1
    assert "profiler_steps=2" not in data["maxtext_args"]
    changes = {c["key"]: c for c in data["arg_changes"]}
    assert changes["profiler_steps"]["before"] == "2"
    assert changes["base_output_directory"]["why"] == "placeholder filled"


def test_plan_json_golden(update_golden: bool) -> None:
    with at_recipes_root():
        data = plan_json(plan_for(RECIPES["classic"]))
    text = json.dumps(data, indent=2, sort_keys=True) + "\n"
    text = text.replace(str(FIXTURES), "<fixtures>")
    check_golden(GOLDEN / "classic" / "plan.json", text, update_golden)


def test_plan_refuses_a_variable_value_with_spaces() -> None:
    from tpu_trainer.errors import InputError

    with pytest.raises(InputError) as info:
        plan_for(RECIPES["storage"], variables=(("DATASET_MOUNT", "/tmp/a b"),))
    assert "may not hold spaces" in info.value.message
