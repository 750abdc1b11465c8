"""The embedded default: a recipe trained with real MaxText on this machine's CPU, through the
same follow -> metrics -> report -> store path as a run on TPUs."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from tpu_trainer.app.display import Display
from tpu_trainer.app.ending import interruption_in_log, steps_of
from tpu_trainer.app.launcher import Launcher, RunRecord
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.results import (
    Ending,
    Recorded,
    Versions,
    package_versions,
    record_results,
)
from tpu_trainer.app.stages import Stages
from tpu_trainer.app.step_display import StepDisplay
from tpu_trainer.app.watchdog import Hang
from tpu_trainer.app.watchdog_run import LogWatch, plan_watchdog
from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.configs import MaxTextConfigs
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.frameworks.maxtext.scale_down import ScaledArgs, scale_down
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.plan.diagnose import LiveScanner, Match
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.slices import Slice
from tpu_trainer.recipes.shell_words import Lit, Word
from tpu_trainer.runtime.manager import MAXTEXT, install
from tpu_trainer.store.db import RunStatus, RunStore

ENTRY_MODULE = "maxtext.trainers.pre_train.train"
"""MaxText 0.2.5's trainer (older recipes name ``MaxText.train``, gone from 0.2.5)."""
# Arguments the local run sets itself (the TPU recipe's values mean nothing on this machine).
_LOCAL_KEYS = (
    "run_name",
    "base_output_directory",
    "hardware",
    "skip_jax_distributed_system",
    "profiler",
    "profiler_steps",
    "skip_first_n_steps_for_profiler",
    "profile_periodically_period",
)


def base_config(maxtext_dir: Path, recipe_base: str | None) -> Path:
    """The recipe's base config (``maxtext/configs/base.yml``) inside the installed package."""
    relative = (recipe_base or "configs/base.yml").split("configs/", 1)[-1]
    return maxtext_dir / "configs" / relative


def local_args(plan: Plan, run_dir: Path, run_id: str) -> list[str]:
    """The recipe's MaxText arguments for a CPU run (pure)."""
    kept = [
        plan.expand(a) for a in plan.program_arg_texts if a.partition("=")[0] not in _LOCAL_KEYS
    ]
    return [
        *kept,
        # a prefix, because MaxText reads a bare id such as 662482e3 as the number 662482000.0
        f"run_name=tpt-{run_id}",
        f"base_output_directory={run_dir / 'output'}",
        "hardware=cpu",
        "skip_jax_distributed_system=true",
    ]


CPU_SLICE = Slice.parse("cpu-1")


def scaled_args(plan: Plan, configs: MaxTextConfigs | None = None) -> ScaledArgs:
    """The plan's MaxText arguments scaled down for this CPU, read against MaxText's own
    configuration files (the installed runtime's, else the wheel's); ``--set`` keys are kept."""
    configs = configs or MaxTextConfigs.load()
    request = MaxTextRequest.from_plan(plan)
    return scale_down(
        [plan.expand(a) for a in plan.program_arg_texts],
        configs.effective(request.args),
        configs.keys,
        fixed={c.key for c in plan.arg_changes if c.why == "--set"},
    )


@dataclass
class LocalRun(Launcher):
    """The local launcher: (scale-down) -> runtime -> train -> results, on this machine."""

    launch_path = LaunchPath.LOCAL
    store: RunStore
    runner: CommandRunner
    display: Display
    plan: Plan
    request: str
    lang: str = "zh"
    run_id: str = field(kw_only=True)
    versions: Versions = field(default_factory=Versions)
    scaled: ScaledArgs | None = None
    """A TPU recipe's arguments scaled down for this CPU (``--scale-down``); the run is then
    recorded on cpu-1, its report says so."""
    clock: Clock = SYSTEM_CLOCK
    """The time the hang watchdog reads."""
    hang: Hang | None = field(default=None, init=False)
    """The watchdog's verdict when MaxText stopped printing steps."""

    @property
    def cpu_plan(self) -> Plan:
        """The plan as it runs here: a scaled-down run is a cpu-1 run of the same model with
        the scaled arguments (what its metrics and report are computed from)."""
        if self.scaled is None:
            return self.plan
        words = tuple(Word((Lit(text),), 0) for text in self.scaled.args)
        return replace(self.plan, slice=CPU_SLICE, num_slices=1, program_args=words)

    def _stored_plan(self) -> dict[str, object]:
        stored: dict[str, object] = dict(plan_json(self.plan))
        if self.scaled is not None:
            stored["scale_down"] = {
                "from_device_type": self.plan.slice.device_type,
                "from_num_slices": self.plan.num_slices,
                **self.scaled.to_json(),
            }
        return stored

    # ---- the template's parts ------------------------------------------------------------
    def _record(self) -> RunRecord:
        plan = self.cpu_plan
        return RunRecord(
            model=plan.model,
            device_type=plan.slice.device_type,
            precision=plan.precision.value,
            plan_json=self._stored_plan(),
        )

    def _headline(self) -> str:
        return f"run {self.run_id}: {self.plan.model} with MaxText on this machine's CPU" + (
            f", scaled down from {self.plan.slice.device_type}" if self.scaled else ""
        )

    def _teardown(self) -> None:
        return None  # nothing is made that outlives the process

    def _launch(self, *, outcome: RunOutcome) -> None:
        stages = self.stages
        self._show_scale_down(stages)
        code, fatal = self._train(stages)
        cut_short = None
        if code == 0 and not fatal:
            cut_short = interruption_in_log(self.run_dir / "worker0.log", steps_of(self.cpu_plan))
        status = RunStatus.SUCCEEDED
        if fatal or code != 0 or self.hang is not None:
            status = RunStatus.FAILED
        elif cut_short is not None:
            status = RunStatus.INTERRUPTED
        recorded = self._record_results(stages, self.cpu_plan, Ending(status, cut_short))
        if recorded is not None:
            outcome.metrics, outcome.readme = recorded.metrics, recorded.readme
        if self.hang is not None:
            outcome.error = self.hang.message
        elif fatal:
            outcome.error = f"{fatal[0].title}: {fatal[0].excerpt} — fix: {fatal[0].fix}"
        elif code != 0:
            outcome.error = f"MaxText exited with {code}"
        else:
            outcome.error = cut_short
        self.store.finish_run(self.run_id, status, outcome.error)

    # ---- steps ---------------------------------------------------------------------------
    def _show_scale_down(self, stages: Stages) -> None:
        if self.scaled is None:
            return
        stages.start("scale-down")
        for change in self.scaled.changes:
            self.display.info("  " + change.describe())
        for key in self.scaled.unknown:
            self.display.warn(
                f"{key}: not in MaxText {MAXTEXT.version}'s base.yml; it may refuse it"
            )
        stages.done(
            "scale-down", detail=f"{self.scaled.summary}; {len(self.scaled.changes)} changes"
        )

    def _record_results(self, stages: Stages, plan: Plan, ending: Ending) -> Recorded | None:
        """Metrics into the store and the README section; a scaled-down run's row says what
        it was."""
        note = (
            ""
            if self.scaled is None
            else f"scale-down of {self.plan.slice.device_type} on CPU: {self.scaled.summary}"
        )
        log = self.run_dir / "worker0.log"
        return record_results(stages, plan, log, self.lang, self.versions, note, ending)

    @staticmethod
    def _versions(site_packages: Path) -> Versions:
        """Versions read from the runtime's package metadata (no interpreter start-up)."""
        found = package_versions([str(site_packages)])
        return Versions(
            framework=found.get("maxtext", MAXTEXT.version),
            jax=found.get("jax", ""),
            libtpu=found.get("libtpu", ""),
        )

    def _program(self, stages: Stages) -> list[str]:
        """The runtime (installed once), then MaxText's trainer command for this run."""
        stages.start("runtime")
        python = install(MAXTEXT, self.runner, self.display.info)
        maxtext_dir = next(python.parent.parent.glob("lib/python*/site-packages/maxtext"), None)
        if maxtext_dir is None:
            raise TpuTrainerError(
                f"the {MAXTEXT.key} runtime has no maxtext package",
                fix=f"`tpu-trainer runtime remove {MAXTEXT.key}`, then run again",
            )
        self.versions = self._versions(maxtext_dir.parent)
        stages.done("runtime", detail=str(python))
        return [
            str(python),
            "-m",
            ENTRY_MODULE,
            str(base_config(maxtext_dir, self.plan.recipe.entry.base_config)),
            *local_args(self.cpu_plan, self.run_dir, self.run_id),
        ]

    def _watch(self) -> LogWatch:
        """The hang watchdog: the start-up deadline as configured (``first_step_deadline``),
        else from this model's earlier CPU runs, else the default."""
        settings = plan_watchdog(self.store, self.cpu_plan, CPU_SLICE.device_type)
        return LogWatch(settings, clock=self.clock)

    def _train(self, stages: Stages) -> tuple[int, list[Match]]:
        argv = self._program(stages)
        stages.start("train")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        cancel, done = threading.Event(), threading.Event()
        fatal: list[Match] = []
        scanner = LiveScanner()
        redact = Redactor()
        steps = StepDisplay(self.display)
        watch = self._watch()
        with (self.run_dir / "worker0.log").open("w", encoding="utf-8") as log:

            def on_line(_: str, line: str) -> None:
                log.write(redact(line) + "\n")
                steps(line)
                watch.feed("worker 0", line)
                scanner.feed(line)
                if not fatal and scanner.fatal:
                    fatal.extend(scanner.fatal)
                    cancel.set()

            watch.start(cancel, done)
            try:
                result = self.runner.run(
                    argv,
                    on_line=on_line,
                    cancel=cancel,
                    timeout=24 * 3600,
                    env={"JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"},
                )
            finally:
                done.set()
        self.hang = watch.hang
        if self.hang is not None:
            self.display.warn(f"watchdog: {self.hang.message}; MaxText was stopped")
        stages.done(
            "train",
            "ok" if result.ok and not fatal and self.hang is None else "failed",
            self.hang.message
            if self.hang is not None
            else f"exit {result.code}, {steps.lines} log lines",
        )
        return result.code, fatal
