"""How a command on the workers of a TPU VM ended: a worker's failure with its diagnosis and
log tail, and a VM the cloud took back (``PREEMPTED``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud
from tpu_trainer.launchers.tpu_vm.spec import TpuVmSpec
from tpu_trainer.plan.diagnose import diagnose

TAIL_LINES = 15


@dataclass(frozen=True, slots=True, kw_only=True)
class SshOutcome:
    """A command run on every worker: gcloud's result, each worker's (redacted) output, and the
    workers that exited non-zero."""

    result: CommandResult
    logs: dict[int, str]
    failed: dict[int, int]


def taken_back(cloud: TpuVmCloud, vm: TpuVmSpec) -> str | None:
    """The cloud's word when the VM was preempted under the run, else None."""
    try:
        node = cloud.node(vm.name, vm.zone, vm.project)
    except TpuTrainerError:
        return None
    if node is None or node.state != "PREEMPTED":
        return None
    return f"TPU VM {vm.name} is PREEMPTED (the capacity was taken back)"


def worker_failure(
    run_dir: Path, redact: Redactor, what: str, out: SshOutcome, worker: int | None = None
) -> tuple[str, str]:
    """The message and fix of a command that failed on a worker (``worker``, else the
    first that exited non-zero) or in gcloud itself: the diagnosis and the log's tail."""
    if worker is None and out.failed:
        worker = min(out.failed)
    if worker is None:
        text = redact(out.result.text())
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
    where = run_dir / ("train" if what == "training" else what) / f"{worker}.log"
    message = head + "\n" + "\n".join(tail)
    return message, found[0].fix if found else f"see {where}"


DEVICE_NEXT_STEP = "check the runtime version and the install log"
"""What to look at when the device check fails without a known error."""


def device_check_fix(log: str, install_log: Path) -> str:
    """The fix of a failed device check from the worker's output: a known error's fix; for a
    line only the family classifier recognises, the family's fix and then the usual next step
    (a family's fix is generic); else the next step, naming the install log."""
    found = diagnose(log.splitlines())
    next_step = f"{DEVICE_NEXT_STEP} ({install_log})"
    if not found:
        return next_step
    if found[0].classified:
        return f"{found[0].fix} If that is not it, {next_step}."
    return found[0].fix
