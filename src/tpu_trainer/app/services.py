"""The effectful pieces a run uses, built once and passed down."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.config.model import Config
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock
from tpu_trainer.infra.runner import (
    CommandResult,
    CommandRunner,
    DryRunRunner,
    Recorder,
    SubprocessRunner,
)
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.store.db import RunStore


def new_run_id() -> str:
    """Eight hex digits: short enough for resource names, random enough not to collide."""
    return secrets.token_hex(4)


def recorder(store: RunStore, run_id: str | None) -> Recorder:
    """Records every command in the store under ``run_id``."""

    def record(result: CommandResult) -> None:
        store.record_command(run_id, result)

    return record


@dataclass(frozen=True)
class Services:
    runner: CommandRunner
    store: RunStore
    display: Display
    project: str
    run_id: str | None = None
    """The run the commands are recorded under (None: outside any run)."""
    clock: Clock = SYSTEM_CLOCK
    """The time the hang watchdog reads (a rehearsal's: the scenario's clock)."""
    kube_access: KubeAccess | None = None
    """The configured GKE cluster, whose credentials kubectl gets before its first command
    (once per process); None when the configuration names no cluster."""

    @property
    def gcloud(self) -> Gcloud:
        return Gcloud(self.runner, self.project)

    @property
    def kubectl(self) -> Kubectl:
        return Kubectl(self.runner, access=self.kube_access)

    @property
    def xpk(self) -> Xpk:
        env = _process_env(self.runner)
        if env is None:
            return Xpk(self.runner)
        if isinstance(self.runner, DryRunRunner):  # a dry run installs nothing, xpk included
            return Xpk(self.runner, search_path=lambda: _installed_xpk_path(env))
        return Xpk(self.runner, search_path=lambda: self._xpk_path(env))

    def _xpk_path(self, env: Mapping[str, str]) -> str:
        """PATH with the tool's xpk 1.16 first, installed (once) with a live status line."""
        from tpu_trainer.runtime.xpk_runtime import ensure_xpk

        started = time.monotonic()

        def progress(line: str) -> None:
            self.display.waiting(f"xpk (first use): {line}", time.monotonic() - started)

        folder = ensure_xpk(SubprocessRunner(env=env), progress, env)
        return os.pathsep.join(p for p in (str(folder), env.get("PATH", "")) if p)

    def for_run(self, run_id: str) -> Services:
        """The same services, their commands recorded under ``run_id`` (when they record)."""
        runner = self.runner
        if isinstance(runner, SubprocessRunner) and runner.recorder is not None:
            runner = replace(runner, recorder=recorder(self.store, run_id))
        return replace(self, runner=runner, run_id=run_id)


def _installed_xpk_path(env: Mapping[str, str]) -> str:
    """PATH with the tool's xpk first (``$TPU_TRAINER_XPK``'s folder, else the cache's when it
    is already installed); else PATH as it is."""
    from tpu_trainer.runtime.xpk_runtime import XPK_ENV, xpk_bin_dir

    folder = (
        Path(env[XPK_ENV]).expanduser().resolve().parent if env.get(XPK_ENV) else xpk_bin_dir(env)
    )
    first = [str(folder)] if (folder / "xpk").exists() else []
    return os.pathsep.join(p for p in (*first, env.get("PATH", "")) if p)


def _process_env(runner: CommandRunner) -> Mapping[str, str] | None:
    """The environment real commands run in (None: a runner that runs nothing for real)."""
    if isinstance(runner, DryRunRunner):
        return _process_env(runner.inner)
    if isinstance(runner, SubprocessRunner):
        return runner.env if runner.env is not None else dict(os.environ)
    return None


def kube_access_of(config: Config) -> KubeAccess | None:
    """The configuration's GKE cluster, whose credentials kubectl gets (None: it names none)."""
    if not config.cluster_name:
        return None
    return KubeAccess(config.project_id, config.region, config.cluster_name)


def recording_services(
    store: RunStore,
    display: Display,
    project: str,
    env: Mapping[str, str] | None = None,
    clock: Clock = SYSTEM_CLOCK,
    kube_access: KubeAccess | None = None,
) -> Services:
    """Services whose every command is recorded in the store (under no run until
    :meth:`Services.for_run`)."""
    runner = SubprocessRunner(env=env, recorder=recorder(store, None))
    return Services(runner, store, display, project, clock=clock, kube_access=kube_access)
