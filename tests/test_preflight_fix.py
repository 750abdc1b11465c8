"""``tpu-trainer preflight`` on the fake cloud: --num-slices, --fix that checks again and tells
the truth, and --fix --dry-run that only shows what it would run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import RECIPES, RECIPES_ROOT, cli_env
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.simcloud.rehearsal import prepare

pytestmark = pytest.mark.e2e

RECIPE = RECIPES["tee-upload"]  # tpu7x-4x4x4, 16 hosts
SCENARIO = {
    "project": "demo-project",
    "region": "us-central1",
    "cluster": {"name": "demo-cluster", "multi_networking": False},
    "node_pools": [
        {
            "name": "default-pool",
            "machine_type": "e2-standard-8",
            "node_count": 3,
            "zone": "us-central1-ai1a",
        }
    ],
    "reservations": [{"name": "res-a", "zone": "us-central1-ai1a", "host_count": 64}],
}


def _setup(tmp_path: Path, **changes: Any) -> tuple[dict[str, str], Path, Path]:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({**SCENARIO, **changes}), encoding="utf-8")
    env = cli_env(tmp_path)
    prepare(scenario, None, env, fresh=True)
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    return env, scenario, recipe


def _preflight(
    env: dict[str, str], recipe: Path, scenario: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            "preflight",
            str(recipe),
            "--rehearse",
            str(scenario),
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )


def _statuses(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in json.loads(proc.stdout)["checks"]}


def _changes(tmp_path: Path) -> list[list[str]]:
    """Calls that change the cloud (everything but reads)."""
    from tpu_trainer.infra.runner import is_read_only

    return [c for c in recorded_calls(tmp_path / "rehearsal" / "state.json") if not is_read_only(c)]


def test_num_slices_adds_the_multislice_checks_and_one_pool_per_slice(tmp_path: Path) -> None:
    env, scenario, recipe = _setup(tmp_path)
    proc = _preflight(env, recipe, scenario, "--num-slices", "2", "--json")
    assert proc.returncode == 1, proc.stderr
    checks = _statuses(proc)
    assert checks["multislice-multi-networking"]["status"] == "fail"
    assert "--enable-multi-networking" in checks["multislice-multi-networking"]["fix"]
    assert checks["multislice-dataplane-v2"]["status"] == "pass"
    assert "2xtpu7x-128" in checks["kueue-resourceflavor"]["fix"]
    assert "0 of 2 RUNNING node pools" in checks["node-pool"]["message"]


def test_fix_checks_again_reports_what_still_fails_and_exits_1(tmp_path: Path) -> None:
    env, scenario, recipe = _setup(tmp_path, cluster={"name": "demo-cluster"})
    proc = _preflight(env, recipe, scenario, "--fix", "--json")
    assert proc.returncode == 1, proc.stderr
    checks = _statuses(proc)  # stdout stays JSON; progress goes to stderr
    for name in ("placement-policy", "kueue-resourceflavor", "kueue-clusterqueue", "xpk-configmap"):
        assert checks[name]["status"] == "pass", (name, proc.stdout)
        assert f"fixed: {name}" in proc.stderr
    pool = checks["node-pool"]
    assert pool["status"] == "fail"
    assert "not fixed automatically (node-pool)" in proc.stderr
    assert "fixed: node-pool" not in proc.stderr
    assert "xpk cluster adapt" not in pool["fix"]
    assert f"tpu-trainer train {recipe}" in pool["fix"]
    assert "gcloud beta container node-pools create demo-cluster-np-0" in pool["fix"]
    assert "--reservation=res-a" in pool["fix"]
    state = read_state(tmp_path / "rehearsal" / "state.json")
    assert "tpu7x-128-4x4x4-placement-policy" in state["resource_policies"]


def test_fix_dry_run_prints_the_commands_and_manifests_and_changes_nothing(
    tmp_path: Path,
) -> None:
    env, scenario, recipe = _setup(tmp_path, cluster={"name": "demo-cluster"})
    before = read_state(tmp_path / "rehearsal" / "state.json")
    proc = _preflight(env, recipe, scenario, "--fix", "--dry-run")
    assert proc.returncode == 1, proc.stderr
    out = proc.stdout
    assert "fixed:" not in out
    assert "would run (placement-policy): gcloud beta compute resource-policies create" in out
    assert (
        "would first check every manifest below with the cluster: kubectl apply "
        "--dry-run=server --validate=strict -f - -o name" in out
    )
    assert "would run (kueue-resourceflavor): kubectl apply -f - <<'EOF'" in out
    assert "kind: ResourceFlavor" in out and "name: 1xtpu7x-128" in out
    assert "apply -f /" not in out  # the manifest itself, not a temporary file
    assert _changes(tmp_path) == []
    after = read_state(tmp_path / "rehearsal" / "state.json")
    assert after["k8s"] == before["k8s"]
    assert after["resource_policies"] == before["resource_policies"]


def test_preflight_without_gcloud_credentials_says_to_log_in(tmp_path: Path) -> None:
    env, scenario, recipe = _setup(tmp_path, account=None)
    proc = _preflight(env, recipe, scenario)
    assert proc.returncode != 0
    assert "gcloud auth login" in proc.stderr
    assert "Traceback" not in proc.stderr
