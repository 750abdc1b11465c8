"""What a failed create (xpk cluster create/adapt, gcloud node-pool or TPU create) means.

The texts are the ones gcloud prints (captured from the real gcloud; see
``tests/fixtures/gcloud_errors/``):

- a create whose operation fails prints the whole operation, ``canonicalCode:
  CanonicalCodeValueValuesEnum(RESOURCE_EXHAUSTED, 9)`` (the enum's own number, not
  google.rpc's 8), ``error: <Status code: 8 ...>`` and ``finished with error: MESSAGE``; a
  message with a ``'`` in it is quoted with ``"``;
- a create GKE refuses at once prints one line, ``ResponseError: code=N, message=MESSAGE``: 429
  when a SPECIFIC reservation is too small (``Reservation does not have enough resources for
  the request: specific reservation "R" is insufficient for node pool "P" at zone "Z": ...``),
  404 when the reservation is not in the pool's zone (``reservation "R" not found for node pool
  "P" at zone "Z"``) or the cluster does not exist (``Not found: projects/.../clusters/C.``;
  ``clusters describe`` adds ``No cluster named 'C' in P.``), 409 for a name in use, 400 while
  another operation runs on the cluster.
"""

from __future__ import annotations

import re
from enum import StrEnum

from tpu_trainer.infra.runner import CommandResult


class XpkFailure(StrEnum):
    CAPACITY = "capacity"
    """RESOURCE_EXHAUSTED, a stockout or a too-small reservation (429): try the next one."""
    ALREADY_EXISTS = "already-exists"
    WRONG_ZONE = "wrong-zone"
    """The reservation does not hold these machines in the zone asked for: try the next one."""
    BUSY = "busy"
    """The cluster runs another operation (GKE's 400): wait for it and run again."""
    CLUSTER_MISSING = "cluster-missing"
    OTHER = "other"


_CAPACITY_MARKERS = (
    "RESOURCE_EXHAUSTED",
    "No available resources",
    "GCE_STOCKOUT",
    "does not have enough resources available",
    "Reservation does not have enough resources for the request",
)
_INSUFFICIENT = re.compile(r"specific reservation \"[^\"]+\" is insufficient for node pool")
_WRONG_ZONE = re.compile(r"reservation \"[^\"]+\" not found for node pool \"[^\"]+\" at zone")
_MISSING_CLUSTER = re.compile(
    r"code=404, message=Not found: projects/[^/\s]+/(?:locations|zones)/[^/\s]+/clusters/[^/\s]+\."
    r"(?:\s|$)|No cluster named '[^']+' in "
)
_BUSY = ("incompatible operation", "is currently creating node pool", "try again once it is done")

FIXES = {
    XpkFailure.BUSY: "the cluster is busy with another operation (`gcloud container operations "
    "list`); wait until it is done and run again",
    XpkFailure.CLUSTER_MISSING: "check cluster_name and region in the configuration "
    "(`gcloud container clusters list` shows the clusters there), or create the cluster with "
    "`xpk cluster create`",
}
"""What to do next for the failures that end the run."""


def classify(result: CommandResult) -> XpkFailure:
    text = result.text()
    if "Reservation is incorrect for the requested resources" in text or _WRONG_ZONE.search(text):
        return XpkFailure.WRONG_ZONE
    if any(m in text for m in _CAPACITY_MARKERS) or _INSUFFICIENT.search(text):
        return XpkFailure.CAPACITY
    if "code=409" in text or "Already exists" in text or "ALREADY_EXISTS" in text:
        return XpkFailure.ALREADY_EXISTS
    if _MISSING_CLUSTER.search(text):
        return XpkFailure.CLUSTER_MISSING
    if any(m in text for m in _BUSY):
        return XpkFailure.BUSY
    return XpkFailure.OTHER
