"""Choosing where capacity may be: a table from what each reservation says to what to do."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.infra.gcloud_errors import XpkFailure


class Verdict(StrEnum):
    TRY = "try"
    DEGRADED = "skip: reservation DEGRADED (maintenance in progress)"
    TOO_SMALL = "skip: not enough free hosts"
    NOT_FOUND = "skip: reservation not found"
    OTHER_REGION = "skip: reservation is in another region than the cluster"


@dataclass(frozen=True, slots=True)
class Survey:
    """What one reservation said when asked."""

    name: str
    zone: str | None
    status: str | None
    """The API's lifecycle state (READY, CREATING...); never DEGRADED."""
    free_hosts: int | None
    found: bool = True
    health: str | None = None
    """``resourceStatus.healthInfo.healthStatus``: HEALTHY or DEGRADED."""
    degraded_blocks: int | None = None


@dataclass(frozen=True, slots=True)
class Choice:
    survey: Survey
    verdict: Verdict

    @property
    def usable(self) -> bool:
        return self.verdict is Verdict.TRY

    @property
    def detail(self) -> str:
        """What the verdict's text leaves out: how many blocks a DEGRADED reservation has down."""
        blocks = self.survey.degraded_blocks
        if self.verdict is not Verdict.DEGRADED or not blocks:
            return ""
        return f"({blocks} degraded block{'' if blocks == 1 else 's'})"


def judge(survey: Survey, needed_hosts: int, region: str) -> Verdict:
    if not survey.found:
        return Verdict.NOT_FOUND
    if survey.zone and region and not survey.zone.startswith(region + "-"):
        return Verdict.OTHER_REGION
    if (survey.health or "").upper() == "DEGRADED":
        return Verdict.DEGRADED
    if survey.free_hosts is not None and survey.free_hosts < needed_hosts:
        return Verdict.TOO_SMALL
    return Verdict.TRY


def order(surveys: list[Survey], needed_hosts: int, region: str) -> list[Choice]:
    """Every reservation in priority order, each with its verdict."""
    return [Choice(s, judge(s, needed_hosts, region)) for s in surveys]


class Outcome(StrEnum):
    """What happened when a reservation was tried."""

    CREATED = "created"
    REUSED = "reused"
    EXHAUSTED = "exhausted"
    WRONG_ZONE = "wrong zone"
    FAILED = "failed"
    SKIPPED = "skipped"


MOVE_ON = {XpkFailure.CAPACITY: Outcome.EXHAUSTED, XpkFailure.WRONG_ZONE: Outcome.WRONG_ZONE}
"""Create failures after which the next reservation is tried, and what the attempt is noted as."""
