"""A rehearsal's Google Cloud: the emulated APIs over the scenario's state, the real gcloud."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import cli_env
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.simcloud.rehearsal import prepare, recorded_problems

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "scenarios"


def _gcloud(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gcloud", *argv], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_a_degraded_reservation_is_served_with_its_health(tmp_path: Path) -> None:
    _, env, workdir = prepare(SCENARIOS / "failover.yaml", None, cli_env(tmp_path), fresh=True)
    proc = _gcloud(env, "beta", "compute", "reservations", "describe", "res-degraded",
                   "--zone=us-central1-b", "--format=json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    body = json.loads(proc.stdout)
    assert body["status"] == "READY"
    assert body["resourceStatus"]["healthInfo"] == {
        "healthStatus": "DEGRADED",
        "degradedBlockCount": 1,
    }
    assert body["aggregateReservation"]["hostCount"] == 64
    assert recorded_calls(workdir / "state.json")[0][:4] == [
        "gcloud",
        "beta",
        "compute",
        "reservations",
    ]
    assert recorded_problems(workdir) == []


def test_a_too_small_reservation_is_refused_at_once_and_the_state_is_shared(
    tmp_path: Path,
) -> None:
    """GKE's 429 for a SPECIFIC reservation without room, the pool never made; a second
    emulator over the same state (another tool process) sees the same cloud."""
    scenario = tmp_path / "small.yaml"
    scenario.write_text(
        "project: demo-project\nregion: us-central1\ncluster: {name: demo-cluster}\n"
        "reservations:\n  - {name: small, zone: us-central1-c, host_count: 8}\n"
        "resource_policies: [tpu7x-128-4x4x4-placement-policy]\n",
        encoding="utf-8",
    )
    _, env, workdir = prepare(scenario, None, cli_env(tmp_path), fresh=True)
    create = _gcloud(
        env, "beta", "container", "node-pools", "create", "np", "--cluster=demo-cluster",
        "--location=us-central1", "--node-locations=us-central1-c",
        "--machine-type=tpu7x-standard-4t", "--num-nodes=16",
        "--placement-policy=tpu7x-128-4x4x4-placement-policy",
        "--reservation-affinity=specific", "--reservation=small",
    )  # fmt: skip
    assert create.returncode == 1
    assert create.stderr.splitlines()[-1] == (
        "ERROR: (gcloud.beta.container.node-pools.create) ResponseError: code=429, "
        "message=Reservation does not have enough resources for the request: specific "
        'reservation "small" is insufficient for node pool "np" at zone "us-central1-c": '
        "required 16 and short of 8 VM count of machine type tpu7x-standard-4t."
    )
    _, again, _ = prepare(scenario, None, cli_env(tmp_path), fresh=False)
    assert (
        again["CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER"]
        != (env["CLOUDSDK_API_ENDPOINT_OVERRIDES_CONTAINER"])
    )
    listed = _gcloud(again, "container", "node-pools", "list", "--cluster=demo-cluster",
                     "--region=us-central1", "--format=value(name)")  # fmt: skip
    assert listed.returncode == 0 and listed.stdout == "", listed.stderr
    assert read_state(workdir / "state.json")["node_pools"] == {}
    assert recorded_problems(workdir) == []
