"""Kueue's and JobSet's own words reach the run: while Kueue holds the JobSet, the waiting line
and (at the schedule deadline) the run's error carry the message Kueue wrote on its Workload;
a failed JobSet ends the run with its Failed condition's reason and message."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cli_env
from test_gke_rehearsal import _recipe
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.fakecloud import fake_cloud_env, write_shims
from tpu_trainer.fakecloud.initial import init_state
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.fakecloud.state import transaction
from tpu_trainer.fakecloud.workloads import new_workload
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.poll import FakeClock
from tpu_trainer.infra.runner import CommandResult, SubprocessRunner
from tpu_trainer.launchers.gke.follow import KUEUE_WORKLOADS, Follower
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.rehearsal import emulated_env

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "kueue_quota.yaml"
KUEUE_SAYS = (
    "couldn't assign flavors to pod set slice-job: insufficient unused quota for "
    "google.com/tpu in flavor 1xtpu7x-128, 32 more needed"
)


class Recording(SilentDisplay):
    """Keeps the waiting lines too."""

    def waiting(self, label: str, elapsed_s: float) -> None:
        self.messages.append(f"{label} ({elapsed_s:.0f} s)")


def test_the_waiting_line_shows_kueues_message_from_the_jobsets_workload(tmp_path: Path) -> None:
    state_file = init_state(load_scenario(SCENARIO), tmp_path / "state.json")
    write_shims(tmp_path / "bin")  # no kubectl shim: the real kubectl, as in a rehearsal
    env = emulated_env(tmp_path, fake_cloud_env(tmp_path / "bin", state_file))
    with transaction(state_file) as state:
        state["workloads"]["demo-run"] = new_workload(
            state, "demo-run", Slice.parse("tpu7x-4x4x4"), num_slices=1, zone="us-central1-c",
            image="img", command="true", parallel_flag=False,
        )  # fmt: skip
    ran: list[CommandResult] = []
    runner = SubprocessRunner(env=env, recorder=ran.append)
    display = Recording()
    follower = Follower(
        Kubectl(runner, access=KubeAccess("demo-project", "us-central1", "demo-cluster")),
        runner, display, "demo-run", expected_pods=16,
        log_path=tmp_path / "worker0.log", on_line=lambda _: None, poll_seconds=30,
        schedule_timeout_s=60, clock=FakeClock(),
    )  # fmt: skip
    followed = follower.run()
    assert not followed.started
    assert followed.message == (
        f"demo-run was not scheduled within 60 s; last reason: Kueue has not admitted "
        f"demo-run: {KUEUE_SAYS}"
    )
    waiting = [line for line in display.messages if line.startswith("Kueue has not admitted")]
    assert waiting and all(KUEUE_SAYS in line for line in waiting), display.messages
    assert follower.ending() is None  # still suspended: no terminal condition
    listed = [
        r.argv for r in ran if r.argv[0] == "kubectl" and r.argv[2:4] == ("get", KUEUE_WORKLOADS)
    ]
    assert listed and all(
        any(a.startswith("--selector=kueue.x-k8s.io/job-uid=") for a in c) for c in listed
    )


def _train(tmp_path: Path, scenario: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "tpu_trainer", "train", str(_recipe(tmp_path)),
            "--rehearse", str(scenario), "--poll", "0.05", *args,
        ],
        env=cli_env(tmp_path), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def _run_row(tmp_path: Path) -> tuple[str, str]:
    db = sqlite3.connect(tmp_path / "store" / "runs.db")
    status, error = db.execute("SELECT status, error FROM runs").fetchone()
    return str(status), str(error)


def _scenario(tmp_path: Path, **changes: Any) -> Path:
    data = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    for key, value in changes.items():
        data[key] = {**(data.get(key) or {}), **value}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_a_rehearsal_kueue_never_admits_fails_at_the_deadline_with_kueues_message(
    tmp_path: Path,
) -> None:
    proc = _train(tmp_path, SCENARIO, "--schedule-timeout", "2", "--wait-timeout", "3600")
    assert proc.returncode != 0
    said = " ".join(proc.stderr.split())
    assert "last reason: Kueue has not admitted" in said and KUEUE_SAYS in said, said[-3000:]
    status, error = _run_row(tmp_path)
    assert status == "failed"
    assert KUEUE_SAYS in error


def test_a_failed_jobset_ends_the_run_with_its_reason_and_message(tmp_path: Path) -> None:
    scenario = _scenario(tmp_path, kueue={"in_use": None}, workloads={"exit_code": 1})
    proc = _train(tmp_path, scenario, "--wait-timeout", "120")
    assert proc.returncode != 0
    status, error = _run_row(tmp_path)
    assert status == "failed"
    assert error.startswith("JobSet "), error
    assert (
        " failed (FailJobSetFailurePolicyAction): applying FailJobSet failure policy action "
        "(first failed job: "
    ) in error
    assert error.endswith("-slice-job-0); restarts: 0"), error
