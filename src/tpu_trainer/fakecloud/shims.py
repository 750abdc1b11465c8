"""Putting the fake tools on PATH: ``gcloud`` and ``gcluster`` shell shims.

kubectl has none: it is the real one, against the emulated Kubernetes API server
(``simcloud.kube``), port-forward included. Nor has xpk: it is the real one too (the tool's,
``runtime.xpk_runtime``), whose gcloud calls go through the ``gcloud`` shim like the tool's."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from collections.abc import Mapping
from pathlib import Path

from tpu_trainer.fakecloud.state import STATE_ENV

TOOLS = ("gcloud", "gcluster")
RETIRED = ("kubectl", "xpk")
"""Shims earlier versions wrote, removed from a folder written again (a rehearsal's folder
outlives the tool's version)."""


def write_shims(
    bin_dir: Path, python: str = sys.executable, tools: tuple[str, ...] = TOOLS
) -> None:
    """Write executable ``#!/bin/sh`` scripts (every one of :data:`TOOLS` unless ``tools``
    says which) into ``bin_dir`` that run ``python -m tpu_trainer.fakecloud <tool> "$@"``; a
    shim of another tool left there (or by an earlier version) is removed."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in (*TOOLS, *RETIRED):
        if tool not in tools:
            (bin_dir / tool).unlink(missing_ok=True)
    for tool in tools:
        path = bin_dir / tool
        path.write_text(
            "#!/bin/sh\n"
            f"# Fake {tool} (tpu_trainer.fakecloud): answers from $" + STATE_ENV + ".\n"
            f'exec {shlex.quote(python)} -m tpu_trainer.fakecloud {tool} "$@"\n',
            encoding="utf-8",
        )
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def fake_cloud_env(
    bin_dir: Path, state_path: Path, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``base`` (default: this process's environment) with ``bin_dir`` first on PATH and
    ``TPU_TRAINER_FAKE_STATE`` pointing at ``state_path``."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = os.pathsep.join(p for p in (str(bin_dir), env.get("PATH", "")) if p)
    env[STATE_ENV] = str(state_path)
    env.setdefault("TELEMETRY_ENABLED", "false")
    return env
