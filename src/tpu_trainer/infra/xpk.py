"""xpk: argv builders and the client; what its failures mean is in :mod:`gcloud_errors`.

The tool runs two xpk commands: ``cluster adapt`` (provisioning) and ``workload create`` (in the
generated submit script). A workload's end is read from its JobSet and it is deleted with
kubectl, as xpk itself does (``launchers.gke.submitter``)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tpu_trainer.infra.runner import CommandResult, CommandRunner

SKIP_VALIDATION = "--skip-validation"
"""xpk's own check of its tools (``kubectl --help``, ``gcloud version``, and crane or docker
for ``workload create``), with a download of kubectl and crane first: the tool has checked
gcloud and kubectl itself, and crane or docker only matter when xpk builds an image."""


def project_number_flag(project_number: str | None) -> list[str]:
    """``--project-number=N``: xpk then does not ask Cloud Resource Manager for it (over gRPC,
    with Application Default Credentials) on every command."""
    return [f"--project-number={project_number}"] if project_number else []


def cluster_adapt_argv(
    *,
    cluster: str,
    project: str,
    zone: str,
    device_type: str,
    num_slices: int,
    reservation: str,
    project_number: str | None = None,
) -> list[str]:
    return [
        "xpk",
        "cluster",
        "adapt",
        f"--cluster={cluster}",
        f"--project={project}",
        *project_number_flag(project_number),
        f"--zone={zone}",
        f"--tpu-type={device_type}",
        f"--num-slices={num_slices}",
        f"--reservation={reservation}",
        SKIP_VALIDATION,
    ]


@contextmanager
def xpk_scratch() -> Iterator[dict[str, str]]:
    """``TMPDIR`` for one xpk command, a folder of its own removed when the command is over.

    xpk writes every command it runs, and the output of each, to files in the temporary folder
    (``xpk/utils/file.py``: ``NamedTemporaryFile(delete=False)``) and never removes them: a
    run would leave two files per ConfigMap it applies, and more, in ``/tmp``."""
    with tempfile.TemporaryDirectory(prefix="tpu-trainer-xpk-") as folder:
        yield {"TMPDIR": folder}


@dataclass
class Xpk:
    runner: CommandRunner
    env: dict[str, str] | None = None
    search_path: Callable[[], str] | None = None
    """The PATH under which ``xpk`` is the tool's xpk (called before each command, so xpk is
    installed on first use); None: the runner's PATH as it is."""

    def script_env(self) -> dict[str, str]:
        """What a script that runs ``xpk`` (the submit script) needs for it to be the tool's
        xpk: PATH with it first (installing it on first use), and xpk's switches."""
        env = {"TELEMETRY_ENABLED": "false"}
        if self.search_path is not None:
            env["PATH"] = self.search_path()
        return env

    def run(self, argv: list[str], timeout: float = 7200) -> CommandResult:
        env = {"TELEMETRY_ENABLED": "false", **(self.env or {})}
        if self.search_path is not None:
            env["PATH"] = self.search_path()
        with xpk_scratch() as scratch:
            return self.runner.run(argv, timeout=timeout, env={**env, **scratch})
