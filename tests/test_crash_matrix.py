"""The crash matrix: train on the fake cloud, stop it with a signal at a stage (a slow node
pool create included), run gc, and check that nothing the run made is left and nothing that
existed before was touched. The whole sweep is bench/crash_matrix.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from conftest import RECIPES, RECIPES_ROOT, cli_env
from tpu_trainer.fakecloud.crash import Case, Rehearsal, initial, run_case

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "crash.yaml"
RECIPE = RECIPES["tee-upload"]  # tpu7x-4x4x4: 16 hosts, a workload policy

CASES = [
    Case("SIGKILL", "provisioning"),
    Case("SIGTERM", "provisioning"),
    Case("Ctrl-C", "provisioning"),
    Case("Ctrl-C x2", "provisioning"),
    Case("SIGKILL", "started"),
    Case("SIGTERM", "follow"),
]
EXIT = {"SIGKILL": -9, "SIGTERM": 143, "Ctrl-C": 130, "Ctrl-C x2": 130}


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.signal_name.replace(' ', '')}-{c.stage}")
def test_a_signal_at_a_stage_then_gc_leaves_nothing_and_touches_nothing_else(
    tmp_path: Path, case: Case
) -> None:
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    reh = Rehearsal(tmp_path, recipe, SCENARIO, cli_env(tmp_path))
    out = run_case(reh, case, initial(SCENARIO))
    # a string, not a tuple: pytest cuts the middle out of a long repr, and with it the cause
    assert out.clean, (
        f"left {out.left}, touched {out.touched}, stuck {out.stuck_runs}, gc exit {out.gc_code}, "
        f"traceback {out.traceback}\n{out.output[-6000:]}"
    )
    assert out.train_code == EXIT[case.signal_name], out.output[-3000:]
    if case.signal_name != "SIGKILL":
        assert "nothing to clean up" in out.output, "the run should have cleaned up itself"
    if case.signal_name == "Ctrl-C x2" and out.signals_sent == 2:
        # The second Ctrl-C is sent once the teardown has said it started; a teardown that
        # ended first (a busy machine) leaves nothing to ignore: test_teardown covers that.
        assert "Ctrl-C ignored: teardown is deleting what the run made" in out.output
        assert "kill -KILL" in out.output
    if case.stage == "provisioning" and case.signal_name != "SIGKILL":
        assert "is still being created (GKE cannot cancel that)" in out.output
