"""The run store: SQLite (WAL), one file, passed around as an object.

It keeps every run, its stages, every command run (secrets already redacted), every cloud
resource the tool created (written *before* the create call is made, so a killed process never
loses track of what it may have created), every attempt to find capacity, and each run's
per-step metrics and figures, and the segments an automatic resume splits it into. :class:`RunStore` is the one object callers hold; each table's
reads and writes live in their own module (``file``, ``runs``, ``resources``, ``steps``).
"""

from __future__ import annotations

from tpu_trainer.store.file import RunMode, default_path, locks_dir
from tpu_trainer.store.ledger import LedgerTable
from tpu_trainer.store.resources import LIVE_STATES, Resource, ResourcesTable, ResourceState
from tpu_trainer.store.runs import RunRow, RunsTable, RunStatus
from tpu_trainer.store.segments import SegmentEnd, SegmentRow, SegmentsTable
from tpu_trainer.store.steps import StepRow, StepsTable

__all__ = [
    "LIVE_STATES",
    "Resource",
    "ResourceState",
    "RunMode",
    "RunRow",
    "RunStatus",
    "RunStore",
    "SegmentEnd",
    "SegmentRow",
    "StepRow",
    "default_path",
    "locks_dir",
]


class RunStore(RunsTable, ResourcesTable, StepsTable, LedgerTable, SegmentsTable):
    """The run store at ``path``; runs it creates get ``mode``."""
