"""The tool's own gcloud client reads reservation health from the real gcloud (talking to the
emulated Compute API) and the survey skips the DEGRADED one."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from test_simcloud_compute import _reservation as simcloud_reservation
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launchers.gke.capacity import Choice, Survey, Verdict, judge
from tpu_trainer.simcloud.compute import Compute
from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.server import Emulator

pytestmark = pytest.mark.e2e


def _reservation(name: str, health: str, degraded: int) -> dict[str, object]:
    body: dict[str, Any] = simcloud_reservation(name, health)
    body["aggregateReservation"] |= {"hostCount": 64, "inUseHostCount": 16}
    body["resourceStatus"]["healthInfo"]["degradedBlockCount"] = degraded
    return body


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gcloud]:
    require_gcloud()
    compute = Compute(clock=lambda: 1_790_000_000.0)
    compute.add_reservation("p", "us-central1-a", _reservation("healthy", "HEALTHY", 0))
    compute.add_reservation("p", "us-central1-b", _reservation("sick", "DEGRADED", 3))
    with Emulator([compute]) as emulator:
        env = {**os.environ, **gcloud_env(emulator.base_url, tmp_path_factory.mktemp("g"))}
        yield Gcloud(SubprocessRunner(env=env), "p")
    assert emulator.invalid() == []


@pytest.mark.parametrize("zone", ["us-central1-b", None], ids=["describe", "list"])
def test_a_degraded_reservation_is_read_and_skipped(client: Gcloud, zone: str | None) -> None:
    res = client.reservation("sick", zone)
    assert res is not None
    assert (res.status, res.health, res.degraded_blocks) == ("READY", "DEGRADED", 3)
    assert (res.zone, res.free_hosts) == ("us-central1-b", 48)
    survey = Survey(res.name, res.zone, res.status, res.free_hosts, health=res.health,
                    degraded_blocks=res.degraded_blocks)  # fmt: skip
    verdict = judge(survey, needed_hosts=16, region="us-central1")
    assert verdict is Verdict.DEGRADED
    assert Choice(survey, verdict).detail == "(3 degraded blocks)"


def test_a_healthy_reservation_is_tried(client: Gcloud) -> None:
    res = client.reservation("healthy", "us-central1-a")
    assert res is not None and (res.health, res.degraded_blocks) == ("HEALTHY", 0)
    survey = Survey(res.name, res.zone, res.status, res.free_hosts, health=res.health)
    assert judge(survey, needed_hosts=16, region="us-central1") is Verdict.TRY
