"""A Cluster Toolkit recipe rehearsed end to end through gcluster (the stand-in of the simulated
cloud, which checks every line with the model of gcluster's flags): capacity, the submit
script's ``gcluster job submit``, the follow through the JobSet's pods and logs, the README
report, ``gcluster job cancel`` in teardown, and nothing left behind; after a crash, ``gc``
cancels the gcluster job the store recorded."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import RECIPES_ROOT, cli_env
from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.crash import Case, Rehearsal, initial, run_case
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.infra.gcluster_flags import check_gcluster_command
from tpu_trainer.simcloud.rehearsal import recorded_problems

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
RECIPE = "training/ironwood/gemmoe-26b/4k-bf16-tpu7x-4x4x4"  # xpk/ and cluster_toolkit/
POLICY = "tpu7x-128-4x4x4-placement-policy"


def _gcluster_calls(state: Path) -> list[list[str]]:
    calls = [c for c in recorded_calls(state) if c[0] == "gcluster"]
    for call in calls:
        verdict = check_gcluster_command(call)
        assert verdict.ok, (call, verdict.problems)
    return calls


def _copy(tmp_path: Path) -> Path:
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    return recipe


def _rehearse(tmp_path: Path, recipe: Path) -> str:
    """``train --submitter gcluster --rehearse`` of ``recipe``, which must succeed: its output."""
    argv = ["train", str(recipe), "--submitter", "gcluster"]
    argv += ["--rehearse", str(SCENARIOS / "failover.yaml"), "--poll", "0.05"]
    proc = subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *argv, "--wait-timeout", "120"],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_cluster_toolkit_recipe_rehearses_end_to_end_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    out = _rehearse(tmp_path, _copy(tmp_path))
    assert "(container workload-container-1)" in out  # gcluster's JobSet, followed by kubectl
    assert "completed (AllJobsCompleted)" in out
    state_path = tmp_path / "rehearsal" / "state.json"
    calls = _gcluster_calls(state_path)
    assert [c[:3] for c in calls] == [["gcluster", "job", "submit"], ["gcluster", "job", "cancel"]]
    assert "--location=us-central1-c" in calls[0]  # the node pool's zone, found by failover
    # a Cluster Toolkit user has no xpk: the tool configures Kueue itself, without xpk cluster
    # adapt, before gcluster (which would stop at its LocalQueue prompt) submits
    assert not [c for c in recorded_calls(state_path) if c[0] == "xpk"]
    assert "configure" in out and "repairing: LocalQueue multislice-queue" in out
    assert "repairing: ConfigMap" not in out  # xpk's resources configmap: gcluster reads none
    state = read_state(state_path)
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["workloads"] == {}
    assert POLICY not in state["resource_policies"]
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    run_id, status = db.execute("SELECT id, status FROM runs").fetchone()
    assert status == "succeeded"
    live = db.execute(
        "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting','maybe')"
    ).fetchall()
    assert live == []
    (detail,) = db.execute("SELECT detail FROM resources WHERE kind = 'workload'").fetchone()
    assert '"submitter": "gcluster"' in detail
    assert (tmp_path / "store" / "runs" / run_id / "README.md").is_file()
    assert db.execute("SELECT COUNT(*) FROM steps WHERE run_id = ?", (run_id,)).fetchone()[0] > 0
    assert recorded_problems(tmp_path / "rehearsal") == []


def test_gc_after_a_crash_while_following_cancels_the_gcluster_job(tmp_path: Path) -> None:
    folder = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE / "cluster_toolkit", folder / "cluster_toolkit")
    scenario = SCENARIOS / "crash.yaml"
    reh = Rehearsal(tmp_path, folder, scenario, cli_env(tmp_path))
    out = run_case(reh, Case("SIGKILL", "follow"), initial(scenario))
    assert out.clean, (
        f"left {out.left}, touched {out.touched}, stuck {out.stuck_runs}, gc exit {out.gc_code}"
        f"\n{out.output[-4000:]}"
    )
    assert out.train_code == -9, out.output[-3000:]
    calls = _gcluster_calls(reh.state)
    assert [c[:3] for c in calls][-1] == ["gcluster", "job", "cancel"]
    assert read_state(reh.state)["workloads"] == {}


def test_the_recipes_queue_is_the_local_queue_made_and_submitted_to(tmp_path: Path) -> None:
    recipe = _copy(tmp_path)
    script = recipe / "cluster_toolkit" / "run_recipe.sh"
    text = script.read_text()
    script.write_text(text.replace("--queue multislice-queue", "--queue team-a-queue"))
    out = _rehearse(tmp_path, recipe)
    assert "repairing: LocalQueue team-a-queue does not exist" in out
    assert "multislice-queue" not in out
    state_path = tmp_path / "rehearsal" / "state.json"
    submit = _gcluster_calls(state_path)[0]
    assert "--queue=team-a-queue" in submit
    made = k8s.get(read_state(state_path), k8s.KINDS[2], "team-a-queue")
    assert made is not None and made["spec"]["clusterQueue"] == "cluster-queue"
