"""Following a workload on GKE: wait for its pods, stream worker 0's log, watch for fatal errors.

A fatal error in any log (out of memory, mesh, topology, StopIteration, a config error) ends
the wait at once, so the run can be diagnosed and torn down within seconds instead of hours.
The hang watchdog is fed worker 0's stream and the other hosts' new lines from each look at
their last lines (one ``kubectl logs --selector --prefix --tail --timestamps`` for all the
pods, every 4 polls, and once more when the watchdog sees a hang, before it decides), each line
at the time its log says it was written: it names the host that went quiet first.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.app.display import Display
from tpu_trainer.app.live_steps import LiveSteps
from tpu_trainer.app.watchdog import Hang
from tpu_trainer.app.watchdog_run import LogWatch
from tpu_trainer.frameworks.maxtext.log import parse_completed
from tpu_trainer.infra.kubectl import Kubectl, split_prefix, split_timestamp, tails_argv
from tpu_trainer.infra.poll import SYSTEM_CLOCK, Clock, Pending, Tick, wait_until
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandFailed, CommandRunner
from tpu_trainer.launchers.gke.jobset import JobSetEnding, jobset_ending, suspended_message
from tpu_trainer.launchers.gke.pods import JOBSET_LABEL, PodView, ordered, summarize
from tpu_trainer.launchers.gke.scheduling import first_unscheduled, kueue_reason, workload_of
from tpu_trainer.metrics.records import StepRecord
from tpu_trainer.plan.diagnose import LiveScanner, Match, diagnose, has_fatal

KUEUE_WORKLOADS = "workloads.v1beta2.kueue.x-k8s.io"
"""Kueue's Workloads, named with their version: kubectl reads `workloads.kueue.x-k8s.io` as
resource `workloads`, version `kueue`, group `x-k8s.io` first, finds no such version in its
discovery cache and fetches the whole discovery again on every call."""
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
"""The label Kueue puts on a job's Workload: the job's (here the JobSet's) uid."""

LineHandler = Callable[[str], None]
_OTHER_HOSTS_TAIL = 400


@dataclass
class FollowResult:
    started: bool
    """All pods got past Pending."""
    stream_code: int | None
    fatal: list[Match] = field(default_factory=list)
    pods: list[PodView] = field(default_factory=list)
    message: str = ""
    hang: Hang | None = None
    """The watchdog's verdict when the run stopped making progress."""

    @property
    def failed_fast(self) -> bool:
        return bool(self.fatal) or self.hang is not None


@dataclass
class Follower:
    kubectl: Kubectl
    runner: CommandRunner
    display: Display
    workload: str
    expected_pods: int
    log_path: Path
    on_line: LineHandler
    poll_seconds: float = 15.0
    start_timeout_s: float = 6 * 3600.0
    schedule_timeout_s: float = 1800.0
    """How long the pods may stay unscheduled (not admitted by Kueue, or not placed)."""
    namespace: str = "default"
    clock: Clock = SYSTEM_CLOCK
    watch: LogWatch | None = None
    """The hang watchdog, fed worker 0's lines while they stream and the other hosts' new
    lines at each look at them."""
    live: LiveSteps | None = None
    """Where worker 0's steps go while they stream (the store, in batches)."""
    _ended: JobSetEnding | None = field(default=None, init=False)

    def run(self) -> FollowResult:
        pods, why = self._wait_started()
        if pods is None:
            return FollowResult(False, None, message=why)
        if not pods:
            return FollowResult(False, None, message="the workload has no pods")
        worker0 = pods[0]
        self.display.info(f"following {worker0.name} (container {worker0.main_container})")
        code, fatal = self._stream(worker0)
        hang = self.watch.hang if self.watch is not None else None
        if not fatal and hang is None:
            fatal = self._scan_others(pods[1:])
        return FollowResult(True, code, fatal, self._pods() or pods, hang=hang)

    # ---- pods -------------------------------------------------------------------------
    def _raw_pods(self) -> list[dict[str, Any]]:
        return self.kubectl.list_objects("pods", selector=f"{JOBSET_LABEL}={self.workload}")

    def _pods(self) -> list[PodView]:
        return ordered(self._raw_pods())

    def _wait_started(self) -> tuple[list[PodView] | None, str]:
        """Wait until every pod runs. Gives up after ``start_timeout_s``, or sooner when the
        pods stay unscheduled (Kueue or the scheduler) for ``schedule_timeout_s``: then the
        message carries the last reason given."""
        blocked_since: float | None = None

        def check(tick: Tick) -> tuple[list[PodView] | None, str] | Pending:
            nonlocal blocked_since
            if tick.elapsed >= self.start_timeout_s:
                return None, f"pods did not start within {self.start_timeout_s:.0f} s"
            raw = self._raw_pods()
            pods = ordered(raw)
            summary = summarize(pods, self.expected_pods)
            if summary.all_started or summary.finished:
                self.display.info(summary.line())
                return pods, ""
            blocker = self._blocker(raw)
            if blocker is None:
                blocked_since = None
            else:
                blocked_since = tick.elapsed if blocked_since is None else blocked_since
                if tick.elapsed - blocked_since >= self.schedule_timeout_s:
                    return None, (
                        f"{self.workload} was not scheduled within {self.schedule_timeout_s:.0f} "
                        f"s; last reason: {blocker}"
                    )
            return Pending(blocker or summary.line())

        return wait_until(
            check, interval=self.poll_seconds, on_tick=self.display.waiting, clock=self.clock
        )

    def _blocker(self, raw: list[dict[str, Any]]) -> str | None:
        """Why the pods are not placed yet: Kueue's reason while there are none, else the
        scheduler's for the first pod it cannot place; None while they are on their way."""
        if not raw:
            return self._not_admitted()
        found = first_unscheduled(raw)
        if found is None:
            return None
        pod, reason = found
        return f"the scheduler cannot place {pod}: {reason}"

    def _not_admitted(self) -> str:
        """Why there are no pods yet: Kueue's reason on the JobSet's Workload (found by the
        ``kueue.x-k8s.io/job-uid`` label Kueue gives it), else the JobSet's suspension."""
        jobset = self.kubectl.get("jobset", self.workload, self.namespace)
        reason = kueue_reason(self._kueue_workload(jobset))
        if reason is None:
            reason = suspended_message(jobset)
        if reason is not None:
            return f"Kueue has not admitted {self.workload}: {reason}"
        return f"waiting for Kueue to admit {self.workload} (no pods yet)"

    def _kueue_workload(self, jobset: dict[str, Any] | None) -> dict[str, Any] | None:
        uid = ((jobset or {}).get("metadata") or {}).get("uid")
        selector = f"{JOB_UID_LABEL}={uid}" if uid else None
        try:
            found = self.kubectl.list_objects(
                KUEUE_WORKLOADS, selector=selector, namespace=self.namespace
            )
        except CommandFailed:  # no Kueue API to ask: the JobSet still says it is suspended
            return None
        return workload_of(self.workload, found)

    def ending(self) -> JobSetEnding | None:
        """How the JobSet ended by its own conditions; None while running, or once deleted
        (a terminal condition, once read, is not asked for again: it does not change)."""
        if self._ended is None:
            try:
                self._ended = jobset_ending(
                    self.kubectl.get("jobset", self.workload, self.namespace)
                )
            except CommandFailed:
                return None
        return self._ended

    # ---- logs -------------------------------------------------------------------------
    def _stream(self, pod: PodView) -> tuple[int, list[Match]]:
        """Stream worker 0's log into the log file and the handler; stop at a fatal error."""
        cancel = threading.Event()
        done = threading.Event()
        fatal: list[Match] = []
        scanner = LiveScanner()
        redact = Redactor()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("a", encoding="utf-8") as log:

            def handle(stream: str, line: str) -> None:
                if stream != "stdout":
                    return
                log.write(redact(line) + "\n")
                self.on_line(line)
                self._live(line)
                self._watched(pod.host, line)
                scanner.feed(line)
                found = scanner.fatal
                if found and not fatal:
                    fatal.extend(found)
                    cancel.set()

            argv = self.kubectl.logs_argv(pod.name, pod.main_container, follow=True)
            watcher = threading.Thread(
                target=self._watch_others, args=(cancel, done, fatal), daemon=True
            )
            watcher.start()
            self._start_watchdog(cancel, done)
            try:
                result = self.runner.run(
                    argv, on_line=handle, cancel=cancel, timeout=30 * 24 * 3600
                )
            finally:
                done.set()
                watcher.join(timeout=5)
                if self.live is not None:
                    self.live.flush()
        return result.code, fatal

    def _live(self, line: str) -> None:
        if self.live is not None and "completed " in line:
            step = parse_completed(line)
            if isinstance(step, StepRecord):
                self.live.add(step)

    def _watched(self, host: str, line: str) -> None:
        if self.watch is not None:
            self.watch.feed(host, line)

    def _start_watchdog(self, cancel: threading.Event, done: threading.Event) -> None:
        """The hang watchdog beside the stream: a hang sets ``cancel`` like a fatal line."""
        if self.watch is not None:
            self.watch.start(cancel, done)

    def _watch_others(
        self, cancel: threading.Event, done: threading.Event, fatal: list[Match]
    ) -> None:
        """While worker 0 streams, look at the other hosts now and then: a fatal error on any
        host stops the follow."""
        others = self._pods()[1:]
        if self.watch is not None:

            def look() -> None:  # the watchdog's fresh look before it decides
                self._scan_others(others)

            self.watch.confirm = look
        while others and not done.wait(self.poll_seconds * 4):
            found = self._scan_others(others)
            if found and not fatal:
                fatal.extend(found)
                cancel.set()
                return

    def _scan_others(self, pods: list[PodView]) -> list[Match]:
        """The last lines of every other host's log, read by one ``kubectl logs`` for all the
        workload's pods, each host's checked for fatal errors (the first host's, in order)."""
        if not pods:
            return []
        lines: dict[str, list[str]] = {pod.name: [] for pod in pods}
        argv = self.kubectl.argv(
            *tails_argv(
                f"{JOBSET_LABEL}={self.workload}", pods[0].main_container, _OTHER_HOSTS_TAIL
            )
        )
        for line in self.runner.run(argv, timeout=300).stdout.splitlines():
            name, rest = split_prefix(line)
            if name in lines:
                lines[name].append(rest)
        for pod in pods:
            stamped = lines[pod.name]
            if self.watch is not None:
                self.watch.feed_tail(pod.host, stamped)
            matches = diagnose([split_timestamp(line)[1] for line in stamped])
            if has_fatal(matches):
                return [m for m in matches if m.severity == "fatal"]
        return []
