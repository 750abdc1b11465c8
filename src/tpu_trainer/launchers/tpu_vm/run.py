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
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.app.display import Display
from tpu_trainer.app.guard import RunTeardown
from tpu_trainer.app.launcher import Launcher, RunRecord
from tpu_trainer.app.live_steps import LiveSteps
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.results import Versions, record_results, store_metrics
from tpu_trainer.app.watchdog import WatchdogSettings
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.frameworks.vm_program import LogFormat, VmProgram, remote_run_dir
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandResult, CommandRunner
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.launchers.tpu_vm.follow import (
    READERS,
    STEP_PARSERS,
    TrainFollower,
    WorkerLogTail,
)
from tpu_trainer.launchers.tpu_vm.provision import VmProvisioner
from tpu_trainer.launchers.tpu_vm.remote import (
    device_check_command,
    device_problems,
    failed_workers,
    install_command,
    stop_command,
    train_command,
)
from tpu_trainer.launchers.tpu_vm.spec import TpuVmSpec
from tpu_trainer.launchers.tpu_vm.teardown import TpuVmTeardown
from tpu_trainer.metrics.summary import summarize
from tpu_trainer.plan.diagnose import diagnose
from tpu_trainer.plan.plan import Plan
from tpu_trainer.store.db import RunStatus, RunStore

TAIL_LINES = 15


@dataclass(frozen=True, slots=True, kw_only=True)
class SshOutcome:
    """A command run on every worker: gcloud's result, each worker's (redacted) output, and the
    workers that exited non-zero."""

    result: CommandResult
    logs: dict[int, str]
    failed: dict[int, int]


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
    _training: bool = False

    @property
    def cloud(self) -> TpuVmCloud:
        return TpuVmCloud(self.runner)

    @property
    def redact(self) -> Redactor:
        return Redactor(env=self.env)

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

    def _launch(self, *, outcome: RunOutcome) -> None:
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
        self._install()
        self._check_devices()
        self._train()
        self._results(outcome)

    # ---- steps -------------------------------------------------------------------------------
    def _install(self) -> None:
        stages = self.stages
        stages.start("install")
        out = self._ssh(
            install_command(self.program, self.run_id), "install", self.install_timeout_s
        )
        if out.failed or not out.result.ok:
            message, fix = self._worker_failure("install", out)
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
        out = self._ssh(device_check_command(self.program), "devices", 600)
        problems = device_problems(out.logs, self.vm.slice)
        if problems or out.failed:
            worker = min(out.failed) if out.failed else 0
            found = diagnose(out.logs.get(worker, "").splitlines())
            fix = found[0].fix if found else "check the runtime version and the install log"
            message = "device check failed: " + "; ".join(problems or ["see the log"])
            stages.done("devices", "failed", message)
            raise TpuTrainerError(message, fix=fix)
        per_host = self.vm.slice.jax_devices // self.vm.workers
        stages.done("devices", detail=f"{self.vm.workers} workers x {per_host} JAX devices")

    def _train(self) -> None:
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
        )
        send = {n: self.env[n] for n in self.program.secret_env if self.env.get(n)}
        self._training = True
        done = threading.Event()
        follower.start_watchdog(done)
        try:
            out = self._ssh(
                train_command(self.program, self.run_id),
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
        hang = follower.watch.hang if follower.watch is not None else None
        if hang is not None:
            message = hang.message
        elif follower.fatal or out.failed or not out.result.ok:
            first = follower.fatal[0][0] if follower.fatal else None
            message, _ = self._worker_failure("training", out, first)
        else:
            self._training = False
            stages.done("train", detail=f"{follower.lines} log lines from worker 0")
            self.store.finish_run(self.run_id, RunStatus.SUCCEEDED)
            return
        self._training = False
        stages.done("train", "failed", message[:2000])
        self.store.finish_run(self.run_id, RunStatus.FAILED, message[:4000])
        self.display.warn(message)

    def _watch(self) -> LogWatch | None:
        if self.watchdog is None:
            return None
        parse = STEP_PARSERS[self.program.log_format]
        return LogWatch(self.watchdog, clock=self.clock, parse=parse)

    def _results(self, outcome: RunOutcome) -> None:
        log = self.run_dir / "worker0.log"
        if self.plan is not None and self.program.log_format is LogFormat.MAXTEXT:
            versions = Versions(framework=self.program.version)
            recorded = record_results(self.stages, self.plan, log, self.lang, versions)
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
            self._ssh(stop_command(self.run_id), "stop", 120)
        except Exception as e:  # deleting the VM stops it anyway
            self.display.warn(f"could not stop the program on the workers: {e}")

    # ---- helpers -----------------------------------------------------------------------------
    def _ssh(
        self,
        command: str,
        label: str,
        timeout: float,
        *,
        follow: Callable[[int, str], None] | None = None,
        cancel: threading.Event | None = None,
        send_env: Mapping[str, str] | None = None,
    ) -> SshOutcome:
        """Run ``command`` on every worker; each worker's output, redacted, is kept in
        ``runs/<run>/<label>/<worker>.log`` (gcloud's own files live in a private temporary
        folder that is removed at once)."""
        tmp = Path(tempfile.mkdtemp(prefix=f"tpt-{label}-"))
        tail = WorkerLogTail(tmp, self.vm.workers, follow) if follow is not None else None

        def on_line(stream: str, line: str) -> None:
            if stream == "stderr" and cancel is not None and failed_workers(line):
                cancel.set()  # one worker is gone: stop the others now

        try:
            if tail is not None:
                tail.start()
            try:
                result = self.cloud.ssh(
                    self.vm,
                    command,
                    str(tmp),
                    timeout=timeout,
                    send_env=send_env,
                    cancel=cancel,
                    on_line=on_line,
                )
            finally:
                if tail is not None:
                    tail.stop()  # the last lines too, even when interrupted
            logs = self._keep_logs(tmp, label)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        failed = failed_workers(result.stderr)
        return SshOutcome(result=result, logs=logs, failed=failed)

    def _keep_logs(self, tmp: Path, label: str) -> dict[int, str]:
        folder = self.run_dir / label
        folder.mkdir(parents=True, exist_ok=True)
        logs: dict[int, str] = {}
        for worker in range(self.vm.workers):
            path = tmp / f"{worker}.log"
            if not path.exists():
                continue
            text = self.redact(path.read_text(encoding="utf-8", errors="replace"))
            (folder / f"{worker}.log").write_text(text, encoding="utf-8")
            logs[worker] = text
        return logs

    def _worker_failure(
        self, what: str, out: SshOutcome, worker: int | None = None
    ) -> tuple[str, str]:
        """The message and fix of a command that failed on a worker (``worker``, else the
        first that exited non-zero) or in gcloud itself: the diagnosis and the log's tail."""
        if worker is None and out.failed:
            worker = min(out.failed)
        if worker is None:
            text = self.redact(out.result.text())
            lines = [ln for ln in text.splitlines() if ln.strip()][-5:]
            return (
                f"{what} failed (gcloud exit {out.result.code}): " + " | ".join(lines),
                "see `tpu-trainer show RUN` for the commands run",
            )
        log = out.logs.get(worker, "")
        tail = [ln for ln in log.splitlines() if ln.strip()][-TAIL_LINES:]
        found = [m for m in diagnose(log.splitlines()) if m.severity == "fatal"]
        code = out.failed.get(worker)
        head = f"{what} failed on worker {worker} ({'exit ' + str(code) if code else 'stopped'})"
        if found:
            head += f": {found[0].title} — fix: {found[0].fix}"
        where = self.run_dir / ("train" if what == "training" else what) / f"{worker}.log"
        message = head + "\n" + "\n".join(tail)
        return message, found[0].fix if found else f"see {where}"
