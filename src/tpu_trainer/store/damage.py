"""A damaged run store: the error, and how to get a working store back."""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.errors import TpuTrainerError


class StoreDamagedError(TpuTrainerError):
    """The store's file is corrupt (``PRAGMA quick_check`` fails)."""


def recovery_fix(path: Path) -> str:
    """How to get a working store back from a damaged one (the damaged file is kept)."""
    return (
        f"`tpu-trainer gc` still cleans up from what is readable. To recover the store: "
        f"`sqlite3 {path} .recover | sqlite3 {path}.recovered`, then "
        f"`mv {path} {path}.damaged && mv {path}.recovered {path}` "
        f"(the damaged file stays as {path}.damaged)"
    )
