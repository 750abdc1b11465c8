"""The submit script run until its workload exists: the run goes on from the line that says so
while the script's last steps finish beside it, and waits for them before anything is torn
down; a script that never says so is waited for to its end."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.infra.background import Background
from tpu_trainer.infra.runner import CommandResult, SubprocessRunner
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launchers.gke.submit_script import SubmitScript
from tpu_trainer.launchers.gke.submitter import GclusterSubmitter, XpkSubmitter

pytestmark = pytest.mark.unit

APPLIED = "jobset.jobset.x-k8s.io/wl-1 created"


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "submit_wl.sh"
    path.write_text("#!/bin/bash\nset -euo pipefail\n" + body, encoding="utf-8")
    return path


def _run(tmp_path: Path, body: str, display: SilentDisplay) -> tuple[SubmitScript, list[str]]:
    recorded: list[str] = []
    runner = SubprocessRunner(recorder=lambda r: recorded.append(" ".join(r.argv)))
    xpk = XpkSubmitter(runner, xpk=Xpk(runner))
    script = SubmitScript(
        runner,
        _script(tmp_path, body),
        {},
        lambda line: xpk.says_submitted(line, "wl-1"),
        display,
    )
    return script, recorded


def test_xpk_says_its_jobset_exists_with_kubectl_applys_line_and_gcluster_never() -> None:
    runner = SubprocessRunner()
    xpk = XpkSubmitter(runner, xpk=Xpk(runner))
    assert xpk.says_submitted(APPLIED, "wl-1")
    assert xpk.says_submitted("jobset.jobset.x-k8s.io/wl-1 unchanged\n", "wl-1")
    assert not xpk.says_submitted(APPLIED, "wl-10")  # another workload
    assert not xpk.says_submitted("[XPK] Task: `Creating Workload` is implemented by", "wl-1")
    assert not GclusterSubmitter(runner).says_submitted(APPLIED, "wl-1")


def test_the_run_goes_on_at_the_line_and_finish_waits_for_the_scripts_end(
    tmp_path: Path,
) -> None:
    display = SilentDisplay()
    marker = tmp_path / "ended"
    script, recorded = _run(tmp_path, f"echo {APPLIED}\nsleep 1\ntouch {marker}\n", display)
    began = time.monotonic()
    assert script.run() is None  # the workload exists; the script still runs
    assert time.monotonic() - began < 0.9
    assert not marker.exists() and recorded == []
    script.finish()
    assert marker.exists()
    assert recorded == [f"bash {tmp_path / 'submit_wl.sh'}"]  # recorded once it ended
    assert display.messages == []


def test_a_failure_after_the_line_is_shown_not_raised(tmp_path: Path) -> None:
    display = SilentDisplay()
    script, _ = _run(tmp_path, f"echo {APPLIED}\necho 'no dashboard' >&2\nexit 3\n", display)
    assert script.run() is None
    script.finish()
    assert display.messages == [
        "warning: submit_wl.sh exited 3 after the workload was submitted: no dashboard"
    ]


def test_a_script_that_never_says_so_is_waited_for_and_its_failure_returned(
    tmp_path: Path,
) -> None:
    display = SilentDisplay()
    script, _ = _run(tmp_path, "echo 'error: the JobSet was refused' >&2\nexit 1\n", display)
    result = script.run()
    assert isinstance(result, CommandResult) and result.code == 1
    assert "refused" in result.stderr
    script.finish()  # nothing left to wait for
    assert display.messages == []


def test_stop_ends_a_script_still_running_after_the_line(tmp_path: Path) -> None:
    marker = tmp_path / "ended"
    script, recorded = _run(
        tmp_path, f"echo {APPLIED}\nsleep 30\ntouch {marker}\n", SilentDisplay()
    )
    assert script.run() is None
    began = time.monotonic()
    script.stop()
    assert time.monotonic() - began < 15
    assert not marker.exists()
    assert len(recorded) == 1  # the stopped command is recorded like any other


def test_background_hands_its_commands_error_to_the_caller() -> None:
    class Broken:
        def run(self, *_args: object, **_kwargs: object) -> CommandResult:
            raise OSError("no such interpreter")

    running = Background(Broken(), ["bash", "x"], lambda _line: True).start()
    with pytest.raises(OSError, match="no such interpreter"):
        running.wait()
