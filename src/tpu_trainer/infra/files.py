"""Files written whole or not at all, and locks between processes: the one way of each.

* :func:`atomic_write` replaces a file in one step: the data goes to a temporary file in the
  same folder, which then takes the file's name, so a reader sees the old file or the new one,
  never half of one, and a failed write leaves the old file as it was.
* :func:`file_lock` is an exclusive lock between processes (and threads) held on a lock file
  (the ``filelock`` package): README writers (``<store>/locks/``), runtime installs
  (``~/.cache/tpu-trainer/*.lock``), the MaxText configs download and the fake cloud's state.
  A lock not obtained within its timeout raises :data:`LockTimeout`.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from filelock import FileLock, Timeout

LockTimeout = Timeout
"""Raised by a :func:`file_lock` not obtained within its timeout."""


def file_lock(path: Path | str, timeout: float = -1) -> FileLock:
    """An exclusive lock on the lock file ``path`` (made when missing), to use as a context
    manager; ``timeout`` seconds to wait for it (-1: as long as it takes)."""
    return FileLock(str(path), timeout=timeout)


def atomic_write(
    path: Path, data: bytes | str, *, mode: int | None = None, sync: bool = True
) -> None:
    """Replace ``path`` with ``data`` (text is written as UTF-8) in one step.

    ``mode``: the new file's permission bits (default: those of the file replaced, 0o644 for a
    new one). ``sync``: flush the data to disk before the file takes the name.
    """
    if mode is None:
        mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        Path(tmp).chmod(mode)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
