"""The badput seconds a training log measured, added up while the log is read.

A framework's log reader (MaxText's: ``frameworks.maxtext.badput_lines``) finds the lines that
say where time went and adds their seconds here; :class:`MeasuredBadput` keeps one sum per
kind, None for a kind the log never spoke of (so a run without checkpoints says "not measured",
not "0 s"). The sums are stored with the run's figures (``log_badput`` in ``show --json``'s
metrics) and become ml-goodput-measurement's buckets in :mod:`metrics.goodput`:

- ``tpu_initialization``: device and distributed-system start-up (``TPU_INITIALIZATION``);
- ``checkpoint_restore``: restoring a checkpoint before training goes on
  (``UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME``);
- ``checkpoint_save``: the part of each checkpoint save that blocks training
  (``UNPRODUCTIVE_CHECKPOINT_SAVE_TIME``);
- ``data_loading``: training waiting for its input batches (``DATA_LOADING_SYNC``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any


@dataclass(slots=True)
class MeasuredBadput:
    """Seconds per kind (None: the log said nothing of that kind)."""

    tpu_initialization: float | None = None
    checkpoint_restore: float | None = None
    checkpoint_save: float | None = None
    data_loading: float | None = None

    def add(self, kind: str, seconds: float) -> None:
        """``seconds`` more of ``kind`` (one of the field names); negative spans count 0."""
        before = getattr(self, kind)
        setattr(self, kind, (before or 0.0) + max(0.0, seconds))

    def to_json(self) -> dict[str, float | None]:
        return {
            f.name: None if (v := getattr(self, f.name)) is None else round(v, 6)
            for f in fields(self)
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> MeasuredBadput:
        """What :meth:`to_json` wrote (unknown keys and non-numbers ignored)."""
        out = cls()
        for f in fields(cls):
            value = (data or {}).get(f.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(out, f.name, float(value))
        return out
