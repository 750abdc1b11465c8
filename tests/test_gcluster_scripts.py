"""The submit script of a Cluster Toolkit recipe: golden file, shellcheck, and bash handing a
stand-in gcluster exactly the planned ``gcluster job submit`` line, which gcluster's flag model
accepts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, GOLDEN, NOW, at_recipes_root, check_golden, write_tool
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.infra.gcluster_flags import check_gcluster_argv
from tpu_trainer.plan.naming import GCLUSTER_NAME_MAX
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.plan.scripts import render_submit, submitted_argv
from tpu_trainer.recipes.resolve import Filters

pytestmark = pytest.mark.unit

RECIPE = "training/ironwood/gemmoe-26b/4k-bf16-tpu7x-4x4x4"
_RECORDER = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["RECORD_FILE"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
"""


def _plan() -> Plan:
    with at_recipes_root():
        options = PlanOptions(user="test_user", now=NOW)
        return plan_request(Request(RECIPE, Filters(submitter="gcluster"), CONFIG), options)


def test_gcluster_submit_script_matches_golden(update_golden: bool) -> None:
    text = render_submit(_plan())
    check_golden(GOLDEN / "gcluster" / "submit.sh", text, update_golden)
    assert "gcluster job submit \\" in text
    assert "xpk" not in text.replace("submitter xpk", "")
    assert f"(( ${{#WORKLOAD_NAME}} > {GCLUSTER_NAME_MAX} ))" in text


def test_gcluster_submit_script_passes_shellcheck(tmp_path: Path) -> None:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    assert Path(found).exists(), "shellcheck is missing: run `bash scripts/test.sh`"
    script = tmp_path / "submit.sh"
    script.write_text(render_submit(_plan()))
    proc = subprocess.run(
        [found, "--shell=bash", str(script)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _run(plan: Plan, tmp_path: Path, env_extra: dict[str, str]) -> tuple[int, list[list[str]], str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write_tool(bin_dir, "gcluster", _RECORDER)
    write_tool(bin_dir, "date", "#!/bin/sh\necho 20261122-0600\n")
    script = tmp_path / "submit.sh"
    script.write_text(render_submit(plan))
    record = tmp_path / "calls.jsonl"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "RECORD_FILE": str(record), **env_extra}
    proc = subprocess.run(
        ["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    calls = [json.loads(x) for x in record.read_text().splitlines()] if record.exists() else []
    return proc.returncode, calls, proc.stderr


def test_bash_hands_gcluster_the_planned_line_and_gcluster_would_take_it(tmp_path: Path) -> None:
    plan = _plan()
    code, calls, err = _run(plan, tmp_path, {})
    assert code == 0, err
    assert calls == [submitted_argv(plan)]
    verdict = check_gcluster_argv(calls[0])
    assert verdict.ok, verdict.problems
    assert verdict.values["compute-type"] == ("tpu7x",)
    assert verdict.values["location"] == ("us-central1-ai1a",)
    assert verdict.assumed == ("skip-prereqs", "gke-namespace")


def test_a_name_too_long_for_gcluster_stops_the_script(tmp_path: Path) -> None:
    code, calls, err = _run(_plan(), tmp_path, {"WORKLOAD_NAME": "a" * (GCLUSTER_NAME_MAX + 1)})
    assert code == 2
    assert calls == []
    assert "not a valid gcluster workload name" in err
    assert f"at most {GCLUSTER_NAME_MAX} characters" in err
