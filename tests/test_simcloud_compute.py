"""The emulated Compute API behind the real gcloud: reservations with their health, policies."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from tpu_trainer.simcloud.compute import Compute
from tpu_trainer.simcloud.discovery import load_api
from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.server import Emulator

pytestmark = pytest.mark.e2e

Cloud = tuple[Emulator, dict[str, str]]


def _reservation(name: str, health: str) -> dict[str, object]:
    return {
        "name": name,
        "specificReservationRequired": True,
        "aggregateReservation": {
            "vmFamily": "VM_FAMILY_CLOUD_TPU_POD_SLICE_TPU7X",
            "workloadType": "BATCH",
            "reservedResources": [{"accelerator": {"acceleratorCount": 64}}],
        },
        "resourceStatus": {"healthInfo": {"healthStatus": health, "degradedBlockCount": 1}},
    }


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    require_gcloud()
    compute = Compute(clock=lambda: 1_790_000_000.0)
    compute.add_reservation("p", "us-central1-a", _reservation("healthy", "HEALTHY"))
    compute.add_reservation("p", "us-central1-b", _reservation("sick", "DEGRADED"))
    with Emulator([compute]) as emulator:
        yield (
            emulator,
            {**os.environ, **gcloud_env(emulator.base_url, tmp_path_factory.mktemp("g"))},
        )
    assert emulator.invalid() == []


def gcloud(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gcloud", *argv, "--project=p"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_reservation_health_is_where_the_real_api_keeps_it(cloud: Cloud) -> None:
    _, env = cloud
    r = gcloud(env, "beta", "compute", "reservations", "describe", "sick", "--zone=us-central1-b",
               "--format=json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["status"] == "READY"
    assert body["resourceStatus"]["healthInfo"]["healthStatus"] == "DEGRADED"
    listed = gcloud(env, "beta", "compute", "reservations", "list", "--filter=name=sick",
                    "--format=value(name,zone.basename(),resourceStatus.healthInfo.healthStatus)")  # fmt: skip
    assert listed.stdout.split() == ["sick", "us-central1-b", "DEGRADED"]


def test_a_missing_reservation_is_the_apis_not_found(cloud: Cloud) -> None:
    _, env = cloud
    r = gcloud(env, "beta", "compute", "reservations", "describe", "nope", "--zone=us-central1-a")
    assert r.returncode == 1
    assert (
        "NOT_FOUND: The resource 'projects/p/zones/us-central1-a/reservations/nope' was not found"
        in r.stderr
    )


def test_a_workload_policy_is_created_refused_twice_and_deleted(cloud: Cloud) -> None:
    emulator, env = cloud
    create = ["beta", "compute", "resource-policies", "create", "workload-policy", "wp1",
              "--type=HIGH_THROUGHPUT", "--accelerator-topology=4x4x4", "--region=us-central1"]  # fmt: skip
    assert gcloud(env, *create).returncode == 0
    again = gcloud(env, *create)
    assert again.returncode == 1
    assert "resourcePolicies/wp1' already exists" in again.stderr
    inserted = [e for e in emulator.exchanges if e.method_id == "compute.resourcePolicies.insert"]
    assert inserted and all(not e.request_problems for e in inserted)
    gone = gcloud(env, "compute", "resource-policies", "delete", "wp1", "--region=us-central1",
                  "--quiet")  # fmt: skip
    assert gone.returncode == 0, gone.stderr
    r = gcloud(env, "compute", "resource-policies", "describe", "wp1", "--region=us-central1")
    assert r.returncode == 1
    assert "resourcePolicies/wp1' was not found" in r.stderr


def test_a_reservation_status_outside_the_apis_values_is_refused() -> None:
    from tpu_trainer.simcloud.schema import problems

    api = load_api("compute.beta")
    assert problems(api, "Reservation", {"name": "r", "status": "READY"}) == []
    assert problems(api, "Reservation", {"name": "r", "status": "DEGRADED"}) == [
        "Reservation.status: 'DEGRADED' is not one of CREATING, DELETING, INVALID, READY, UPDATING"
    ]
