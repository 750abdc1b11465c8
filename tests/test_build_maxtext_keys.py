"""tools/build_maxtext_keys.py: key tables from base.yml texts, written as a chain of differences
the package's loader reads back whole, and renames found between versions; the runtime's verdict
for an image of another version."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from tpu_trainer.checks.pyconfig_runtime import for_version
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.frameworks.maxtext.versions import load_versions, maxtext_versions
from tpu_trainer.plan.plan import Finding, Level
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

TOOL = Path(__file__).resolve().parents[1] / "tools" / "build_maxtext_keys.py"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_maxtext_keys", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_maxtext_keys"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_tables_round_trip_through_the_chain_and_renames_are_found() -> None:
    tool = _tool()
    keys = tool._keys("steps: 10\nrate: 1e-5\nname: 'none'\nfsdp_shard_on_exp: false\nl: [1]\n")
    assert keys == {
        "steps": "int",
        "rate": "str",
        "name": "none",
        "fsdp_shard_on_exp": "bool",
        "l": "list",
    }
    old = tool.Table("old", "git", "a" * 40, "2025-01-01", "c/base.yml", keys, ["m1"])
    newer = dict(keys, shard_exp_on_fsdp="bool", steps="float")
    del newer["fsdp_shard_on_exp"]
    ref = tool.Table("0.2.5", "pypi", "0.2.5", "2026-10-02", "c/base.yml", newer, ["m1", "m2"])
    doc = tool.document([ref, old], None)
    assert doc["versions"]["old"]["against"] == "0.2.5"
    assert doc["renames"]["fsdp_shard_on_exp"] == {
        "to": "shard_exp_on_fsdp",
        "after": "old",
        "by": "0.2.5",
    }
    loaded = load_versions(yaml.safe_dump(doc))
    assert dict(loaded.tables["old"].keys) == keys
    assert loaded.tables["old"].models == {"m1"}
    assert loaded.renames["fsdp_shard_on_exp"].new == "shard_exp_on_fsdp"


def test_the_runtime_rejecting_a_key_the_image_has_is_a_warning() -> None:
    request = MaxTextRequest.from_args(
        ["model_name=llama3.1-8b", "fsdp_shard_on_exp=True", "foo_bar_baz=1"],
        Slice.parse("tpu7x-8"),
    )
    table = maxtext_versions().tables["98a3d4c"]
    rejects = [
        Finding(
            "maxtext-config (MaxText pyconfig)", Level.FAIL, f"ValueError: '{key}' not in 'a'", "x"
        )
        for key in ("fsdp_shard_on_exp", "foo_bar_baz")
    ]
    judged = for_version(rejects, request, table)
    assert [f.status for f in judged] == [Level.WARN, Level.FAIL]
    assert "which MaxText 98a3d4c (2026-01-02) (your image) has" in judged[0].message
