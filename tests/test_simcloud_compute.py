"""The emulated Compute API behind the real gcloud: reservations with their health, policies."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tpu_trainer.simcloud.discovery import load_api
from tpu_trainer.simcloud.local import LocalCloud, serve
from tpu_trainer.simcloud.schema import problems
from tpu_trainer.simcloud.state_compute import StateCompute

pytestmark = pytest.mark.e2e

SCENARIO = {
    "project": "p",
    "region": "us-central1",
    "cluster": {"name": "c"},
    "reservations": [
        {"name": "healthy", "zone": "us-central1-a", "host_count": 16},
        {"name": "sick", "zone": "us-central1-b", "host_count": 16, "health": "DEGRADED"},
    ],
}


def _compute(state: Path) -> list[StateCompute]:
    return [StateCompute(state)]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    with serve(SCENARIO, tmp_path_factory.mktemp("compute"), _compute) as cloud:
        yield cloud
    assert cloud.emulator.invalid() == []


def test_reservation_health_is_where_the_real_api_keeps_it(cloud: LocalCloud) -> None:
    r = cloud.gcloud("beta", "compute", "reservations", "describe", "sick",
                     "--zone=us-central1-b", "--format=json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["status"] == "READY"
    assert body["resourceStatus"]["healthInfo"]["healthStatus"] == "DEGRADED"
    listed = cloud.gcloud("beta", "compute", "reservations", "list", "--filter=name=sick",
                          "--format=value(name,zone.basename(),resourceStatus.healthInfo.healthStatus)")  # fmt: skip
    assert listed.stdout.split() == ["sick", "us-central1-b", "DEGRADED"]


def test_a_missing_reservation_is_the_apis_not_found(cloud: LocalCloud) -> None:
    r = cloud.gcloud("beta", "compute", "reservations", "describe", "nope", "--zone=us-central1-a")
    assert r.returncode == 1
    assert (
        "NOT_FOUND: The resource 'projects/p/zones/us-central1-a/reservations/nope' was not found"
        in r.stderr
    )


def test_a_workload_policy_is_created_refused_twice_and_deleted(cloud: LocalCloud) -> None:
    create = ["beta", "compute", "resource-policies", "create", "workload-policy", "wp1",
              "--type=HIGH_THROUGHPUT", "--accelerator-topology=4x4x4", "--region=us-central1"]  # fmt: skip
    assert cloud.gcloud(*create).returncode == 0
    again = cloud.gcloud(*create)
    assert again.returncode == 1
    assert "resourcePolicies/wp1' already exists" in again.stderr
    exchanges = cloud.emulator.exchanges
    inserted = [e for e in exchanges if e.method_id == "compute.resourcePolicies.insert"]
    assert inserted and all(not e.request_problems for e in inserted)
    gone = cloud.gcloud("compute", "resource-policies", "delete", "wp1", "--region=us-central1",
                        "--quiet")  # fmt: skip
    assert gone.returncode == 0, gone.stderr
    r = cloud.gcloud("compute", "resource-policies", "describe", "wp1", "--region=us-central1")
    assert r.returncode == 1
    assert "resourcePolicies/wp1' was not found" in r.stderr


def test_a_reservation_status_outside_the_apis_values_is_refused() -> None:
    api = load_api("compute.beta")
    assert problems(api, "Reservation", {"name": "r", "status": "READY"}) == []
    assert problems(api, "Reservation", {"name": "r", "status": "DEGRADED"}) == [
        "Reservation.status: 'DEGRADED' is not one of CREATING, DELETING, INVALID, READY, UPDATING"
    ]
