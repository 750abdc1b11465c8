"""Files replaced whole or not at all, and the one lock between processes."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest

from tpu_trainer.infra.files import LockTimeout, atomic_write, file_lock

pytestmark = pytest.mark.unit


def test_atomic_write_replaces_a_file_keeping_its_permissions(tmp_path: Path) -> None:
    target = tmp_path / "README.md"
    target.write_text("old\n")
    target.chmod(0o640)
    atomic_write(target, "新しい\n")
    assert target.read_text(encoding="utf-8") == "新しい\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    atomic_write(target, b"\x89PNG", mode=0o755, sync=False)
    assert target.read_bytes() == b"\x89PNG"
    assert stat.S_IMODE(target.stat().st_mode) == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    target.write_text("{}")
    with pytest.raises(TypeError):
        atomic_write(target, object())  # type: ignore[arg-type]
    assert target.read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_file_lock_excludes_other_threads_and_times_out(tmp_path: Path) -> None:
    lock = tmp_path / "x.lock"
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with file_lock(lock):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    assert held.wait(10)
    with pytest.raises(LockTimeout), file_lock(lock, timeout=0.1):
        pass
    release.set()
    thread.join()
    with file_lock(lock, timeout=1):
        assert lock.exists()
