"""A simulated cloud for the TPU VM tests, laid out as a rehearsal lays it out: the scenario's
state file, the emulated Google APIs over it (in this process), and a ``gcloud`` on PATH that
is the real one, but for the local ``tpu-vm ssh``/``scp`` worker stand-in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tpu_trainer.fakecloud import fake_cloud_env, init_state, load_scenario, write_shims
from tpu_trainer.fakecloud.gcloud_dispatch import REAL_GCLOUD_ENV
from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.rehearsal import real_gcloud, recorded_problems, start_emulator
from tpu_trainer.simcloud.server import Emulator

STARTED: list[tuple[Emulator, Path]] = []
"""Every emulator these helpers started, with its folder (a fixture stops them)."""


def tpu_cloud(
    folder: Path, scenario: Path, base: Mapping[str, str]
) -> tuple[Path, dict[str, str], Emulator]:
    """The state file, the environment to run the tool with, and the running emulator."""
    require_gcloud()
    state = folder / "state.json"
    init_state(load_scenario(scenario), state)
    write_shims(folder / "bin")
    env = fake_cloud_env(folder / "bin", state, base)
    real = real_gcloud(env, folder / "bin")
    emulator = start_emulator(folder)
    STARTED.append((emulator, folder))
    env = {**env, **gcloud_env(emulator.base_url, folder / "gcloud-config"), REAL_GCLOUD_ENV: real}
    return state, env, emulator


def stop_all() -> list[dict[str, object]]:
    """Stop every emulator started; the exchanges any of them found against the documents."""
    problems: list[dict[str, object]] = []
    while STARTED:
        emulator, folder = STARTED.pop()
        emulator.stop()
        problems += recorded_problems(folder)
    return problems
