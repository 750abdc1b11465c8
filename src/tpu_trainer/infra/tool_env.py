"""Where the tool keeps the heavy tools it installs (outside any checkout), keyed by version."""

from __future__ import annotations

import os
from pathlib import Path

XPK_VERSION = "1.16.0"


def cache_dir(env: dict[str, str] | None = None) -> Path:
    """``$TPU_TRAINER_CACHE``, else ``$XDG_CACHE_HOME/tpu-trainer``, else ``~/.cache/tpu-trainer``."""
    env = dict(os.environ) if env is None else env
    if env.get("TPU_TRAINER_CACHE"):
        return Path(env["TPU_TRAINER_CACHE"]).expanduser()
    base = (
        Path(env["XDG_CACHE_HOME"]).expanduser()
        if env.get("XDG_CACHE_HOME")
        else Path.home() / ".cache"
    )
    return base / "tpu-trainer"


def xpk_venv(env: dict[str, str] | None = None) -> Path:
    """The virtual environment holding xpk (it pins its own dependencies, so it lives apart)."""
    return cache_dir(env) / f"xpk-{XPK_VERSION}"


def xpk_python(env: dict[str, str] | None = None) -> Path:
    env = dict(os.environ) if env is None else env
    if env.get("TPU_TRAINER_XPK_PYTHON"):
        return Path(env["TPU_TRAINER_XPK_PYTHON"])
    return xpk_venv(env) / "bin" / "python"
