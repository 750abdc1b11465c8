"""One list of findings: the human plan, ``plan --json``, and the plan stored with a run."""

from __future__ import annotations

import json
import os

import pytest

from conftest import CONFIG, RECIPES, RECIPES_ROOT, at_recipes_root, plan_for
from test_cli import cli
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.checks.run import fast_findings
from tpu_trainer.infra.tool_env import cache_dir

ENV = {
    **os.environ,
    "HOME": "/nonexistent-home",
    "TPU_TRAINER_CONFIG": "",
    "TPU_TRAINER_CACHE": str(cache_dir()),
    "COLUMNS": "250",
}


def _cli(*args: str) -> str:
    proc = cli(*args, env=ENV)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.e2e
def test_plan_json_and_the_plan_table_show_the_same_findings() -> None:
    folder = str(RECIPES_ROOT / RECIPES["classic"])
    data = json.loads(_cli("plan", folder, "--config", str(CONFIG), "--json"))
    names = [f["name"] for f in data["findings"]]
    with at_recipes_root():
        expected = fast_findings(plan_for(RECIPES["classic"]), fetch=False).findings
    assert names == [f.name for f in expected]
    assert len(names) > 4  # the plan's own finding plus recipe sanity and the fast checks
    table = _cli("plan", folder, "--config", str(CONFIG))
    rows = [line for line in table.splitlines() if line.startswith("│ ")]
    shown = [
        r.split("│")[1].strip() for r in rows if r.split("│")[2].strip() in {"pass", "warn", "fail"}
    ]
    assert shown == names


@pytest.mark.unit
def test_the_stored_plan_carries_the_same_findings() -> None:
    plan = plan_for(RECIPES["classic"])
    with at_recipes_root():
        stored = plan_json(plan)  # what a run writes to the store
        assert [f["name"] for f in stored["findings"]] == [
            f.name for f in fast_findings(plan, fetch=False).findings
        ]
    # The classic recipe turns checkpointing off: only that is worth a warning.
    assert {f["name"] for f in stored["findings"] if f["status"] != "pass"} == {"resumability"}
