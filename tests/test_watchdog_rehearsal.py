"""Rehearsed runs whose hosts stop logging after step 5 (worker 0, or worker 1 first): the
watchdog ends each as hung within k × the steady step time (+ its tick) on the scenario's
clock, names the host that went quiet first, and the teardown leaves nothing behind."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from test_gke_rehearsal import _train
from tpu_trainer.app.watchdog import DEFAULT_K

pytestmark = pytest.mark.e2e

_QUIET = re.compile(r"(\d+) s without a new step; limit [\d.]+ × steady step ([\d.]+) s")


def _failed(
    tmp_path: Path, scenario: str
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], sqlite3.Connection, str]:
    """The rehearsal of ``scenario``, which must fail: its output, state, store and error."""
    proc, state = _train(tmp_path, scenario)
    assert proc.returncode != 0
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    status, error = db.execute("SELECT status, error FROM runs").fetchone()
    assert status == "failed"
    return proc, state, db, str(error)


def test_a_run_whose_worker_0_goes_quiet_after_step_5_ends_hung_and_torn_down(
    tmp_path: Path,
) -> None:
    proc, state, db, error = _failed(tmp_path, "hang.yaml")
    assert error.startswith("hung after step 5 (worker 0 quiet since step 5"), error
    found = _QUIET.search(error)
    assert found is not None, error
    quiet, steady = float(found[1]), float(found[2])
    assert steady == pytest.approx(20.3)
    assert DEFAULT_K * steady <= quiet <= DEFAULT_K * steady + 15
    assert "hung after step 5" in proc.stdout + proc.stderr
    # torn down: no run pool, no workload, nothing the store still holds
    assert sorted(state["node_pools"]) == ["default-pool"]
    assert state["workloads"] == {}
    live = db.execute(
        "SELECT kind, name FROM resources WHERE state IN ('creating','created','deleting')"
    ).fetchall()
    assert live == []
    # the decision and the teardown are in the run's record: the TPUs given back within 15 s
    # of the decision on the scenario's clock
    (detail,) = db.execute("SELECT detail FROM stages WHERE name = 'stop'").fetchone()
    stopped = re.search(r"(\d+) s after the decision", detail)
    assert stopped is not None, detail
    assert "nothing this run made is left running" in detail
    assert int(stopped[1]) <= 15


def test_a_run_whose_worker_1_goes_quiet_first_names_worker_1(tmp_path: Path) -> None:
    _, state, _, error = _failed(tmp_path, "hang-worker1.yaml")
    # every host logged step 5 but worker 1, whose last step line was step 4
    assert error.startswith("hung after step 5 (worker 1 quiet since step 4"), error
    assert state["workloads"] == {}
    assert sorted(state["node_pools"]) == ["default-pool"]
