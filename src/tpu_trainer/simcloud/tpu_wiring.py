"""Running the emulated Cloud TPU for the tool: the API on 127.0.0.1 over a given state, and a
``gcloud`` for PATH that sends ``compute tpus tpu-vm ssh|scp`` (not API calls) to the local
worker stand-in and everything else to the real gcloud, pointed at the emulator."""

from __future__ import annotations

import shlex
import stat
import sys
from pathlib import Path

from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.server import Emulator
from tpu_trainer.simcloud.tpu import Tpu
from tpu_trainer.simcloud.tpu_state import StateAccess

_LOCAL = ("compute tpus tpu-vm ssh", "compute tpus tpu-vm scp")


def write_gcloud_dispatcher(bin_dir: Path, python: str = sys.executable) -> Path:
    """``bin_dir/gcloud``: ssh and scp to TPU VM workers answered by the local stand-in
    (``python -m tpu_trainer.fakecloud gcloud``), every other command by the real gcloud."""
    real = shlex.quote(require_gcloud())
    local = shlex.quote(python) + ' -m tpu_trainer.fakecloud gcloud "$@"'
    four = "|".join(f'"{c}"' for c in _LOCAL)
    five = "|".join(f'"{track} {c}"' for track in ("alpha", "beta") for c in _LOCAL)
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / "gcloud"
    path.write_text(
        "#!/bin/sh\n"
        "# gcloud of a rehearsal: TPU VM ssh/scp go to the local worker stand-in, everything\n"
        "# else to the real gcloud (its endpoints point at the emulated Google APIs).\n"
        f'case "$1 $2 $3 $4" in {four}) exec {local} ;; esac\n'
        f'case "$1 $2 $3 $4 $5" in {five}) exec {local} ;; esac\n'
        f'exec {real} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def start_tpu_api(state: StateAccess, config_dir: Path) -> tuple[Emulator, dict[str, str]]:
    """The Cloud TPU API over ``state``, serving from daemon threads of this process, and the
    variables that point gcloud at it (its private configuration under ``config_dir``)."""
    require_gcloud()
    emulator = Emulator([Tpu(state)])
    return emulator, gcloud_env(emulator.start(), config_dir)
