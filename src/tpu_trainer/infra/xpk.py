"""xpk: argv builders and the client; what its failures mean is in :mod:`gcloud_errors`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.infra.runner import CommandResult, CommandRunner


def cluster_adapt_argv(
    *, cluster: str, project: str, zone: str, device_type: str, num_slices: int, reservation: str
) -> list[str]:
    return [
        "xpk",
        "cluster",
        "adapt",
        f"--cluster={cluster}",
        f"--project={project}",
        f"--zone={zone}",
        f"--tpu-type={device_type}",
        f"--num-slices={num_slices}",
        f"--reservation={reservation}",
    ]


def workload_delete_argv(*, workload: str, cluster: str, project: str, zone: str) -> list[str]:
    return [
        "xpk",
        "workload",
        "delete",
        f"--workload={workload}",
        f"--cluster={cluster}",
        f"--project={project}",
        f"--zone={zone}",
    ]


def workload_wait_argv(
    *, workload: str, cluster: str, project: str, zone: str, timeout_s: int
) -> list[str]:
    return [
        "xpk",
        "workload",
        "list",
        f"--cluster={cluster}",
        f"--project={project}",
        f"--zone={zone}",
        f"--wait-for-job-completion={workload}",
        f"--timeout={timeout_s}",
    ]


class WaitOutcome(StrEnum):
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMEOUT = "timeout"
    ERROR = "error"


def wait_outcome(code: int) -> WaitOutcome:
    """xpk's ``--wait-for-job-completion`` exit codes: 0 ok, 124 timeout, 125 failed, 1 other."""
    return {0: WaitOutcome.SUCCEEDED, 124: WaitOutcome.TIMEOUT, 125: WaitOutcome.FAILED}.get(
        code, WaitOutcome.ERROR
    )


@dataclass
class Xpk:
    runner: CommandRunner
    env: dict[str, str] | None = None
    search_path: Callable[[], str] | None = None
    """The PATH under which ``xpk`` is the tool's xpk (called before each command, so xpk is
    installed on first use); None: the runner's PATH as it is."""

    def run(self, argv: list[str], timeout: float = 7200) -> CommandResult:
        env = {"TELEMETRY_ENABLED": "false", **(self.env or {})}
        if self.search_path is not None:
            env["PATH"] = self.search_path()
        return self.runner.run(argv, timeout=timeout, env=env)
