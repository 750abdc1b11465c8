"""Writing generated files without losing anything that was there."""

from __future__ import annotations

from pathlib import Path

from tpu_trainer.errors import InputError
from tpu_trainer.infra.files import atomic_write

GENERATED_MARK = "# Written by tpu-trainer"


def write_generated(
    path: Path, text: str, *, executable: bool = False, force: bool = False
) -> bool:
    """Write ``text`` atomically. A file not written by the tool is never replaced unless ``force``.

    Returns False when the file already had exactly this text.
    """
    if path.exists():
        old = path.read_text(encoding="utf-8", errors="replace")
        if old == text:
            return False
        if GENERATED_MARK not in old and not force:
            raise InputError(
                f"{path} exists and was not written by tpu-trainer; not replacing it",
                fix="move it away, or pass --force to replace it",
            )
    atomic_write(path, text, mode=0o755 if executable else 0o644)
    return True
