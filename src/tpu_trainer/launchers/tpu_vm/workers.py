"""Commands on every worker of a TPU VM, each worker's output kept under the run's folder.

gcloud writes worker N's output to ``<dir>/N.log`` (``--output-directory``), in a private
temporary folder removed at once; the redacted copies stay in ``runs/<run>/<label>/N.log``. A
follower may read worker 0's lines as they come; a worker that fails (gcloud's ``Command
execution on worker N failed`` line) sets ``cancel``, so the others are stopped at once.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.infra.redact import Redactor
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.launchers.tpu_vm.ending import SshOutcome
from tpu_trainer.launchers.tpu_vm.follow import WorkerLogTail
from tpu_trainer.launchers.tpu_vm.remote import failed_workers
from tpu_trainer.launchers.tpu_vm.spec import TpuVmSpec


@dataclass(frozen=True, slots=True)
class WorkerShell:
    cloud: TpuVmCloud
    vm: TpuVmSpec
    run_dir: Path
    redact: Redactor

    def run(
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
        ``runs/<run>/<label>/<worker>.log``."""
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
