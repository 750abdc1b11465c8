"""Teardown, cleanup and gc on the fake cloud: creates still running, deletes that do not
delete, shared workload policies, dry runs, damaged stores, and runs whose process died."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from conftest import RECIPES_ROOT, cli_env, new_run
from fake_cloud_setup import _create_argv
from test_gke_ops import POOL, RECIPE, _cli, _dead_run
from test_gke_ops import _scenario as ops_scenario
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.guard import teardown_always
from tpu_trainer.app.outcome import TeardownReport
from tpu_trainer.app.services import Services, kube_access_of, recording_services
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke.teardown import Teardown
from tpu_trainer.simcloud.rehearsal import prepare
from tpu_trainer.store.db import ResourceState, RunStatus, RunStore

pytestmark = pytest.mark.e2e

POLICY = "tpu7x-128-4x4x4-placement-policy"


def _scenario(tmp_path: Path, pools: Sequence[str] = (), **behaviours: Any) -> Path:
    """The fake project of test_gke_ops, with the recipe's workload policy and ``pools`` using
    it."""
    return ops_scenario(
        tmp_path,
        node_pools=[{"name": n, "placement_policy": POLICY, **POOL} for n in pools],
        resource_policies=[POLICY],
        behaviours=behaviours,
    )


def _cloud(tmp_path: Path, scenario: Path) -> tuple[Services, dict[str, str]]:
    env = cli_env(tmp_path)
    config, fake_env, _ = prepare(scenario, None, env, fresh=True)
    store = RunStore(tmp_path / "store" / "runs.db")
    return recording_services(
        store, SilentDisplay(), config.project_id, fake_env, kube_access=kube_access_of(config)
    ), env


def _run(store: RunStore, run_id: str, *, pid: int | None = None) -> None:
    """A run of the store whose process is gone (or is ``pid``)."""
    _dead_run(store.path.parent.parent, run_id)
    if pid is not None:
        store.update_run(run_id, pid=pid)


def _owns(store: RunStore, run_id: str, kind: str, name: str) -> int:
    rid = store.resource_intent(
        run_id,
        kind=kind,
        name=name,
        project="demo-project",
        location="us-central1",
        cluster="demo-cluster" if kind == "nodepool" else None,
    )
    store.resource_state(rid, ResourceState.CREATED)
    return rid


def _state(tmp_path: Path) -> dict[str, Any]:
    return read_state(tmp_path / "rehearsal" / "state.json")


def _teardown(svc: Services, **kw: Any) -> Teardown:
    return Teardown(svc.store, svc.gcloud, svc.xpk, svc.display, poll_seconds=0.1, **kw)


def test_teardown_waits_out_a_create_that_was_interrupted_then_deletes_the_pool(
    tmp_path: Path,
) -> None:
    # Each of gcloud's own polls of the create moves the scenario's clock on by its poll period:
    # a create of 15 s outlasts the polls the client makes before the signal reaches it.
    svc, _ = _cloud(tmp_path, _scenario(tmp_path, create_seconds=15))
    _run(svc.store, "0badf00d")
    rid = _owns(svc.store, "0badf00d", "nodepool", "tpt-0badf00d-tpu7x-128")
    env = {**os.environ, **getattr(svc.runner, "env")}  # noqa: B009
    argv = _create_argv("tpt-0badf00d-tpu7x-128", "us-central1-ai1a", "res-a", hosts=16)
    client = subprocess.Popen([*argv, f"--placement-policy={POLICY}"], env=env)
    while "tpt-0badf00d-tpu7x-128" not in _state(tmp_path)["node_pools"]:
        time.sleep(0.05)
    # SIGKILL, not SIGTERM: a client that inherited SIGTERM as ignored would poll on to the end
    client.send_signal(signal.SIGKILL)  # the client goes; GKE's create operation does not
    client.wait()
    assert _state(tmp_path)["node_pools"]["tpt-0badf00d-tpu7x-128"]["status"] == "PROVISIONING"
    report = _teardown(svc).run("0badf00d")
    assert report.clean, report.failed
    assert report.deleted == ["nodepool tpt-0badf00d-tpu7x-128"]
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]
    (res,) = [r for r in svc.store.resources("0badf00d") if r.id == rid]
    assert res.state is ResourceState.DELETED


def test_a_delete_that_answers_success_but_leaves_the_pool_is_not_recorded_deleted(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, ["tpt-0badf00d-tpu7x-128"], lost_pool_deletes=1)
    svc, env = _cloud(tmp_path, scenario)
    _run(svc.store, "0badf00d")
    pool = _owns(svc.store, "0badf00d", "nodepool", "tpt-0badf00d-tpu7x-128")
    svc.store.close()
    first = _cli(env, "cleanup", "0badf00d", "--rehearse", str(scenario), "--poll", "0.1")
    assert first.returncode == 1
    assert "the delete answered success but the pool is still RUNNING" in first.stderr
    assert "left (`tpu-trainer gc` retries)" in first.stderr
    store = RunStore(tmp_path / "store" / "runs.db")
    (res,) = [r for r in store.resources("0badf00d") if r.id == pool]
    assert res.state is not ResourceState.DELETED
    again = _cli(env, "gc", "--rehearse", str(scenario), "--poll", "0.1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]


def test_gc_tries_every_run_and_the_orphan_sweep_then_exits_1_listing_what_is_left(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, ["tpt-0e0e0e0e-tpu7x-128"])
    svc, env = _cloud(tmp_path, scenario)
    _run(svc.store, "0badf00d")
    _owns(svc.store, "0badf00d", "disk", "scratch-disk")  # a kind gc cannot delete
    _run(svc.store, "0e0e0e0e")  # its pool was never recorded: only the sweep finds it
    svc.store.close()
    proc = _cli(env, "gc", "--rehearse", str(scenario), "--poll", "0.1")
    assert proc.returncode == 1
    assert "deleted orphan node pool tpt-0e0e0e0e-tpu7x-128" in proc.stdout
    assert "disk scratch-disk: no way to delete this kind" in proc.stderr
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]


def _dump(db: Path) -> list[Any]:
    con = sqlite3.connect(db)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return [(t, con.execute(f"SELECT * FROM {t}").fetchall()) for t in sorted(tables)]  # noqa: S608
    finally:
        con.close()


def test_dry_runs_of_cleanup_and_gc_change_nothing_in_the_store_or_the_cloud(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, ["tpt-0badf00d-tpu7x-128", "tpt-0e0e0e0e-tpu7x-128"])
    svc, env = _cloud(tmp_path, scenario)
    _run(svc.store, "0badf00d")
    _run(svc.store, "0e0e0e0e")
    _run(svc.store, "0d0d0d0d")  # died before making anything
    _owns(svc.store, "0badf00d", "nodepool", "tpt-0badf00d-tpu7x-128")
    _owns(svc.store, "0badf00d", "workload-policy", POLICY)
    svc.store.close()
    db = tmp_path / "store" / "runs.db"
    rows, pools = _dump(db), sorted(_state(tmp_path)["node_pools"])
    clean = _cli(env, "cleanup", "0badf00d", "--dry-run", "--rehearse", str(scenario))
    gc = _cli(env, "gc", "--dry-run", "--rehearse", str(scenario))
    assert clean.returncode == 0 and gc.returncode == 0, clean.stderr + gc.stderr
    assert "would run: gcloud container node-pools delete tpt-0badf00d-tpu7x-128" in gc.stdout
    assert "would delete orphan node pool tpt-0e0e0e0e-tpu7x-128" in gc.stdout
    assert "would delete orphan node pool tpt-0badf00d-tpu7x-128" not in gc.stdout
    assert "dry run: nothing was deleted and the run store was not changed" in gc.stdout
    assert _dump(db) == rows
    assert sorted(_state(tmp_path)["node_pools"]) == pools


def test_a_workload_policy_another_live_run_uses_is_handed_over_not_reported_deleted(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, ["tpt-0aaaaaaa-tpu7x-128", "tpt-0bbbbbbb-tpu7x-128"])
    svc, _ = _cloud(tmp_path, scenario)
    _run(svc.store, "0aaaaaaa")
    _run(svc.store, "0bbbbbbb", pid=os.getpid())  # still running
    _owns(svc.store, "0aaaaaaa", "nodepool", "tpt-0aaaaaaa-tpu7x-128")
    policy = _owns(svc.store, "0aaaaaaa", "workload-policy", POLICY)
    _owns(svc.store, "0bbbbbbb", "nodepool", "tpt-0bbbbbbb-tpu7x-128")
    first = _teardown(svc).run("0aaaaaaa")
    assert first.clean, first.failed
    assert first.handed_over == [
        f"workload-policy {POLICY} -> run 0bbbbbbb (its node pool tpt-0bbbbbbb-tpu7x-128)"
    ]
    assert "nothing this run made is left running" in first.summary()
    assert POLICY in _state(tmp_path)["resource_policies"]
    second = _teardown(svc).run("0bbbbbbb")
    assert second.clean, second.failed
    assert f"workload-policy {POLICY}" in second.deleted
    assert POLICY not in _state(tmp_path)["resource_policies"]
    (res,) = [r for r in svc.store.resources() if r.id == policy]
    assert (res.run_id, res.state) == ("0bbbbbbb", ResourceState.DELETED)


def test_a_run_with_a_pool_and_its_policy_lists_the_node_pools_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _ = _cloud(tmp_path, _scenario(tmp_path, ["tpt-0aaaaaaa-tpu7x-128"]))
    _run(svc.store, "0aaaaaaa")
    svc.store.update_run("0aaaaaaa", pools_before=["default-pool"])
    _owns(svc.store, "0aaaaaaa", "nodepool", "tpt-0aaaaaaa-tpu7x-128")
    _owns(svc.store, "0aaaaaaa", "workload-policy", POLICY)
    listed: list[tuple[str, str]] = []
    real = Gcloud.node_pools

    def counted(self: Gcloud, cluster: str, location: str) -> Any:
        listed.append((cluster, location))
        return real(self, cluster, location)

    monkeypatch.setattr(Gcloud, "node_pools", counted)
    report = _teardown(svc).run("0aaaaaaa")
    assert report.clean, report.failed
    assert report.deleted == ["nodepool tpt-0aaaaaaa-tpu7x-128", f"workload-policy {POLICY}"]
    # the policy's users and the final check read one listing taken after the pool's delete
    assert listed == [("demo-cluster", "us-central1")]
    assert report.extra_pools == []


def test_a_policy_used_by_a_pool_tpu_trainer_did_not_make_is_left_and_said_so(
    tmp_path: Path,
) -> None:
    svc, _ = _cloud(tmp_path, _scenario(tmp_path, ["users-own-pool"]))
    _run(svc.store, "0aaaaaaa")
    _owns(svc.store, "0aaaaaaa", "workload-policy", POLICY)
    report = _teardown(svc).run("0aaaaaaa")
    assert report.clean and report.deleted == []
    assert report.left == [
        f"workload-policy {POLICY}: used by node pool users-own-pool, which tpu-trainer did "
        "not make"
    ]
    assert "left in use 1" in report.summary()


def _damage(db: Path, marker: bytes) -> None:
    """Overwrite the page that holds ``marker`` with garbage."""
    data = bytearray(db.read_bytes())
    page = 4096
    at = data.index(marker) // page * page
    data[at : at + page] = b"\xde\xad\xbe\xef" * (page // 4)
    db.write_bytes(bytes(data))


def test_a_damaged_store_is_refused_clearly_and_gc_still_cleans_from_what_is_readable(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path, ["tpt-0badf00d-tpu7x-128"])
    svc, env = _cloud(tmp_path, scenario)
    _run(svc.store, "0badf00d")
    _owns(svc.store, "0badf00d", "nodepool", "tpt-0badf00d-tpu7x-128")
    for i in range(12):
        svc.store.create_run(
            f"filler{i:02d}",
            model="m",
            request=f"FILLER-{i:02d}-" + "x" * 1500,
            launcher=LaunchPath.XPK,
            device_type="tpu7x-4x4x4",
            precision="bf16",
            project=None,
            cluster=None,
            region=None,
            zone=None,
            plan_json=None,
        )
        svc.store.finish_run(f"filler{i:02d}", RunStatus.SUCCEEDED)
    svc.store._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    svc.store.close()
    db = tmp_path / "store" / "runs.db"
    _damage(db, b"FILLER-11-")
    recipe = tmp_path / "recipes" / RECIPE
    shutil.copytree(RECIPES_ROOT / RECIPE, recipe)
    train = ("train", str(recipe), "--rehearse", str(scenario), "--skip-checks")
    for args in (("runs",), ("export", "--format", "json"), train):
        proc = _cli(env, *args)
        assert proc.returncode == 1, proc.stdout
        assert "Traceback" not in proc.stderr
        assert "is damaged" in proc.stderr and ".recover" in proc.stderr
    assert not [c for c in recorded_calls(tmp_path / "rehearsal" / "state.json") if "create" in c]
    gc = _cli(env, "gc", "--rehearse", str(scenario), "--poll", "0.1")
    assert "Traceback" not in gc.stderr, gc.stderr
    assert "working from what is readable" in gc.stderr
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]


def test_runs_and_gc_mark_a_run_whose_process_died_before_making_anything(
    tmp_path: Path,
) -> None:
    scenario = _scenario(tmp_path)
    svc, env = _cloud(tmp_path, scenario)
    _run(svc.store, "0d0d0d0d")
    _run(svc.store, "0a11ve00", pid=os.getpid())
    svc.store.close()
    proc = _cli(env, "runs", "--json")
    assert proc.returncode == 0, proc.stderr
    import json

    status = {r["id"]: r["status"] for r in json.loads(proc.stdout)}
    assert status == {"0d0d0d0d": "failed", "0a11ve00": "running"}
    row = RunStore(tmp_path / "store" / "runs.db").run("0d0d0d0d")
    assert row is not None and "ended without finishing" in (row.error or "")


class _SignalledTeardown:
    """A teardown that is sent Ctrl-C twice while it works."""

    def __init__(self) -> None:
        self.finished = False

    def run(self, run_id: str) -> TeardownReport:  # noqa: ARG002
        for _ in range(2):
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        self.finished = True
        return TeardownReport(deleted=["nodepool p"])


def test_ctrl_c_during_teardown_is_ignored_with_a_message_and_the_teardown_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunStore(tmp_path / "store" / "runs.db")
    _run(store, "0badf00d", pid=os.getpid())
    teardown = _SignalledTeardown()
    with pytest.raises(KeyboardInterrupt), teardown_always(store, "0badf00d", teardown):
        raise KeyboardInterrupt
    assert teardown.finished
    err = capsys.readouterr().err
    assert "Ctrl-C ignored: teardown is deleting what the run made" in err
    assert f"kill -KILL {os.getpid()}" in err and "tpu-trainer gc" in err
    row = store.run("0badf00d")
    assert row is not None and row.status is RunStatus.CANCELLED
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # the process is ending
    signal.signal(signal.SIGINT, signal.default_int_handler)


def test_a_workload_create_that_fails_after_the_jobset_exists_is_still_deleted(
    tmp_path: Path,
) -> None:
    from test_gke_ops import _run_in_process
    from test_gke_ops import _scenario as ops_scenario
    from tpu_trainer.infra.runner import CommandFailed

    scenario = ops_scenario(tmp_path, behaviours={"workload_create_fails_after_submit": True})
    run, store = _run_in_process(tmp_path, scenario, "0badf00d")
    with pytest.raises(CommandFailed):
        run.start()
    assert _state(tmp_path)["workloads"] == {}
    (wl,) = [r for r in store.resources("0badf00d") if r.kind == "workload"]
    assert wl.state is ResourceState.DELETED
    assert sorted(_state(tmp_path)["node_pools"]) == ["default-pool"]


class _SlowTeardown:
    """A teardown during which a Ctrl-C arrives."""

    def __init__(self) -> None:
        self.finished = False

    def run(self, run_id: str) -> TeardownReport:  # noqa: ARG002
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs between bytecodes of this frame
        self.finished = True
        return TeardownReport()


def test_a_ctrl_c_right_after_the_first_is_said_and_ignored_and_the_teardown_finishes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tpu_trainer.app import guard as teardown_module
    from tpu_trainer.store.db import RunStore

    store = RunStore(tmp_path / "runs.db")
    new_run(store, "r1", LaunchPath.LOCAL, "cpu-1")
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    slow = _SlowTeardown()
    try:
        # The moment between the first Ctrl-C and the teardown's own handler.
        teardown_module._ignore_signals()
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        assert "Ctrl-C ignored: teardown is deleting" in capsys.readouterr().err
        with pytest.raises(KeyboardInterrupt), teardown_always(store, "r1", slow):
            raise KeyboardInterrupt
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    assert slow.finished
    assert "Ctrl-C ignored" in capsys.readouterr().err
