"""Multi-slice runs, credentials and the schedule deadline, through the CLI on the fake cloud."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import RECIPES, RECIPES_ROOT, cli_env, run_commands, submit_scripts
from tpu_trainer.fakecloud.state import read_state, recorded_calls

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"
RECIPE = RECIPES["tee-upload"]  # tpu7x-4x4x4: 16 hosts, a workload policy
GRPC = "--megascale_grpc_interface_prefixes=eth1,eth2,lo"


def _recipe(tmp_path: Path, *, grpc: bool = True) -> Path:
    """The fixture recipe, with the DCN interfaces multi-slice needs in its XLA flags."""
    target = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, target)
    if grpc:
        script = target / "run_recipe.sh"
        text = script.read_text(encoding="utf-8")
        marker = "--xla_tpu_scoped_vmem_limit_kib=61440 "
        assert marker in text
        script.write_text(text.replace(marker, marker + GRPC + " "), encoding="utf-8")
    return target


def _scenario(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load((SCENARIOS / "multislice.yaml").read_text(encoding="utf-8"))
    for key, value in changes.items():
        if isinstance(value, dict):
            data[key] = {**(data.get(key) or {}), **value}
        else:
            data[key] = value
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def _train(
    tmp_path: Path, scenario: Path, *args: str, grpc: bool = True
) -> tuple[subprocess.CompletedProcess[str], list[list[str]], dict[str, Any]]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpu_trainer",
            "train",
            str(_recipe(tmp_path, grpc=grpc)),
            "--rehearse",
            str(scenario),
            "--poll",
            "0.05",
            *args,
        ],
        env=cli_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    state_file = tmp_path / "rehearsal" / "state.json"
    return proc, recorded_calls(state_file), read_state(state_file)


def _creates(calls: list[list[str]]) -> list[list[str]]:
    """Every call that would make something in the cloud (a gcloud create in the cloud's call
    log; the tool's own xpk, submit script and kubectl apply in its run store)."""
    return [c for c in calls if "create" in c[:6] or c[0] in ("xpk", "bash") or c[1:2] == ["apply"]]


def _first(calls: list[list[str]], prefix: list[str]) -> int:
    return next(i for i, c in enumerate(calls) if c[: len(prefix)] == prefix)


def _db(tmp_path: Path) -> sqlite3.Connection:
    return sqlite3.connect(tmp_path / "store" / "runs.db")


@pytest.mark.e2e
def test_two_slices_check_first_make_one_pool_per_slice_train_and_delete_both(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path)
    proc, calls, state = _train(tmp_path, scenario, "--num-slices", "2", "--wait-timeout", "120")
    assert proc.returncode == 0, proc.stderr[-3000:]
    pool_creates = [
        c for c in calls if c[:5] == ["gcloud", "beta", "container", "node-pools", "create"]
    ]
    names = [c[5] for c in pool_creates]
    assert len(names) == 2 and len(set(names)) == 2, names
    for create in pool_creates:
        assert "--num-nodes=16" in create
        assert "--placement-policy=tpu7x-128-4x4x4-placement-policy" in create
        assert "--reservation=res-ok" in create and "--node-locations=us-central1-c" in create
    first_create = min(calls.index(c) for c in _creates(calls))
    assert _first(calls, ["gcloud", "auth", "list"]) < first_create
    assert _first(calls, ["gcloud", "container", "clusters", "describe"]) < first_create
    (script,) = submit_scripts(tmp_path)
    assert '--num-slices="2"' in script and "xpk workload create" in script
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["reservations"]["res-ok"]["in_use_hosts"] == 0
    db = _db(tmp_path)
    rows = dict(db.execute("SELECT name, state FROM resources WHERE kind='nodepool'").fetchall())
    assert {n: rows.get(n) for n in names} == dict.fromkeys(names, "deleted")
    assert set(rows.values()) <= {"deleted", "absent"}  # xpk's names, never made, are absent
    assert db.execute("SELECT status FROM runs").fetchone()[0] == "succeeded"


@pytest.mark.e2e
def test_two_slices_on_a_cluster_without_multi_networking_stop_before_anything_is_made(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, cluster={"multi_networking": False})
    proc, calls, state = _train(tmp_path, scenario, "--num-slices", "2")
    assert proc.returncode != 0
    assert "multi-networking" in proc.stderr
    assert "--enable-multi-networking" in proc.stderr  # the fix is named
    assert "nothing was created" in proc.stderr
    assert _creates(calls) == _creates(run_commands(tmp_path)) == []
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["resource_policies"] == {}
    assert _db(tmp_path).execute("SELECT status FROM runs").fetchone()[0] == "failed"


@pytest.mark.e2e
def test_not_logged_in_stops_before_the_first_create_and_says_gcloud_auth_login(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, account=None)
    proc, calls, state = _train(tmp_path, scenario)
    assert proc.returncode != 0
    assert "gcloud auth login" in proc.stderr
    assert "no active account" in proc.stderr
    assert "show RUN" not in proc.stderr
    assert _creates(calls) == []
    assert not (tmp_path / "store" / "runs.db").exists() or _creates(run_commands(tmp_path)) == []
    assert sorted(state["node_pools"]) == ["default-pool"]


@pytest.mark.e2e
def test_a_wrong_cluster_name_is_named_with_the_clusters_that_exist(tmp_path: Path) -> None:
    from dataclasses import replace

    from tpu_trainer.infra.gcloud import Gcloud
    from tpu_trainer.infra.runner import SubprocessRunner
    from tpu_trainer.launchers.gke.preflight import NotReadyError, require_cluster
    from tpu_trainer.simcloud.rehearsal import prepare

    config, env, _ = prepare(_scenario(tmp_path), None, cli_env(tmp_path), fresh=True)
    gcloud = Gcloud(SubprocessRunner(env=env), config.project_id)
    assert require_cluster(config, gcloud).name == "demo-cluster"
    with pytest.raises(NotReadyError) as caught:
        require_cluster(replace(config, cluster_name="demo-clsuter"), gcloud)
    assert "cluster demo-clsuter not found in us-central1" in caught.value.message
    assert "cluster_name: demo-cluster" in caught.value.fix


@pytest.mark.parametrize(
    ("changes", "reasons", "stored"),
    [
        (  # Kueue never admits it: another workload holds the flavor's quota
            {"kueue": {"in_use": {"1xtpu7x-128": 64}}},
            [
                "Kueue has not admitted",
                "insufficient unused quota for google.com/tpu in flavor 1xtpu7x-128",
            ],
            "64 more needed",
        ),
        (  # admitted, but the scheduler never places the pods: their TPUs are taken
            {"workloads": {"tpus_taken": True}},
            ["the scheduler cannot place", "Insufficient google.com/tpu"],
            "Unschedulable",
        ),
    ],
)
@pytest.mark.e2e
def test_pods_that_never_schedule_fail_at_the_schedule_deadline_with_the_last_reason(
    tmp_path: Path, changes: dict[str, Any], reasons: list[str], stored: str
) -> None:
    scenario = _scenario(tmp_path, **changes)
    proc, _, state = _train(tmp_path, scenario, "--schedule-timeout", "2", "--wait-timeout", "3600")
    assert proc.returncode != 0
    said = " ".join(proc.stderr.split())  # the console wraps long lines
    assert "was not scheduled within 2 s; last reason:" in said
    for reason in reasons:
        assert reason in said
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["workloads"] == {}
    status, error = _db(tmp_path).execute("SELECT status, error FROM runs").fetchone()
    assert status == "failed" and stored in error


@pytest.mark.e2e
def test_two_slices_reuse_two_matching_pools_but_never_just_one(tmp_path: Path) -> None:
    from tpu_trainer.app.display import SilentDisplay
    from tpu_trainer.app.services import kube_access_of, recording_services
    from tpu_trainer.launchers.gke.provision import Provisioner
    from tpu_trainer.plan.slices import Slice
    from tpu_trainer.simcloud.rehearsal import prepare
    from tpu_trainer.store.db import RunStore

    tpu = {
        "machine_type": "tpu7x-standard-4t",
        "node_count": 16,
        "zone": "us-central1-c",
        "placement_policy": "tpu7x-128-4x4x4-placement-policy",
    }
    default = {
        "name": "default-pool",
        "machine_type": "e2-standard-8",
        "node_count": 3,
        "zone": "us-central1-ai1a",
    }
    pools = [default, *({"name": f"demo-cluster-np-{i}", **tpu} for i in range(2))]
    config, env, _ = prepare(
        _scenario(tmp_path, node_pools=pools), None, cli_env(tmp_path), fresh=True
    )
    store = RunStore(tmp_path / "store" / "runs.db")
    svc = recording_services(
        store, SilentDisplay(), config.project_id, env, kube_access=kube_access_of(config)
    )
    prov = Provisioner(
        svc.gcloud, svc.xpk, svc.kubectl, store, "0a0a0a0a", config,
        Slice.parse("tpu7x-4x4x4"), 2, SilentDisplay(),
    )  # fmt: skip
    made = prov.ensure()
    assert (made.pools, made.zone, made.created) == (
        ["demo-cluster-np-0", "demo-cluster-np-1"],
        "us-central1-c",
        False,
    )
    assert _creates(recorded_calls(tmp_path / "rehearsal" / "state.json")) == []
    only_one = [
        p
        for p in svc.gcloud.node_pools("demo-cluster", "us-central1")
        if p.name != "demo-cluster-np-1"
    ]
    assert prov._usable_existing(only_one) is None


@pytest.mark.e2e
def test_the_fake_gcloud_without_an_account_answers_with_gclouds_own_text(tmp_path: Path) -> None:
    from tpu_trainer.simcloud.rehearsal import prepare

    _, env, _ = prepare(_scenario(tmp_path, account=None), None, cli_env(tmp_path), fresh=True)

    def gcloud(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["gcloud", *args], env=env, capture_output=True, text=True, timeout=60, check=False
        )

    create = gcloud("container", "node-pools", "create", "p", "--cluster=demo-cluster",
                    "--location=us-central1")  # fmt: skip
    assert create.returncode == 1
    assert create.stderr == (
        "ERROR: (gcloud.container.node-pools.create) You do not currently have an active account "
        "selected.\nPlease run:\n\n  $ gcloud auth login\n\nto obtain new credentials.\n\nIf you "
        "have already logged in with a different account, run:\n\n  $ gcloud config set account "
        "ACCOUNT\n\nto select an already authenticated account to use.\n"
    )
    listed = gcloud("auth", "list", "--format=json")
    assert (listed.returncode, listed.stdout.strip()) == (0, "[]")
    assert "No credentialed accounts." in listed.stderr


@pytest.mark.parametrize("num_slices", [1, 2])
@pytest.mark.unit
def test_a_resumed_run_plans_for_the_slices_it_ran_on(num_slices: int) -> None:
    from conftest import plan_for
    from tpu_trainer.app.plan_json import plan_json
    from tpu_trainer.cli.resume_cmd import stored_num_slices

    stored = plan_json(plan_for(RECIPES["classic"], num_slices=num_slices))
    assert stored_num_slices(stored) == num_slices
    assert stored_num_slices({"recipe": "x"}) is None
