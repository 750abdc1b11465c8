"""Reservation health as the Compute API gives it (``resourceStatus.healthInfo``), read and
judged: a DEGRADED reservation is skipped whatever its ``status`` (READY) says."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_trainer.infra.gcloud import parse_reservation
from tpu_trainer.launchers.gke.capacity import Choice, Survey, Verdict, judge

pytestmark = pytest.mark.unit


def _body(**extra: Any) -> dict[str, Any]:
    return {
        "name": "r",
        "zone": "https://www.googleapis.com/compute/beta/projects/p/zones/us-central1-b",
        "status": "READY",
        "aggregateReservation": {"hostCount": "64", "inUseHostCount": "16"},
        **extra,
    }


def test_health_and_degraded_blocks_come_from_health_info() -> None:
    res = parse_reservation(
        _body(resourceStatus={"healthInfo": {"healthStatus": "DEGRADED", "degradedBlockCount": 2,
                                             "healthyBlockCount": 6}})
    )  # fmt: skip
    assert (res.status, res.health, res.degraded_blocks) == ("READY", "DEGRADED", 2)
    assert (res.zone, res.free_hosts) == ("us-central1-b", 48)


def test_a_reservation_without_health_info_has_no_health() -> None:
    res = parse_reservation(_body(resourceStatus={"reservationBlockCount": 8}))
    assert (res.health, res.degraded_blocks) == (None, None)
    assert parse_reservation(_body()).health is None


def _survey(health: str | None, blocks: int | None = None) -> Survey:
    return Survey("r", "us-central1-b", "READY", 48, health=health, degraded_blocks=blocks)


@pytest.mark.parametrize(
    ("survey", "verdict", "detail"),
    [
        (_survey("DEGRADED", 2), Verdict.DEGRADED, "(2 degraded blocks)"),
        (_survey("DEGRADED", 1), Verdict.DEGRADED, "(1 degraded block)"),
        (_survey("DEGRADED"), Verdict.DEGRADED, ""),
        (_survey("HEALTHY"), Verdict.TRY, ""),
        (_survey(None), Verdict.TRY, ""),
    ],
)
def test_degraded_health_is_skipped_with_its_block_count(
    survey: Survey, verdict: Verdict, detail: str
) -> None:
    got = judge(survey, needed_hosts=16, region="us-central1")
    assert got is verdict
    assert Choice(survey, got).detail == detail
    assert Verdict.DEGRADED.value == "skip: reservation DEGRADED (maintenance in progress)"


def test_status_alone_never_marks_a_reservation_degraded() -> None:
    stale = Survey("r", "us-central1-b", "DEGRADED", 48)
    assert judge(stale, needed_hosts=16, region="us-central1") is Verdict.TRY
