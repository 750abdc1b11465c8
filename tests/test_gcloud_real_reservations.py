"""The tool's own gcloud client reads reservation health from the real gcloud (talking to the
emulated Compute API) and the survey skips the DEGRADED one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launchers.gke.capacity import Choice, Survey, Verdict, judge
from tpu_trainer.simcloud.local import serve

pytestmark = pytest.mark.e2e


def _reservation(name: str, zone: str, health: str, degraded: int) -> dict[str, object]:
    return {"name": name, "zone": zone, "host_count": 64, "in_use_hosts": 16,
            "health": health, "degraded_blocks": degraded}  # fmt: skip


SCENARIO = {
    "project": "p",
    "region": "us-central1",
    "cluster": {"name": "c"},
    "reservations": [
        _reservation("healthy", "us-central1-a", "HEALTHY", 0),
        _reservation("sick", "us-central1-b", "DEGRADED", 3),
    ],
}


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gcloud]:
    with serve(SCENARIO, tmp_path_factory.mktemp("g")) as cloud:
        yield Gcloud(SubprocessRunner(env=cloud.env), "p")
    assert cloud.emulator.invalid() == []


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
