"""ERROR pools, 409s, orphan pools, dry runs and preflight, on the fake cloud."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import RECIPES, RECIPES_ROOT, cli_env, run_commands
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_with_config
from tpu_trainer.app.services import kube_access_of, recording_services
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke.provision import CapacityError
from tpu_trainer.launchers.gke.run import GkeRun
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.simcloud.rehearsal import prepare
from tpu_trainer.store.db import RunStatus, RunStore

pytestmark = pytest.mark.e2e

RECIPE = RECIPES["tee-upload"]  # tpu7x-4x4x4, 16 hosts
POOL = {"machine_type": "tpu7x-standard-4t", "node_count": 16, "zone": "us-central1-ai1a"}
KUEUE_READY = {  # as xpk cluster adapt leaves it for tpu7x-4x4x4: adapt is not run again
    "resource_flavors": ["1xtpu7x-128"],
    "cluster_queue": {"flavors": {"1xtpu7x-128": 64}},
    "configmap": {"tpu7x-128": "16"},
}


def _scenario(tmp_path: Path, **extra: Any) -> Path:
    data: dict[str, Any] = {
        "project": "demo-project",
        "region": "us-central1",
        "cluster": {"name": "demo-cluster"},
        "node_pools": [
            {
                "name": "default-pool",
                "machine_type": "e2-standard-8",
                "node_count": 3,
                "zone": "us-central1-ai1a",
            }
        ],
        "reservations": [
            {"name": "res-a", "zone": "us-central1-ai1a", "host_count": 64},
            {"name": "res-b", "zone": "us-central1-b", "host_count": 64},
        ],
        "kueue": KUEUE_READY,
    }
    for key, value in extra.items():
        if value is None:
            data.pop(key, None)
        elif key == "node_pools":
            data["node_pools"] += value
        elif isinstance(value, dict):
            data[key] = {**data.get(key, {}), **value}
        else:
            data[key] = value
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    return cli_env(tmp_path)


def _run_in_process(tmp_path: Path, scenario: Path, run_id: str) -> tuple[GkeRun, RunStore]:
    env = _env(tmp_path)
    config, fake_env, _ = prepare(scenario, None, env, fresh=True)
    store = RunStore(tmp_path / "store" / "runs.db")
    svc = recording_services(
        store, SilentDisplay(), config.project_id, fake_env, kube_access=kube_access_of(config)
    )
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    opts = PlanOptions(user="test_user", now=datetime(2026, 11, 22, 6, 0))

    plan = plan_with_config(Request(str(recipe)), config, opts)
    return GkeRun(
        svc, config, plan, "test", poll_seconds=0.02, wait_timeout_s=60, run_id=run_id
    ), store


def _state(tmp_path: Path) -> dict[str, Any]:
    return read_state(tmp_path / "rehearsal" / "state.json")


def test_a_leftover_error_pool_of_the_run_is_deleted_and_recreated(tmp_path: Path) -> None:
    scenario = _scenario(
        tmp_path, node_pools=[{"name": "tpt-deadbeef-tpu7x-128", "status": "ERROR", **POOL}]
    )
    run, _ = _run_in_process(tmp_path, scenario, "deadbeef")
    outcome = run.start()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    calls = recorded_calls(tmp_path / "rehearsal" / "state.json")
    verbs = [c[2:5] for c in calls if "node-pools" in c]
    creates = [c for c in calls if "create" in c and "node-pools" in c]
    deletes = [c for c in calls if "delete" in c and "node-pools" in c]
    assert len(creates) == 2, verbs
    assert any("tpt-deadbeef-tpu7x-128" in c for c in deletes)
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]


def test_pools_that_go_to_error_are_deleted_and_the_next_reservation_tried(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, behaviours={"error_pools": True})
    run, store = _run_in_process(tmp_path, scenario, "0e0e0e0e")
    with pytest.raises(CapacityError) as info:
        run.start()
    assert "res-a" in info.value.message and "res-b" in info.value.message
    outcomes = [a["outcome"] for a in store.attempts("0e0e0e0e")]
    assert outcomes == ["failed", "failed", "failed", "failed"]
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]
    row = store.run("0e0e0e0e")
    assert row is not None and row.status is RunStatus.FAILED


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _dead_run(tmp_path: Path, run_id: str) -> None:
    store = RunStore(tmp_path / "store" / "runs.db")
    store.create_run(
        run_id,
        model="m",
        request="r",
        launcher=LaunchPath.XPK,
        device_type="tpu7x-4x4x4",
        precision="bf16",
        project="demo-project",
        cluster="demo-cluster",
        region="us-central1",
        zone="us-central1-ai1a",
        plan_json=None,
    )
    store.update_run(run_id, pid=2**22 + 4321, host=socket.gethostname())
    store.close()


def test_gc_deletes_orphan_pools_of_dead_runs_and_leaves_others(tmp_path: Path) -> None:
    scenario = _scenario(
        tmp_path,
        node_pools=[
            {"name": "tpt-0badf00d-tpu7x-128", **POOL},
            {"name": "tpt-12345678-tpu7x-128", **POOL},
        ],
    )
    env = _env(tmp_path)
    prepare(scenario, None, env, fresh=True)
    _dead_run(tmp_path, "0badf00d")
    proc = _cli(env, "gc", "--rehearse", str(scenario))
    assert proc.returncode == 0, proc.stderr
    assert "deleted orphan node pool tpt-0badf00d-tpu7x-128" in proc.stdout
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool", "tpt-12345678-tpu7x-128"]


def test_cleanup_dry_run_prints_and_changes_nothing(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, node_pools=[{"name": "tpt-0badf00d-tpu7x-128", **POOL}])
    env = _env(tmp_path)
    prepare(scenario, None, env, fresh=True)
    _dead_run(tmp_path, "0badf00d")
    store = RunStore(tmp_path / "store" / "runs.db")
    rid = store.resource_intent(
        "0badf00d",
        kind="nodepool",
        name="tpt-0badf00d-tpu7x-128",
        project="demo-project",
        location="us-central1",
        cluster="demo-cluster",
    )
    store.close()
    proc = _cli(env, "cleanup", "0badf00d", "--dry-run", "--rehearse", str(scenario))
    assert proc.returncode == 0, proc.stderr
    assert "would run: gcloud container node-pools delete tpt-0badf00d-tpu7x-128" in proc.stdout
    assert "tpt-0badf00d-tpu7x-128" in _state(tmp_path)["node_pools"]
    assert rid


def test_preflight_reports_then_fixes_kueue_and_policy(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, kueue=None)
    env = _env(tmp_path)
    prepare(scenario, None, env, fresh=True)
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    first = _cli(env, "preflight", str(recipe), "--rehearse", str(scenario), "--json")
    assert first.returncode == 1
    import json

    status = {c["name"]: c["status"] for c in json.loads(first.stdout)["checks"]}
    assert status["placement-policy"] == "fail" and status["kueue-resourceflavor"] == "fail"
    assert status["node-pool"] == "fail"
    fixed = _cli(env, "preflight", str(recipe), "--rehearse", str(scenario), "--fix", "--json")
    assert "fixed: placement-policy" in fixed.stderr
    assert fixed.returncode == 1  # the node pool still fails
    again = _cli(env, "preflight", str(recipe), "--rehearse", str(scenario), "--json")
    status = {c["name"]: c["status"] for c in json.loads(again.stdout)["checks"]}
    for name in (
        "placement-policy",
        "kueue-resourceflavor",
        "kueue-clusterqueue",
        "kueue-localqueue",
        "xpk-configmap",
    ):
        assert status[name] == "pass", (name, again.stdout)
    assert status["node-pool"] == "fail"


OOM_LOG = (
    "I1122 04:27:31.120000 139872 max_utils.py:273] Num_devices: 128\n"
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out "
    "of memory on HBM, the total memory required for HLO temporaries (151.15G) exceeds available "
    "HBM (94.74G)\n"
)


def test_a_fatal_error_in_the_log_ends_the_run_at_once_and_tears_down(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, workloads={"log": OOM_LOG, "hang": True})
    run, store = _run_in_process(tmp_path, scenario, "00c0ffee")
    outcome = run.start()
    assert outcome.status is RunStatus.FAILED
    row = store.run("00c0ffee")
    assert row is not None and row.error is not None
    assert "151.15G" in row.error and "94.74G" in row.error
    assert (tmp_path / "store" / "runs" / "00c0ffee" / "worker0.log").read_text().count("\n") == 2
    state = _state(tmp_path)
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["workloads"] == {}
    # stopped at once: the JobSet's ending was never waited for
    assert not [c for c in run_commands(tmp_path) if c[:3] == ["kubectl", "get", "jobset"]]


def test_a_fatal_error_on_another_host_stops_the_follow(tmp_path: Path) -> None:
    scenario = _scenario(
        tmp_path,
        workloads={
            "hang": True,
            "other_hosts_log": "StopIteration\n"
            "Traceback: the data ran out after 7 steps (StopIteration)\n",
        },
    )
    run, store = _run_in_process(tmp_path, scenario, "0ddba11a")
    outcome = run.start()
    assert outcome.status is RunStatus.FAILED
    row = store.run("0ddba11a")
    assert row is not None and row.error is not None
    assert "StopIteration" in row.error
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]


def test_secrets_in_a_workload_log_never_reach_the_saved_log_or_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3"
    monkeypatch.setenv("HF_TOKEN", secret)
    log = f"I1122 04:27:31.120000 139872 train.py:98] logging in with token {secret}\n"
    scenario = _scenario(tmp_path, workloads={"log": log})
    run, _ = _run_in_process(tmp_path, scenario, "5ec12e75")
    run.start()
    saved = (tmp_path / "store" / "runs" / "5ec12e75" / "worker0.log").read_text()
    assert "logging in with token ***" in saved
    assert secret not in saved
    assert secret not in (tmp_path / "store" / "runs.db").read_bytes().decode("latin-1")
