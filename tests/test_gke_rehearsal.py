"""The whole GKE pipeline against the simulated cloud (the real gcloud against the emulated
GKE and Compute APIs, the real kubectl and the real xpk 1.16 against the emulated Kubernetes
API): failover, xpk cluster adapt failing, crash clean-up."""

from __future__ import annotations

import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import GOLDEN, RECIPES, RECIPES_ROOT, cli_env, run_commands
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.simcloud.rehearsal import recorded_problems

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
RECIPE = RECIPES["tee-upload"]  # tpu7x-4x4x4: 16 hosts, multi-host, needs a workload policy


def _env(tmp_path: Path) -> dict[str, str]:
    """The test's environment, with a temporary folder of its own (where xpk would leave its
    files if the tool did not give it one it removes)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    return {**cli_env(tmp_path), "TMPDIR": str(tmp)}


def _recipe(tmp_path: Path) -> Path:
    target = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, target)
    return target


def _tool(
    env: dict[str, str], *args: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _train(
    tmp_path: Path, scenario: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    env = _env(tmp_path)
    proc = _tool(
        env,
        "train",
        str(_recipe(tmp_path)),
        "--rehearse",
        str(SCENARIOS / scenario),
        "--poll",
        "0.05",
        "--wait-timeout",
        "120",
    )
    state = read_state(tmp_path / "rehearsal" / "state.json")
    return proc, state


def _store(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / "store" / "runs.db")


def _pool_names(state: dict[str, Any]) -> list[str]:
    return sorted(state["node_pools"])


def test_rehearsal_fails_over_to_the_third_reservation_and_submits_in_its_zone(
    tmp_path: Path,
) -> None:
    proc, state = _train(tmp_path, "failover.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    db = _store(tmp_path)
    attempts = db.execute(
        "SELECT reservation, zone, outcome FROM capacity_attempts ORDER BY id"
    ).fetchall()
    assert [(r, o) for r, _, o in attempts] == [
        ("res-exhausted", "exhausted"),
        ("res-degraded", "skip: reservation DEGRADED (maintenance in progress)"),
        ("res-ok", "created"),
    ]
    assert "res-exhausted" in proc.stderr and "res-degraded" in proc.stderr
    assert "xpk cluster adapt configured Kueue" in proc.stderr  # the real adapt, once
    commands = run_commands(tmp_path)
    (adapt,) = [c for c in commands if c[0] == "xpk"]
    assert adapt[:3] == ["xpk", "cluster", "adapt"] and "--reservation=res-exhausted" in adapt
    (submit,) = [c for c in commands if c[0] == "bash"]
    script = Path(submit[1]).read_text(encoding="utf-8")
    assert 'export ZONE="us-central1-c"' in script and "xpk workload create" in script
    # xpk itself ran (its gcloud calls went through the rehearsal's gcloud to the emulators)
    calls = recorded_calls(tmp_path / "rehearsal" / "state.json")
    assert any(c[:4] == ["gcloud", "monitoring", "dashboards", "list"] for c in calls)
    (run_id,) = db.execute("SELECT id FROM runs").fetchone()
    gcloud = [" ".join(c[1:5]) for c in commands if c[0] == "gcloud"]
    # Each gcloud call costs about half a second of start-up; the tool makes 14 and no more:
    # auth list, projects describe (the number xpk is given, asked beside the cluster),
    # clusters describe, node-pools list (the pools before the run), one reservations list for
    # all three, get-credentials (once, before the first kubectl), the workload policy described and
    # created once, node-pools create twice (exhausted, then made: its JSON answer says RUNNING,
    # no describe after it), describe after the exhausted create; teardown: delete, one list
    # (the pool gone, the policy's users and the final check), policy delete. No xpk wait or
    # delete: the workload's end is its JobSet's condition, and kubectl deletes it.
    assert len(gcloud) <= 14, gcloud
    assert gcloud.count("container clusters get-credentials demo-cluster") == 1
    assert gcloud.count("projects describe demo-project --format=value(projectNumber)") == 1
    assert gcloud.count("beta compute reservations list") == 1
    assert gcloud.count("compute resource-policies describe tpu7x-128-4x4x4-placement-policy") == 1
    assert gcloud.count("container node-pools describe tpt-" + run_id[:8] + "-tpu7x-128") == 1
    assert gcloud.count("container node-pools list --cluster=demo-cluster") == 2
    kubectl = [c for c in commands if c[0] == "kubectl"]
    context = "--context=gke_demo-project_us-central1_demo-cluster"
    assert kubectl and all(c[1] == context for c in kubectl)  # the context get-credentials made
    assert next(c for c in kubectl if c[2] == "delete")[2:4] == ["delete", "jobset"]
    zone, status = db.execute("SELECT zone, status FROM runs").fetchone()
    assert (zone, status) == ("us-central1-c", "succeeded")
    assert _pool_names(state) == ["default-pool"]
    live = db.execute(
        "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting')"
    ).fetchall()
    assert live == []
    assert recorded_problems(tmp_path / "rehearsal") == []
    # both xpk commands (adapt, and workload create in the script) had their files removed
    left = sorted(p.name for p in (tmp_path / "tmp").iterdir())
    assert not [n for n in left if n.startswith(("ConfigMap", "tpu-trainer-xpk-"))], left


def test_a_failing_xpk_cluster_adapt_is_xpks_own_and_gcloud_makes_the_pool_with_the_exact_flags(
    tmp_path: Path, update_golden: bool
) -> None:
    """Kueue lacks the slice, so xpk cluster adapt runs, for real: the API server refuses the
    account its PriorityClasses (RBAC's 403), xpk applies the rest and fails. The run goes on:
    gcloud beta makes the pool, and the run succeeds."""
    proc, _ = _train(tmp_path, "adapt_forbidden.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (adapt,) = [c for c in run_commands(tmp_path) if c[:3] == ["xpk", "cluster", "adapt"]]
    assert "--skip-validation" in adapt and any(a.startswith("--project-number=") for a in adapt)
    row = (
        _store(tmp_path)
        .execute(
            "SELECT exit_code, stdout_tail || stderr_tail FROM commands WHERE argv LIKE '%adapt%'"
        )
        .fetchone()
    )
    assert row[0] == 1  # xpk's own exit code, and its own words:
    assert "XPK failed, error code 1" in row[1] and "is forbidden" in row[1]
    assert "xpk cluster adapt failed (exit 1" in proc.stderr
    calls = recorded_calls(tmp_path / "rehearsal" / "state.json")
    creates = [c for c in calls if c[:5] == ["gcloud", "beta", "container", "node-pools", "create"]]
    assert len(creates) == 1
    run_id = _store(tmp_path).execute("SELECT id FROM runs").fetchone()[0]
    text = " \\\n  ".join(shlex.quote(a) for a in creates[0]).replace(run_id[:8], "<run>") + "\n"
    from conftest import check_golden

    check_golden(GOLDEN / "rehearsal_gcloud_create_after_adapt.txt", text, update_golden)
    policy = [
        c
        for c in calls
        if c[:6] == ["gcloud", "beta", "compute", "resource-policies", "create", "workload-policy"]
    ]
    assert policy and "tpu7x-128-4x4x4-placement-policy" in policy[0]
    assert recorded_problems(tmp_path / "rehearsal") == []


def test_rehearsal_all_reservations_exhausted_lists_each_attempt_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    proc, state = _train(tmp_path, "all_exhausted.yaml")
    assert proc.returncode != 0
    assert "res-a" in proc.stderr and "res-b" in proc.stderr
    assert "no reservation could provide" in proc.stderr
    assert "next:" in proc.stderr
    assert _pool_names(state) == ["default-pool"]
    status = _store(tmp_path).execute("SELECT status FROM runs").fetchone()[0]
    assert status == "failed"


def _wait_for_stage(
    tmp_path: Path, stage: str, proc: subprocess.Popen[str], limit: float = 300
) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(
                f"the run ended before stage {stage}: {proc.stderr.read() if proc.stderr else ''}"
            )
        db_path = tmp_path / "store" / "runs.db"
        if db_path.exists():
            try:
                row = (
                    sqlite3.connect(db_path)
                    .execute("SELECT 1 FROM stages WHERE name = ?", (stage,))
                    .fetchone()
                )
            except sqlite3.OperationalError:
                row = None
            if row:
                return
        time.sleep(0.05)
    raise AssertionError(f"stage {stage} never started")


@pytest.mark.parametrize("stage", ["provision", "configure", "submit", "follow"])
def test_killed_at_each_stage_then_gc_leaves_nothing_behind(tmp_path: Path, stage: str) -> None:
    env = _env(tmp_path)
    scenario = str(SCENARIOS / "slow.yaml")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            "train",
            str(_recipe(tmp_path)),
            "--rehearse",
            scenario,
            "--poll",
            "0.05",
            "--wait-timeout",
            "600",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for_stage(tmp_path, stage, proc)
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    gc = _tool(env, "gc", "--rehearse", scenario)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    state = read_state(tmp_path / "rehearsal" / "state.json")
    assert _pool_names(state) == ["default-pool"]
    assert not state.get("workloads")
    assert not [name for name in state["resource_policies"] if "placement-policy" in name]
    live = (
        _store(tmp_path)
        .execute(
            "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting')"
        )
        .fetchall()
    )
    assert live == []


def test_a_failing_preflight_check_stops_the_run_before_any_capacity_is_asked(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    args = ["train", str(_recipe(tmp_path)), "--rehearse", str(SCENARIOS / "failover.yaml")]
    proc = _tool(env, *args, "--set", "weight_decay=0.1", "--poll", "0.05")
    assert proc.returncode == 1
    assert "pre-flight check(s) failed (maxtext-config keys); nothing was created" in proc.stderr
    assert "adam_weight_decay=0.1" in proc.stdout
    assert "--skip-checks" in proc.stderr
    state_file = tmp_path / "rehearsal" / "state.json"
    calls = recorded_calls(state_file) if state_file.exists() else []
    assert not [c for c in calls if "create" in c], calls
    assert not (tmp_path / "store" / "runs.db").exists() or (
        _store(tmp_path).execute("SELECT count(*) FROM runs").fetchone()[0] == 0
    )
