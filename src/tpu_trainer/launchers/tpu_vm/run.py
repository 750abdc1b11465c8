"""One run on a TPU VM: create -> wait READY -> install -> device check -> train on every
worker -> collect -> delete (always).

Every gcloud call goes through the one command runner; the commands sent to the workers are
fixed templates (:mod:`tpu_trainer.launchers.tpu_vm.remote`). Worker 0's log goes through the same
metrics -> store (-> README, for a recipe's plan) path as every other run; every worker's log is
kept under ``runs/<run>/``. One worker's non-zero exit or one fatal line on any worker stops the
run: it is recorded as failed with that worker's log tail and the diagnosis, and the VM is
deleted all the same. Secrets travel in the environment only and are redacted from every file.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from tpu_trainer.app.display import Display
from tpu_trainer.app.ending import cut_in_log
from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.app.launcher import Launcher, RunRecord
from tpu_trainer.app.live_steps import LiveSteps
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.results import Versions, record_results, store_metrics
from tpu_trainer.app.resume import (
    FAILED,
    FINISHED,
    Budgets,
    SegmentBook,
    SegmentOutcome,
    running_again,
    stopped_run,
    transient_failure,
)
from tpu_trainer.app.watchdog import WatchdogSettings
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.frameworks.maxtext.ending import requested_steps
from tpu_trainer.frameworks.vm_program import LogFormat, VmProgram, remote_run_dir
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.launchers.tpu_vm.ending import (
    SshOutcome,
    device_check_fix,
    taken_back,
    worker_failure,
)
from tpu_trainer.launchers.tpu_vm.follow import (
    READERS,
    STEP_PARSERS,
    TrainFollower,
)
from tpu_trainer.launchers.tpu_vm.provision import VmProvisioner
from tpu_trainer.launchers.tpu_vm.remote import (
    Left,
    ProgramLeft,
    attach_command,
    device_check_command,
    device_problems,
    install_command,
    left_command,
    program_left,
    stop_command,
    train_command,
)
from tpu_trainer.launchers.tpu_vm.resume import VmLeft, vm_left
from tpu_trainer.launchers.tpu_vm.spec import TpuVmSpec
from tpu_trainer.launchers.tpu_vm.teardown import TpuVmTeardown
from tpu_trainer.launchers.tpu_vm.workers import WorkerShell
from tpu_trainer.metrics.summary import summarize
from tpu_trainer.plan.plan import Plan
from tpu_trainer.store.db import RunStatus, RunStore


@dataclass
class TpuVmRun(Launcher):
    """The TPU VM launcher: provision -> install -> devices -> train -> results."""

    launch_path = LaunchPath.TPU_VM
    reports_stored_error = True
    store: RunStore
    runner: CommandRunner
    display: Display
    vm: TpuVmSpec
    program: VmProgram
    request: str
    model: str
    precision: Precision = Precision.BF16
    plan: Plan | None = None
    """A recipe's plan: with a MaxText program its run also gets the model README section."""
    lang: str = "zh"
    run_id: str = field(kw_only=True)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    """Where the secrets (``program.secret_env``) are read from."""
    poll_seconds: float = 15.0
    watchdog: WatchdogSettings | None = None
    """The hang watchdog's settings (None: no watchdog)."""
    clock: Clock = SYSTEM_CLOCK
    """The time the watchdog reads (a rehearsal's: the scenario's clock)."""
    ready_timeout_s: float = 3600.0
    install_timeout_s: float = 3600.0
    train_timeout_s: float = 24 * 3600.0
    sleep: Callable[[float], None] = time.sleep
    auto_resume: int = 0
    """How many preemptions the run resumes after (a VM made again, MaxText restoring)."""
    error_retries: int = 0
    """How many transient errors (as the diagnosis marks them) the run retries."""
    _training: bool = False
    _book: SegmentBook | None = None

    @property
    def book(self) -> SegmentBook:
        if self._book is None:
            self._book = SegmentBook(self.store, self.run_id, self.run_dir / "worker0.log")
        return self._book

    @property
    def cloud(self) -> TpuVmCloud:
        return TpuVmCloud(self.runner)

    @property
    def redact(self) -> Redactor:
        return Redactor(env=self.env)

    @property
    def shell(self) -> WorkerShell:
        """Commands on every worker, each worker's output kept under the run's folder."""
        return WorkerShell(self.cloud, self.vm, self.run_dir, self.redact)

    # ---- the template's parts ------------------------------------------------------------
    def _check(self) -> None:
        missing = [n for n in self.program.required_secrets if not self.env.get(n)]
        if missing:
            raise InputError(
                f"{', '.join(missing)} not set: {self.program.framework} needs it on the workers",
                fix=f"export {missing[0]}=... in this shell (it is passed through the "
                "environment only, never written anywhere)",
            )

    def _record(self) -> RunRecord:
        vm = self.vm
        return RunRecord(
            model=self.model,
            device_type=vm.slice.device_type,
            precision=self.precision.value,
            project=vm.project,
            region=vm.zone.rsplit("-", 1)[0],
            zone=vm.zone,
            plan_json=self._plan_json(),
        )

    def _headline(self) -> str:
        return f"run {self.run_id}: {self.model} with {self.program.framework} on TPU VM {self.vm.name}"

    def _new_outcome(self) -> RunOutcome:
        return RunOutcome(self.run_id, RunStatus.RUNNING, zone=self.vm.zone)

    def _teardown(self) -> RunTeardown:
        return TpuVmTeardown(self.store, self.cloud, self.display)

    def _plan_json(self) -> dict[str, Any]:
        vm, program = self.vm, self.program
        data: dict[str, Any] = plan_json(self.plan) if self.plan is not None else {}
        data["tpu_vm"] = {
            "name": vm.name,
            "zone": vm.zone,
            "accelerator_type": vm.accelerator_type,
            "runtime_version": vm.runtime_version,
            "provisioning": vm.provisioning.value,
            "queued": vm.queued,
            "workers": vm.workers,
        }
        data["program"] = {
            "framework": program.framework,
            "version": program.version,
            "requirements": list(program.requirements),
            "files": [f.name for f in program.files],
            "args": [self.redact(a) for a in program.args],
            "env": {k: self.redact(v) for k, v in program.env},
            "secret_env": list(program.secret_env),
        }
        return data

    def _launch(
        self, *, outcome: RunOutcome, on_vm: bool = False, held: tuple[int, ...] | None = None
    ) -> None:
        """One segment, then one more after each preemption (or transient error) while its
        budget lasts: the preempted VM is deleted, made again as the first time, and the
        program runs again with the same arguments (MaxText's ``run_name``), so MaxText
        restores its last durable checkpoint. ``on_vm``: the first segment runs on the VM
        the run already has; ``held``: the first segment is the open one whose program still
        runs (or ended) on that VM, followed again (:meth:`SegmentBook.reattach`)."""
        budgets = Budgets(self.auto_resume, self.error_retries)
        while True:
            if held is None:
                if not on_vm:
                    self._provision()
                self._install()
                self._check_devices()
                self.book.begin(self.vm.zone)
            end = self._train(held)
            on_vm, held = False, None
            self.book.end(end)
            if not budgets.allow(end):
                break
            self.book.carry_on(end, self.display, self._teardown())
        self._results(outcome)

    def resume(self) -> RunOutcome:
        """Carry on a run whose process died, or that ended interrupted. While the cloud
        reads the run's VM READY and the program the dead process started is still there
        (running, or ended with its exit status), its segment carries on: the program is
        followed again from the first line of its log on the workers. Otherwise a new segment
        with the same ``run_name`` (MaxText restores its last durable checkpoint), on the
        run's VM while it is READY, else on a VM made again."""
        row = stopped_run(self.store, self.run_id)
        if row.status is RunStatus.SUCCEEDED:
            raise InputError(f"run {self.run_id} succeeded: there is nothing to resume")
        running_again(self.store, self.run_id)
        left = vm_left(self.store, self.cloud, self.run_id, self.vm)
        program = self._program_left() if left.reusable else ProgramLeft(Left.NONE)
        held = self.book.reattach(program.segment) if program.state is not Left.NONE else None
        if held is None:
            self.book.pick_up()
        self.display.info(f"resuming run {self.run_id}: {self._resume_says(left, program, held)}")
        outcome = self._new_outcome()

        def body() -> None:
            if held is None and program.state is Left.RUNNING:
                self._stop_left_program()
            elif not left.reusable and left.recorded:
                self._teardown().run(self.run_id)
            self._launch(outcome=outcome, on_vm=left.reusable, held=held)

        return self._guarded(outcome, body)

    def _program_left(self) -> ProgramLeft:
        """The program an earlier process started on the VM: running, ended, or not there."""
        return program_left(self.shell.run(left_command(self.run_id), "probe", 120).logs)

    def _resume_says(self, left: VmLeft, program: ProgramLeft, held: tuple[int, ...] | None) -> str:
        if held is None:
            return left.say(self.vm.name)
        how = "still runs" if program.state is Left.RUNNING else "ended"
        return (
            f"TPU VM {self.vm.name} is still READY and {self.program.framework} {how} there: "
            f"following it again in segment {self.book.n} (its log on the workers, from the "
            "first line)"
        )

    def _stop_left_program(self) -> None:
        """Stop a program an earlier process started on the VM that no open segment follows."""
        self.display.warn(
            f"{self.program.framework} still runs on {self.vm.name} outside any open segment "
            "of the run: stopping it (MaxText restores its last durable checkpoint in the next "
            "segment)"
        )
        self._training = True
        self._stop()

    def _provision(self) -> None:
        stages = self.stages
        stages.start("provision")
        try:
            node = VmProvisioner(
                self.store,
                self.cloud,
                self.display,
                self.run_id,
                self.vm,
                poll_seconds=self.poll_seconds,
                timeout_s=self.ready_timeout_s,
                sleep=self.sleep,
            ).provision()
        except TpuTrainerError as e:
            stages.done("provision", "failed", e.message[:2000])
            raise
        stages.done("provision", detail=f"{node.name} READY, {len(node.workers)} workers")

    # ---- steps -------------------------------------------------------------------------------
    def _install(self) -> None:
        stages = self.stages
        stages.start("install")
        out = self.shell.run(
            install_command(self.program, self.run_id), "install", self.install_timeout_s
        )
        if out.failed or not out.result.ok:
            message, fix = worker_failure(self.run_dir, self.redact, "install", out)
            stages.done("install", "failed", message)
            raise TpuTrainerError(message, fix=fix)
        if self.program.files:
            folder = self.run_dir / "files"
            folder.mkdir(parents=True, exist_ok=True)
            paths = []
            for f in self.program.files:
                path = folder / f.name
                path.write_text(self.redact(f.text), encoding="utf-8")
                paths.append(str(path))
            result = self.cloud.scp(self.vm, paths, remote_run_dir(self.run_id))
            if not result.ok:
                stages.done("install", "failed", result.text()[-500:])
                raise TpuTrainerError(
                    f"copying {len(paths)} file(s) to the workers failed (exit {result.code})",
                    fix="see `tpu-trainer show RUN` for gcloud's message",
                )
        stages.done("install", detail=", ".join(self.program.requirements))

    def _check_devices(self) -> None:
        stages = self.stages
        stages.start("devices")
        out = self.shell.run(device_check_command(self.program), "devices", 600)
        problems = device_problems(out.logs, self.vm.slice)
        if problems or out.failed:
            named = [int(w) for w in re.findall(r"^worker (\d+)", "\n".join(problems), re.M)]
            worker = min(out.failed) if out.failed else min(named, default=0)
            log = self.run_dir / "install" / f"{worker}.log"
            fix = device_check_fix(out.logs.get(worker, ""), log)
            message = "device check failed: " + "; ".join(problems or ["see the log"])
            stages.done("devices", "failed", message)
            raise TpuTrainerError(message, fix=fix)
        per_host = self.vm.slice.jax_devices // self.vm.workers
        stages.done("devices", detail=f"{self.vm.workers} workers x {per_host} JAX devices")

    def _train(self, held: tuple[int, ...] | None = None) -> SegmentOutcome:
        """Start the program on every worker and follow it to its end; with ``held``, follow
        again the one already started (its first ``held[0]`` lines already kept)."""
        stages = self.stages
        stages.start("train")
        cancel = threading.Event()
        follower = TrainFollower(
            self.display,
            self.program.log_format,
            self.run_dir / "worker0.log",
            self.redact,
            cancel,
            watch=self._watch(),
            live=LiveSteps(self.store, self.run_id),
            on_worker0=self.book.on_line,
            held=held[0] if held else 0,
        )
        command = (
            train_command(self.program, self.run_id, self.book.n)
            if held is None
            else attach_command(self.run_id)
        )
        send = {n: self.env[n] for n in self.program.secret_env if self.env.get(n)}
        self._training = True
        done = threading.Event()
        follower.start_watchdog(done)
        try:
            out = self.shell.run(
                command,
                "train",
                self.train_timeout_s,
                follow=follower,
                cancel=cancel,
                send_env=send,
            )
        finally:
            done.set()
            follower.close()
        if cancel.is_set():
            self._stop()  # one worker failed or hung: the others may still run
        self._training = False
        end = self._judge(follower, out)
        if end.cut is not None:
            stages.done("train", "interrupted", end.message[:2000])
            self.store.finish_run(self.run_id, RunStatus.INTERRUPTED, end.message[:4000])
            self.display.warn(f"training ended but was {end.message}")
        elif end.cause is None:
            stages.done("train", detail=f"{follower.lines} log lines from worker 0")
            self.store.finish_run(self.run_id, RunStatus.SUCCEEDED)
        else:
            stages.done("train", "failed", end.message[:2000])
            self.store.finish_run(self.run_id, RunStatus.FAILED, end.message[:4000])
            self.display.warn(end.message)
        return end

    def _judge(self, follower: TrainFollower, out: SshOutcome) -> SegmentOutcome:
        """How training ended: a hang, a preemption (the VM reads PREEMPTED, or MaxText logged
        its SIGTERM stop), a failure, a clean exit short of the last step, or the end."""
        hang = follower.watch.hang if follower.watch is not None else None
        if hang is not None:
            return SegmentOutcome(cause="failed", message=hang.message)
        failed = bool(follower.fatal or out.failed or not out.result.ok)
        log, steps = self.run_dir / "worker0.log", self._steps()
        cut = cut_in_log(log, steps, self.book.start) if not failed else None
        if failed or cut is not None:
            taken = taken_back(self.cloud, self.vm)
            if taken is not None:
                cut = cut_in_log(log, steps, self.book.start, cloud_says=taken)
        if cut is not None:
            return SegmentOutcome(cut=cut, message=cut.message)
        if not failed:
            return FINISHED
        first = follower.fatal[0][0] if follower.fatal else None
        message, _ = worker_failure(self.run_dir, self.redact, "training", out, first)
        found = follower.fatal[0][1] if follower.fatal else None
        if found is not None and found.transient:  # the segment says why it is retried
            return transient_failure(found.title, message)
        return replace(FAILED, message=message)

    def _steps(self) -> int | None:
        """The steps a MaxText command asks for (other programs are not judged by steps)."""
        if self.program.log_format is not LogFormat.MAXTEXT:
            return None
        return requested_steps(self.program.args)

    def _watch(self) -> LogWatch | None:
        if self.watchdog is None:
            return None
        parse = STEP_PARSERS[self.program.log_format]
        return LogWatch(self.watchdog, clock=self.clock, parse=parse)

    def _results(self, outcome: RunOutcome) -> None:
        log = self.run_dir / "worker0.log"
        note = self.book.summary()
        if note:
            self.display.info(note)
        if self.plan is not None and self.program.log_format is LogFormat.MAXTEXT:
            versions = Versions(framework=self.program.version)
            recorded = record_results(self.stages, self.plan, log, self.lang, versions, note)
            if recorded is not None:
                outcome.metrics, outcome.readme = recorded.metrics, recorded.readme
            return
        if not log.exists():
            return
        stages = self.stages
        stages.start("collect")
        with log.open(encoding="utf-8", errors="replace") as f:
            parsed = READERS[self.program.log_format](f)
        metrics = summarize(
            parsed.steps,
            slice=self.vm.slice,
            precision=self.precision,
            profiler_skip=None,
            profiler_steps=None,
            hidden_steps=parsed.hidden_steps,
            startup=parsed.startup,
        )
        store_metrics(self.store, self.run_id, metrics)
        outcome.metrics = metrics.to_json()
        stages.done("collect", detail=f"{metrics.steps_completed} steps")

    def _stop(self) -> None:
        """Stop the program on every worker by the process id it recorded."""
        if not self._training:
            return
        self._training = False
        self.display.info(f"stopping {self.program.framework} on every worker")
        try:
            self.shell.run(stop_command(self.run_id), "stop", 120)
        except Exception as e:  # deleting the VM stops it anyway
            self.display.warn(f"could not stop the program on the workers: {e}")

    # ---- helpers -----------------------------------------------------------------------------
