"""The hang watchdog in the local launcher: a program that stops printing is stopped, and the
run ends FAILED with the watchdog's message."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import pytest

from conftest import CONFIG
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.app.stages import Stages
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.launchers.local.run import LocalRun
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.store.db import RunStatus, RunStore

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "local" / "tiny-llama"


@dataclass
class _SilentProgram(LocalRun):
    """The local launcher with a program that prints two lines, then nothing for a minute."""

    def _program(self, stages: Stages) -> list[str]:
        stages.start("runtime")
        stages.done("runtime")
        script = "import time; print('starting', flush=True); print('compiling', flush=True); "
        return [sys.executable, "-c", script + "time.sleep(60)"]

    def _watch(self) -> LogWatch:
        watch = super()._watch()
        watch.tick_s = 0.1
        return watch


def test_a_local_program_that_stops_printing_is_stopped_and_the_run_fails(
    tmp_path: Path,
) -> None:
    plan = plan_request(
        Request(str(EXAMPLE), config_path=CONFIG),
        PlanOptions(user="t", now=datetime(2026, 11, 22), profiler=None),
    )
    plan = replace(plan, config=replace(plan.config, first_step_deadline=1.0))
    store = RunStore(tmp_path / "store" / "runs.db")
    run = _SilentProgram(
        store, SubprocessRunner(), SilentDisplay(), plan, str(EXAMPLE), run_id="hang0001"
    )
    started = datetime.now()
    outcome = run.start()
    took = (datetime.now() - started).total_seconds()
    assert outcome.status is RunStatus.FAILED
    assert outcome.error is not None
    assert outcome.error.startswith("no first step within 1 s (start-up deadline: configured")
    assert took < 20, "the silent program was not stopped by the watchdog"
    row = store.run("hang0001")
    assert row is not None and row.error == outcome.error
    stages = {name: (status, detail) for name, status, _, _, detail in store.stages("hang0001")}
    assert stages["train"][0] == "failed" and "no first step" in (stages["train"][1] or "")
    assert (
        (tmp_path / "store" / "runs" / "hang0001" / "worker0.log")
        .read_text()
        .startswith("starting\ncompiling\n")
    )
