"""The local stand-in for ``gcloud compute tpus tpu-vm ssh|scp`` (not API calls, so not
emulated): it answers on the nodes in the state file the way gcloud does, and never runs the
command text. It runs in this process (the fake gcloud's ``main``), against a state file whose
VMs the scenario made (the emulated Cloud TPU API makes them in a rehearsal)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud import init_state, parse_scenario, read_state
from tpu_trainer.fakecloud.gcloud import main as gcloud
from tpu_trainer.fakecloud.gcloud_dispatch import answered_by_fake
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.fakecloud.state import STATE_ENV, transaction
from tpu_trainer.frameworks.vm_program import LogFormat, RemoteFile, VmProgram
from tpu_trainer.launchers.tpu_vm.remote import (
    attach_command,
    device_check_command,
    install_command,
    left_command,
    stop_command,
    train_command,
)

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[1] / "docs" / "simulated-cloud.md"
ZONE = "europe-west4-a"
WHERE = (f"--zone={ZONE}", "--project=demo-project")
VM = {
    "name": "t1",
    "zone": ZONE,
    "accelerator_type": "v6e-16",
    "runtime_version": "v2-alpha-tpuv6e",
}
BASE: dict[str, Any] = {
    "project": "demo-project",
    "region": "europe-west4",
    "tpu_vm": {"zones": [ZONE], "existing": [VM]},
}
PROGRAM = VmProgram(
    framework="Demo",
    version="1",
    key="demo-1",
    requirements=("demo==1",),
    files=(RemoteFile(name="run.py", text="print('hi')\n"),),
    args=("run.py",),
    secret_env=("HF_TOKEN",),
    log_format=LogFormat.TUNIX,
)


@dataclass(frozen=True)
class Answer:
    code: int
    out: str
    err: str


@dataclass
class Fake:
    state: Path
    capsys: pytest.CaptureFixture[str]

    def __call__(self, *argv: str) -> Answer:
        code = gcloud(list(argv))
        seen = self.capsys.readouterr()
        return Answer(code, seen.out, seen.err)

    def tpu(self, *argv: str) -> Answer:
        return self("compute", "tpus", *argv)

    def nodes(self) -> dict[str, Any]:
        return dict(read_state(self.state)["tpu_vm"]["nodes"])


@pytest.fixture
def fake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Fake:
    state = tmp_path / "state.json"
    init_state(parse_scenario(BASE), state)
    monkeypatch.setenv(STATE_ENV, str(state))
    return Fake(state, capsys)


def test_a_missing_vm_is_not_found_and_only_ssh_and_scp_are_local(fake: Fake) -> None:
    ssh = fake.tpu("tpu-vm", "ssh", "nope", *WHERE, "--worker=all", "--command=true")
    assert ssh.code == 1
    assert ssh.err.startswith(
        "ERROR: (gcloud.compute.tpus.tpu-vm.ssh) NOT_FOUND: Resource "
        f"'projects/demo-project/locations/{ZONE}/nodes/nope' was not found"
    )
    describe = fake.tpu("tpu-vm", "describe", "t1", *WHERE)
    assert describe.code == 2  # the API's commands are the real gcloud's, never the stand-in's


def test_a_rehearsals_gcloud_keeps_only_ssh_and_scp_local() -> None:
    assert answered_by_fake(["compute", "tpus", "tpu-vm", "ssh", "t1", "--worker=all"])
    assert answered_by_fake(["compute", "tpus", "tpu-vm", "scp", "a.py", "t1:dir/"])
    for api_call in (
        ["compute", "tpus", "tpu-vm", "create", "t1", "--spot"],
        ["compute", "tpus", "tpu-vm", "describe", "t1", "--format=json"],
        ["alpha", "compute", "tpus", "queued-resources", "delete", "q1", "--force"],
    ):
        assert not answered_by_fake(api_call), api_call


def test_a_vm_that_is_not_ready_refuses_the_connection(fake: Fake) -> None:
    with transaction(fake.state) as state:
        state["tpu_vm"]["nodes"]["t1"]["state"] = "CREATING"
    answer = _ssh(fake, "true", None)
    assert answer.code == 255 and "Connection refused" in answer.err
    with transaction(fake.state) as state:
        state["tpu_vm"]["nodes"]["t1"]["state"] = "PREEMPTED"
    answer = _ssh(fake, "true", None)
    assert answer.code == 1 and "This TPU VM is PREEMPTED" in answer.err


def _ssh(fake: Fake, command: str, out: Path | None, *extra: str) -> Answer:
    argv = ["tpu-vm", "ssh", "t1", *WHERE, "--worker=all", f"--command={command}", *extra]
    if out is not None:
        argv.append(f"--output-directory={out}")
    return fake.tpu(*argv)


def test_ssh_never_runs_the_command_text(tmp_path: Path, fake: Fake) -> None:
    marker = tmp_path / "pwned"
    out = tmp_path / "out"
    out.mkdir()
    answer = _ssh(fake, f"touch {marker}; echo hi > {marker}", out)
    assert not marker.exists()
    assert answer.code == 127
    assert "this command shape is not known to the fake" in (out / "0.log").read_text()


def test_ssh_writes_one_numbered_log_per_worker_and_exits_with_the_first_failure(
    tmp_path: Path, fake: Fake
) -> None:
    init_state(
        parse_scenario(
            {
                **BASE,
                "tpu_vm": {
                    "zones": [ZONE],
                    "existing": [VM],
                    "install": {
                        "failing_worker": 2,
                        "failing_exit_code": 3,
                        "failing_log": "E: disk full\n",
                    },
                },
            }
        ),
        fake.state,
    )
    out = tmp_path / "out"
    out.mkdir()
    answer = _ssh(fake, install_command(PROGRAM, "r1"), out)
    assert sorted(p.name for p in out.iterdir()) == ["0.log", "1.log", "2.log", "3.log"]
    assert (out / "2.log").read_text() == "E: disk full\n"
    assert answer.code == 3
    assert (
        answer.err.splitlines()[0]
        == f"Preparing SSH command execution; output will be logged to {out}"
    )
    assert (
        "##### Command execution on worker 2 failed with exit status 3. Continuing." in answer.err
    )
    assert fake.nodes()["t1"]["accept_env"] == ["HF_TOKEN"]


def test_ssh_without_output_directory_prints_to_stdout_and_checks_the_directory(
    tmp_path: Path, fake: Fake
) -> None:
    missing = _ssh(fake, "true", tmp_path / "nowhere")
    assert missing.code == 1
    assert "Invalid value for [--output_directory]: Failed to find directory" in missing.err
    answer = _ssh(fake, device_check_command(PROGRAM), None)
    assert answer.code == 127  # the venv is not installed yet
    assert "tpu-trainer/venv-demo-1/bin/python: No such file or directory" in answer.out


def test_device_check_and_train_shapes_need_the_install_and_the_files(
    tmp_path: Path, fake: Fake
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    assert _ssh(fake, install_command(PROGRAM, "r1"), out).code == 0
    devices = _ssh(fake, device_check_command(PROGRAM), out)
    assert devices.code == 0
    assert [(out / f"{w}.log").read_text() for w in range(4)] == [
        f"TPU_TRAINER_DEVICES {w} 16 4\n" for w in range(4)
    ]
    no_files = _ssh(fake, train_command(PROGRAM, "r1", 1), out)
    assert no_files.code == 2
    assert "can't open file '/home/user/tpu-trainer/runs/r1/run.py'" in (out / "0.log").read_text()
    local = tmp_path / "run.py"
    local.write_text("print('hi')\n")
    copied = fake.tpu(
        "tpu-vm", "scp", str(local), "t1:tpu-trainer/runs/r1/", *WHERE, "--worker=all"
    )
    assert copied.code == 0, copied.err
    trained = _ssh(fake, train_command(PROGRAM, "r1", 1), out)
    assert trained.code == 0
    assert "Train step 1 training loss" in (out / "0.log").read_text()


def _installed(tmp_path: Path, fake: Fake) -> Path:
    """The program installed and its file copied to every worker; the folder gcloud writes to."""
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    assert _ssh(fake, install_command(PROGRAM, "r1"), out).code == 0
    local = tmp_path / "run.py"
    local.write_text("print('hi')\n")
    fake.tpu("tpu-vm", "scp", str(local), "t1:tpu-trainer/runs/r1/", *WHERE, "--worker=all")
    return out


def _logs(out: Path) -> list[str]:
    return [(out / f"{w}.log").read_text() for w in range(4)]


def test_the_program_outlives_its_session_and_is_followed_again_from_its_first_line(
    tmp_path: Path, fake: Fake
) -> None:
    out = _installed(tmp_path, fake)
    assert _ssh(fake, left_command("r1"), out).code == 0
    assert _logs(out) == [""] * 4  # nothing started yet
    trained = _ssh(fake, train_command(PROGRAM, "r1", 1), out)
    assert trained.code == 0
    first = _logs(out)
    assert "Train step 4 training loss" in first[0]
    assert _ssh(fake, left_command("r1"), out).code == 0
    assert _logs(out) == ["TPU_TRAINER_ENDED 1\n"] * 4
    again = tmp_path / "again"
    again.mkdir()
    attached = _ssh(fake, attach_command("r1"), again)
    assert attached.code == 0
    assert _logs(again) == first  # every line again, from the first
    program = fake.nodes()["t1"]["program"]
    assert (program["folder"], program["segment"]) == ("tpu-trainer/runs/r1", 1)


def test_a_stop_ends_a_running_program_whose_follow_then_exits_143(
    tmp_path: Path, fake: Fake
) -> None:
    out = _installed(tmp_path, fake)
    assert _ssh(fake, train_command(PROGRAM, "r1", 2), out).code == 0
    with transaction(fake.state) as state:  # from now on the program runs on after its output
        state["tpu_vm"]["behaviour"]["train"]["hang"] = True
    _ssh(fake, left_command("r1"), out)
    assert _logs(out) == ["TPU_TRAINER_RUNNING 2\n"] * 4
    assert _ssh(fake, stop_command("r1"), out).code == 0
    _ssh(fake, left_command("r1"), out)
    assert _logs(out) == ["TPU_TRAINER_ENDED 2\n"] * 4
    attached = _ssh(fake, attach_command("r1"), out)
    assert attached.code == 143
    assert "Command execution on worker 0 failed with exit status 143" in attached.err


def test_a_command_that_differs_from_the_runs_own_by_one_word_is_not_run(
    tmp_path: Path, fake: Fake
) -> None:
    out = _installed(tmp_path, fake)
    train = train_command(PROGRAM, "r1", 1)
    for changed in (
        train.replace("setsid nohup", "setsid"),
        train.replace("exit 137", "exit 137; touch x"),
        train + "\nreboot",
        stop_command("r1").replace("kill -TERM", "kill -KILL"),
        attach_command("r1").replace("+1", "+5"),
    ):
        answer = _ssh(fake, changed, out)
        assert answer.code == 127, changed
    assert fake.nodes()["t1"]["program"] is None


def test_base_image_on_v6e_is_created_but_jax_cannot_see_the_topology(
    tmp_path: Path, fake: Fake
) -> None:
    base = {**VM, "runtime_version": "tpu-ubuntu2204-base"}
    init_state(
        parse_scenario({**BASE, "tpu_vm": {"zones": [ZONE], "existing": [base]}}), fake.state
    )
    out = tmp_path / "out"
    out.mkdir()
    _ssh(fake, install_command(PROGRAM, "r1"), out)
    answer = _ssh(fake, device_check_command(PROGRAM), out)
    assert answer.code == 1
    assert "Failed to get global TPU topology" in (out / "0.log").read_text()


def test_scenario_keys_are_checked_and_the_documented_example_loads(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tpu_vm\.train\.hung: unknown key \(known: .*hang"):
        parse_scenario({**BASE, "tpu_vm": {"train": {"hung": True}}})
    with pytest.raises(ConfigError, match=r"tpu_vm\.capacity: 'plenty' is not one of"):
        parse_scenario({**BASE, "tpu_vm": {"capacity": "plenty"}})
    block = re.search(r"### TPU VM scenario\n\n```yaml\n(.*?)```", DOC.read_text(), re.S)
    assert block is not None
    path = tmp_path / "doc.yaml"
    path.write_text(block.group(1), encoding="utf-8")
    (tmp_path / "grpo.log").write_text(
        "I1122 06:04:44.120000 1 peft_trainer.py:489] Train step 1 training loss: 1.0  - training perplexity: 2.7\n"
    )
    scenario = load_scenario(path)
    assert scenario.tpu_vm.train.script.failing_worker == 2
    assert scenario.cluster.exists is False  # no cluster needed for TPU VMs
    assert yaml.safe_load(block.group(1))["tpu_vm"]["zones"] == ["europe-west4-a"]
