"""Names the tool gives to things, all valid for the tools that receive them."""

from __future__ import annotations

import re
from datetime import datetime

WORKLOAD_NAME_MAX = 40
WORKLOAD_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
TIMESTAMP_FORMAT = "%Y%m%d-%H%M"
"""Same as the recipes' ``$(date +%Y%m%d-%H%M)``: 13 characters."""
_TIMESTAMP_LEN = 13
PREFIX_MAX = WORKLOAD_NAME_MAX - 1 - _TIMESTAMP_LEN
GCLUSTER_NAME_MAX = 28
"""``gcluster job submit --name``: at most 28 characters (the JobSet and its pods' names)."""
LOCAL_QUEUE = "multislice-queue"
"""The Kueue LocalQueue xpk submits to (and gcluster's when ``--queue`` names none and the
namespace has no other)."""
_OBJECT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_OBJECT_NAME_MAX = 253


def slug(text: str) -> str:
    """Lower case, runs of anything but letters and digits turned into one hyphen."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]", "-", text.lower())).strip("-")


def workload_prefix(user: str, model: str, limit: int = WORKLOAD_NAME_MAX) -> str:
    """``<user>-<model>`` made valid and short enough to take a timestamp: at most 26 characters,
    starting with a letter, never ending in or doubling a hyphen (the recipes' ``printf %.26s``
    could do both)."""
    text = slug(f"{user}-{model}") or "run"
    if not text[0].isalpha():
        text = "w" + text
    return text[: limit - 1 - _TIMESTAMP_LEN].rstrip("-")


def workload_name(user: str, model: str, when: datetime, limit: int = WORKLOAD_NAME_MAX) -> str:
    """A workload name xpk accepts: ``[a-z]([-a-z0-9]*[a-z0-9])?``, at most 40 characters
    (``limit``: 28 for gcluster)."""
    name = f"{workload_prefix(user, model, limit)}-{when.strftime(TIMESTAMP_FORMAT)}"
    if not is_valid_workload_name(name, limit):  # pragma: no cover - guards the rules above
        raise ValueError(f"made an invalid workload name {name!r}")
    return name


def is_valid_workload_name(name: str, limit: int = WORKLOAD_NAME_MAX) -> bool:
    return len(name) <= limit and WORKLOAD_NAME_RE.match(name) is not None and "--" not in name


def submit_script_name(model: str) -> str:
    """``submit_<model>.sh`` with the model name made safe for a file name."""
    return f"submit_{re.sub(r'[^A-Za-z0-9._-]', '_', model)}.sh"


def local_queue_problem(name: str) -> str | None:
    """Why ``name`` cannot name a Kueue LocalQueue (a Kubernetes object name), or None."""
    if len(name) > _OBJECT_NAME_MAX:
        return f"longer than {_OBJECT_NAME_MAX} characters"
    if not _OBJECT_NAME.match(name):
        return "not lower-case letters, digits, '-' and '.', starting and ending alphanumeric"
    return None
