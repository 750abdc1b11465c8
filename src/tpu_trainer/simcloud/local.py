"""The emulated APIs over a scenario, for a script or a test that runs the real gcloud itself.

``serve(scenario, folder)`` writes the scenario's state to ``folder/state.json``, starts the
emulator over it on 127.0.0.1 (GKE, Compute and Cloud TPU, or the services ``make`` builds over
the state file) and yields it with the environment that points gcloud at it: a private
configuration under ``folder``, the scenario's project as gcloud's default. The emulator stops
when the block ends. Unlike a rehearsal (``rehearsal.prepare``) there are no stand-ins and no
``gcloud`` shim: every command is the real gcloud's, every answer the emulator's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.fakecloud.initial import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.rehearsal import services
from tpu_trainer.simcloud.server import Emulator, Service

GCLOUD_TIMEOUT = 120.0
"""Seconds one gcloud command may take before it is stopped."""


@dataclass(frozen=True)
class LocalCloud:
    """A running emulator, the state file it serves and gcloud's environment for it."""

    emulator: Emulator
    state: Path
    env: dict[str, str]
    gcloud_path: str

    def gcloud(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """The real gcloud with ``argv`` (never through a shell), its output captured."""
        return subprocess.run(
            [self.gcloud_path, *argv],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=GCLOUD_TIMEOUT,
            check=False,
        )


@contextmanager
def serve(
    scenario: Mapping[str, object],
    folder: Path,
    make: Callable[[Path], Sequence[Service]] = services,
) -> Iterator[LocalCloud]:
    """The emulator over ``scenario`` (a scenario file's data) for the block's duration."""
    gcloud = require_gcloud()
    parsed = parse_scenario(dict(scenario), "<scenario>")
    state = init_state(parsed, folder / "state.json")
    with Emulator(make(state)) as emulator:
        env = {
            **os.environ,
            **gcloud_env(emulator.base_url, folder / "gcloud-config"),
            "CLOUDSDK_CORE_PROJECT": parsed.project,
        }
        yield LocalCloud(emulator, state, env, gcloud)
