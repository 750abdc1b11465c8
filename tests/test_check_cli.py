"""`tpu-trainer check`: the seeds' pitfalls caught before submission, and the JSON contract."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import CONFIG, RECIPES, RECIPES_ROOT
from tpu_trainer.infra.tool_env import cache_dir

ENV = {
    **os.environ,
    "TPU_TRAINER_CONFIG": str(CONFIG),
    "TPU_TRAINER_CACHE": str(cache_dir()),
    "COLUMNS": "200",
}


def check(*args: str) -> tuple[int, list[dict[str, Any]]]:
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", "check", *args, "--json"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=300,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)["checks"]


def seed_001_recipe(tmp_path: Path) -> Path:
    """The classic fixture moved to seed 001's slice, tpu7x-64 (2x4x4: 32 chips, 64 devices)."""
    source = RECIPES_ROOT / RECIPES["classic"]
    target = tmp_path / "almodel-8b" / "4k-bf16-tpu7x-2x4x4" / "xpk"
    shutil.copytree(source, target)
    script = target / "run_recipe.sh"
    script.write_text(
        script.read_text().replace("--device-type=tpu7x-2x2x1", "--device-type=tpu7x-2x4x4")
    )
    return target


def by_name(checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in checks}


@pytest.mark.e2e
def test_json_contract_and_a_clean_recipe() -> None:
    code, checks = check("--fast", str(RECIPES_ROOT / RECIPES["classic"]))
    assert code == 0
    for c in checks:
        assert set(c) == {"name", "status", "message", "fix"}
        assert c["status"] in ("pass", "warn", "fail")
    names = by_name(checks)
    assert names["mesh-mapping"]["status"] == "pass"
    for name in ("maxtext-config keys", "sharding", "memory-fit (estimate)", "data-sufficiency"):
        assert name in names, name
    assert not [c for c in checks if c["status"] == "fail"]


@pytest.mark.e2e
def test_seed_001_mesh_failure_is_caught_with_its_replacement(tmp_path: Path) -> None:
    recipe = seed_001_recipe(tmp_path)
    bad = ("ici_fsdp_parallelism=8", "ici_tensor_parallelism=4", "ici_context_parallelism=2")
    code, checks = check("--fast", str(recipe), *(a for s in bad for a in ("--set", s)))
    assert code == 1
    mapping = by_name(checks)["mesh-mapping"]
    assert mapping["status"] == "fail"
    assert (
        "Failed to find assignment for logical_axis_index 5 of size 2 with remaining "
        "assignable mesh [0, 4, 4, 0]" in mapping["message"]
    )
    assert "ici_fsdp_parallelism=16" in mapping["fix"]
    good = ("ici_fsdp_parallelism=16", "ici_tensor_parallelism=4", "ici_context_parallelism=1")
    code, checks = check("--fast", str(recipe), *(a for s in good for a in ("--set", s)))
    assert by_name(checks)["mesh-mapping"]["status"] == "pass"


@pytest.mark.e2e
def test_seed_001_optimizer_key_is_caught() -> None:
    code, checks = check(
        "--fast", str(RECIPES_ROOT / RECIPES["classic"]), "--set", "weight_decay=0.1"
    )
    assert code == 1
    keys = by_name(checks)["maxtext-config keys"]
    assert keys["status"] == "fail"
    assert "adam_weight_decay" in keys["fix"]
    assert "muon_weight_decay" in keys["fix"]


@pytest.mark.runtime
def test_runtime_checks_ask_maxtext_and_jax() -> None:
    code, checks = check(str(RECIPES_ROOT / RECIPES["classic"]), "--set", "foo_bar_baz=1")
    names = by_name(checks)
    assert code == 1
    assert names["maxtext-config (MaxText pyconfig)"]["status"] == "fail"
    assert "foo_bar_baz" in names["maxtext-config (MaxText pyconfig)"]["message"]
    assert names["mesh-mapping (JAX)"]["status"] == "pass"
