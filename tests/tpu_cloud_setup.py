"""A simulated cloud for the TPU VM tests: the scenario's state file, the emulated Cloud TPU
API over it (in this process) and a ``gcloud`` on PATH that is the real one, but for the local
``tpu-vm ssh``/``scp`` worker stand-in."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tpu_trainer.fakecloud import fake_cloud_env, init_state, load_scenario, write_shims
from tpu_trainer.fakecloud.state import transaction
from tpu_trainer.simcloud.server import Emulator
from tpu_trainer.simcloud.tpu_wiring import start_tpu_api, write_gcloud_dispatcher

STARTED: list[Emulator] = []
"""Every emulator these helpers started (a test module's fixture stops them)."""


def tpu_cloud(
    folder: Path, scenario: Path, base: Mapping[str, str]
) -> tuple[Path, dict[str, str], Emulator]:
    """The state file, the environment to run the tool with, and the running emulator."""
    state = folder / "state.json"
    init_state(load_scenario(scenario), state)
    bin_dir = folder / "bin"
    write_shims(bin_dir)
    write_gcloud_dispatcher(bin_dir)
    emulator, gcloud_vars = start_tpu_api(lambda: transaction(state), folder / "gcloud")
    STARTED.append(emulator)
    return state, {**fake_cloud_env(bin_dir, state, base), **gcloud_vars}, emulator


def stop_all() -> list[str]:
    """Stop every emulator started; the schema problems any of them recorded."""
    problems = [
        f"{e.method_id}: {p}"
        for emulator in STARTED
        for e in emulator.invalid()
        for p in (*e.request_problems, *e.response_problems)
    ]
    while STARTED:
        STARTED.pop().stop()
    return problems
