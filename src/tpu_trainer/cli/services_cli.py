"""Building services for CLI commands: the real cloud, or a rehearsal on the fake one."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.app.services import Services, kube_access_of, recording_services
from tpu_trainer.cli.console import RichDisplay
from tpu_trainer.config.load import load_config
from tpu_trainer.config.model import Config
from tpu_trainer.store.db import RunMode, RunStore, default_path


@dataclass
class Setup:
    services: Services
    config: Config
    rehearsal_dir: Path | None
    scenario: Path | None = None
    """The rehearsal's scenario file (None: the real cloud)."""

    @property
    def rehearsal(self) -> tuple[Path, Path] | None:
        """The rehearsal's scenario file and the folder of its fake cloud (None: real)."""
        if self.scenario is None or self.rehearsal_dir is None:
            return None
        return self.scenario, self.rehearsal_dir


def open_store(mode: RunMode = RunMode.REAL) -> RunStore:
    """The run store, checked (``PRAGMA quick_check``): a damaged one is refused with how to
    recover it, before anything is read from it or created. The runs it creates are of ``mode``
    (real, or rehearsals)."""
    store = RunStore(default_path(), mode)
    try:
        store.require_sound()
    except BaseException:
        store.close()
        raise
    return store


def open_store_for_cleanup(warn: Callable[[str], None]) -> RunStore:
    """The run store, or, when its file is damaged, an in-memory copy of what is readable
    (the damaged file is only read)."""
    from tpu_trainer.store.damage import StoreDamagedError, recovery_fix
    from tpu_trainer.store.salvage import salvage

    path = default_path()
    try:
        return open_store()
    except StoreDamagedError as e:
        problem = e.message
    saved = salvage(path)
    warn(
        f"warning: {problem}\nworking from what is readable ({saved.runs} runs, "
        f"{saved.resources} resources; unreadable: {', '.join(saved.unreadable) or 'none'}); "
        f"nothing is written to the damaged file.\nnext: {recovery_fix(path)}"
    )
    return saved.store


def build(
    config_path: Path | None,
    rehearse: Path | None,
    *,
    fresh: bool = False,
    store: RunStore | None = None,
) -> Setup:
    """Services against the real cloud, or against the fake cloud of a rehearsal scenario."""
    display = RichDisplay()
    store = (
        store
        if store is not None
        else open_store(RunMode.REAL if rehearse is None else RunMode.REHEARSAL)
    )
    if rehearse is None:
        config = load_config(config_path, require=True)
        assert config is not None  # noqa: S101 (require=True never returns None)
        services = recording_services(
            store, display, config.project_id, kube_access=kube_access_of(config)
        )
        return Setup(services, config, None)
    from tpu_trainer.fakecloud.rehearsal import reservation_notice
    from tpu_trainer.fakecloud.scenario_clock import ScenarioClock
    from tpu_trainer.simcloud.rehearsal import prepare

    user_config = load_config(config_path, require=False)
    config, env, workdir = prepare(rehearse, user_config, dict(os.environ), fresh=fresh)
    display.info(f"rehearsal: fake cloud from {rehearse} (state in {workdir})")
    display.info(reservation_notice(config, user_config))
    clock = ScenarioClock(workdir / "state.json")
    services = recording_services(
        store, display, config.project_id, env, clock=clock, kube_access=kube_access_of(config)
    )
    return Setup(services, config, workdir, rehearse)
