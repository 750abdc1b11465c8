"""Every gcloud line a whole rehearsal ran (GKE with failover, and a TPU VM run) passes gcloud's
own parser: the lines the run store recorded and the ones the simulated cloud received."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from test_gke_rehearsal import _train as train_gke
from test_train_tpu_vm_cli import _train as train_tpu_vm
from test_train_tpu_vm_cli import _v6e_recipe
from tpu_trainer.fakecloud.state import recorded_calls
from tpu_trainer.infra.gcloud_parser import check_gcloud_argvs

pytestmark = pytest.mark.e2e


def _gcloud_lines(tmp_path: Path) -> list[list[str]]:
    """The gcloud argvs of the run store's commands table, then of the fake cloud's calls."""
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    stored = [json.loads(a) for (a,) in db.execute("SELECT argv FROM commands ORDER BY id")]
    received = recorded_calls(tmp_path / "rehearsal" / "state.json")
    return [list(a) for a in [*stored, *received] if a and a[0] == "gcloud"]


def _refused(lines: list[list[str]], tmp_path: Path) -> list[str]:
    """gcloud's parser's refusals. ``--output-directory`` must name a folder that exists (the
    parser checks); the run's own ones are gone with the run, so one that exists stands in."""
    unique = list({json.dumps(a): a for a in lines}.values())
    here = f"--output-directory={tmp_path}"
    parsed = check_gcloud_argvs(
        [[here if a.startswith("--output-directory=") else a for a in line] for line in unique]
    )
    return [f"{' '.join(p.argv)}\n  {p.error}" for p in parsed if not p.ok]


def _verbs(lines: list[list[str]]) -> set[str]:
    return {" ".join(a[1:6]) for a in lines}


def test_every_gcloud_line_of_a_gke_failover_rehearsal_parses(tmp_path: Path) -> None:
    proc, _ = train_gke(tmp_path, "failover.yaml")
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = _gcloud_lines(tmp_path)
    verbs = _verbs(lines)
    for expected in (
        "auth list --format=json",
        "beta compute reservations list --filter=name=(res-exhausted res-degraded res-ok)",
        "beta container node-pools create tpt-",
        "container node-pools delete",
    ):
        assert any(v.startswith(expected) for v in verbs), (expected, sorted(verbs))
    assert _refused(lines, tmp_path) == []


def test_every_gcloud_line_of_a_tpu_vm_rehearsal_parses(tmp_path: Path) -> None:
    # the scenario's log stops at step 4: a 5-step run reaches its last step and succeeds
    proc = train_tpu_vm(tmp_path, _v6e_recipe(tmp_path), "--set", "steps=5")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = _gcloud_lines(tmp_path)
    verbs = {" ".join(a[1:5]) for a in lines}
    assert {"compute tpus tpu-vm create", "compute tpus tpu-vm ssh",
            "compute tpus tpu-vm delete"} <= verbs, sorted(verbs)  # fmt: skip
    assert _refused(lines, tmp_path) == []
