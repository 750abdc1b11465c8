"""The effectful pieces a run uses, built once and passed down."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from tpu_trainer.app.display import Display
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandResult, CommandRunner, SubprocessRunner
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.store.db import RunStore


def new_run_id() -> str:
    """Eight hex digits: short enough for resource names, random enough not to collide."""
    return secrets.token_hex(4)


@dataclass
class CurrentRun:
    """Which run the commands being recorded belong to."""

    run_id: str | None = None


@dataclass
class Services:
    runner: CommandRunner
    store: RunStore
    display: Display
    project: str
    current: CurrentRun = field(default_factory=CurrentRun)

    @property
    def gcloud(self) -> Gcloud:
        return Gcloud(self.runner, self.project)

    @property
    def kubectl(self) -> Kubectl:
        return Kubectl(self.runner)

    @property
    def xpk(self) -> Xpk:
        return Xpk(self.runner)


def recording_services(
    store: RunStore, display: Display, project: str, env: Mapping[str, str] | None = None
) -> Services:
    """Services whose every command is recorded in the store under the current run."""
    current = CurrentRun()

    def record(result: CommandResult) -> None:
        store.record_command(current.run_id, result)

    runner = SubprocessRunner(env=env, recorder=record)
    return Services(runner, store, display, project, current)
