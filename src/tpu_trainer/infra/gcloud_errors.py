"""What a failed create (xpk cluster create/adapt, gcloud node-pool or TPU create) means."""

from __future__ import annotations

from enum import StrEnum

from tpu_trainer.infra.runner import CommandResult


class XpkFailure(StrEnum):
    CAPACITY = "capacity"
    """RESOURCE_EXHAUSTED / No available resources: try the next reservation."""
    MEMORY_LIMIT = "memory-limit"
    """xpk's cluster adapt memory_limit bug: fall back to gcloud."""
    ALREADY_EXISTS = "already-exists"
    WRONG_ZONE = "wrong-zone"
    """The reservation is not in the zone asked for."""
    OTHER = "other"


_CAPACITY_MARKERS = (
    "RESOURCE_EXHAUSTED",
    "No available resources",
    "GCE_STOCKOUT",
    "does not have enough resources available",
)


def classify(result: CommandResult) -> XpkFailure:
    text = result.text()
    if "memory_limit" in text:
        return XpkFailure.MEMORY_LIMIT
    if any(m in text for m in _CAPACITY_MARKERS):
        return XpkFailure.CAPACITY
    if "Reservation is incorrect for the requested resources" in text:
        return XpkFailure.WRONG_ZONE
    if "code=409" in text or "Already exists" in text or "ALREADY_EXISTS" in text:
        return XpkFailure.ALREADY_EXISTS
    return XpkFailure.OTHER
