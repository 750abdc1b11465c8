"""The fake cloud's TPU VMs: ``gcloud compute tpus tpu-vm create|describe|list|delete|ssh|scp``
and ``queued-resources create|describe|delete`` answer like the real ones, and ``ssh`` never
runs the command text. The fake runs in this process (its ``main``), against a state file."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud import init_state, parse_scenario, read_state
from tpu_trainer.fakecloud.gcloud import main as gcloud
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.fakecloud.state import STATE_ENV
from tpu_trainer.frameworks.vm_program import LogFormat, RemoteFile, VmProgram
from tpu_trainer.launchers.tpu_vm.remote import device_check_command, install_command, train_command

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parents[1] / "docs" / "simulated-cloud.md"
ZONE = "europe-west4-a"
WHERE = (f"--zone={ZONE}", "--project=demo-project")
BASE: dict[str, Any] = {
    "project": "demo-project",
    "region": "europe-west4",
    "tpu_vm": {"zones": [ZONE], "creating_polls": 1},
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

    def node(self, name: str) -> dict[str, Any]:
        answer = self.tpu("tpu-vm", "describe", name, *WHERE, "--format=json")
        assert answer.code == 0, answer.err
        data: dict[str, Any] = json.loads(answer.out)
        return data

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


def _create(
    fake: Fake, name: str = "t1", accel: str = "v6e-16", version: str = "v2-alpha-tpuv6e"
) -> Answer:
    return fake.tpu(
        "tpu-vm", "create", name, f"--accelerator-type={accel}", f"--version={version}", *WHERE
    )


def test_create_then_describe_goes_creating_to_ready_with_one_endpoint_per_worker(
    fake: Fake,
) -> None:
    made = _create(fake)
    assert made.code == 0, made.err
    assert made.err.splitlines()[0] == "Create request issued for: [t1]"
    first, second = fake.node("t1"), fake.node("t1")
    assert first["state"] == "CREATING" and "networkEndpoints" not in first
    assert second["state"] == "READY"
    assert second["name"] == f"projects/demo-project/locations/{ZONE}/nodes/t1"
    assert (second["acceleratorType"], second["runtimeVersion"]) == ("v6e-16", "v2-alpha-tpuv6e")
    assert second["acceleratorConfig"] == {"topology": "4x4", "type": "V6E"}
    assert len(second["networkEndpoints"]) == 4  # v6e-16: 16 chips, 4 per worker
    assert {e["port"] for e in second["networkEndpoints"]} == {8470}


def test_list_is_a_table_by_default(fake: Fake) -> None:
    _create(fake)
    table = fake.tpu("tpu-vm", "list", *WHERE)
    assert table.out.splitlines()[0].split() == [
        "NAME",
        "ZONE",
        "ACCELERATOR_TYPE",
        "NETWORK",
        "RANGE",
        "STATUS",
    ]
    assert table.out.splitlines()[1].split()[:3] == ["t1", ZONE, "v6e-16"]


def test_missing_vm_answers_not_found_on_describe_delete_and_ssh(fake: Fake) -> None:
    for verb in ("describe", "delete"):
        answer = fake.tpu("tpu-vm", verb, "nope", *WHERE, "--quiet")
        assert answer.code == 1
        assert answer.err.startswith(
            f"ERROR: (gcloud.compute.tpus.tpu-vm.{verb}) NOT_FOUND: Resource "
            f"'projects/demo-project/locations/{ZONE}/nodes/nope' was not found"
        )
    ssh = fake.tpu("tpu-vm", "ssh", "nope", *WHERE, "--worker=all", "--command=true")
    assert ssh.code == 1 and "NOT_FOUND" in ssh.err


def test_wrong_runtime_version_and_zone_are_invalid_argument_and_create_nothing(
    fake: Fake,
) -> None:
    bad_version = _create(fake, version="v2-alpha-tpuv6")
    assert bad_version.code == 1
    assert bad_version.err.startswith(
        "ERROR: (gcloud.compute.tpus.tpu-vm.create) INVALID_ARGUMENT: Cloud TPU received a bad "
        'request. Runtime version "v2-alpha-tpuv6" is not supported'
    )
    bad_zone = fake.tpu(
        "tpu-vm",
        "create",
        "t2",
        "--accelerator-type=v6e-16",
        "--version=v2-alpha-tpuv6e",
        "--zone=europe-west4-b",
    )
    assert "the accelerator v6e-16 was not found in zone europe-west4-b [EID: 0x" in bad_zone.err
    assert fake.nodes() == {}


def test_no_capacity_is_the_operation_error_gcloud_prints(fake: Fake) -> None:
    init_state(
        parse_scenario({**BASE, "tpu_vm": {"zones": [ZONE], "capacity": "exhausted"}}), fake.state
    )
    answer = _create(fake)
    assert answer.code == 1
    assert re.search(
        r"to complete\.\.\.failed\.\nERROR: \(gcloud\.compute\.tpus\.tpu-vm\.create\) \{\n"
        r'  "code": 8,\n  "message": "There is no more capacity in the zone \\"europe-west4-a\\"; ',
        answer.err,
    )
    assert fake.nodes() == {}


def test_spot_is_alpha_only_on_tpu_vm_create(fake: Fake) -> None:
    ga = fake.tpu(
        "tpu-vm",
        "create",
        "t1",
        "--accelerator-type=v6e-16",
        "--version=v2-alpha-tpuv6e",
        "--spot",
        *WHERE,
    )
    assert ga.code == 2 and "unrecognized arguments: --spot" in ga.err
    alpha = fake(
        "alpha",
        "compute",
        "tpus",
        "tpu-vm",
        "create",
        "t1",
        "--accelerator-type=v6e-16",
        "--version=v2-alpha-tpuv6e",
        "--spot",
        *WHERE,
    )
    assert alpha.code == 0
    assert fake.nodes()["t1"]["scheduling"]["spot"] is True


def _ssh(fake: Fake, command: str, out: Path | None, *extra: str) -> Answer:
    argv = ["tpu-vm", "ssh", "t1", *WHERE, "--worker=all", f"--command={command}", *extra]
    if out is not None:
        argv.append(f"--output-directory={out}")
    return fake.tpu(*argv)


def _ready(fake: Fake, name: str = "t1") -> None:
    assert _create(fake, name).code == 0
    fake.node(name)
    assert fake.node(name)["state"] == "READY"


def test_ssh_never_runs_the_command_text(tmp_path: Path, fake: Fake) -> None:
    _ready(fake)
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
                    "creating_polls": 0,
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
    _ready(fake)
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
    _ready(fake)
    missing = _ssh(fake, "true", tmp_path / "nowhere")
    assert missing.code == 1
    assert "Invalid value for [--output_directory]: Failed to find directory" in missing.err
    answer = _ssh(fake, device_check_command(PROGRAM), None)
    assert answer.code == 127  # the venv is not installed yet
    assert "tpu-trainer/venv-demo-1/bin/python: No such file or directory" in answer.out


def test_device_check_and_train_shapes_need_the_install_and_the_files(
    tmp_path: Path, fake: Fake
) -> None:
    _ready(fake)
    out = tmp_path / "out"
    out.mkdir()
    assert _ssh(fake, install_command(PROGRAM, "r1"), out).code == 0
    devices = _ssh(fake, device_check_command(PROGRAM), out)
    assert devices.code == 0
    assert [(out / f"{w}.log").read_text() for w in range(4)] == [
        f"TPU_TRAINER_DEVICES {w} 16 4\n" for w in range(4)
    ]
    no_files = _ssh(fake, train_command(PROGRAM, "r1"), out)
    assert no_files.code == 2
    assert "can't open file '/home/user/tpu-trainer/runs/r1/run.py'" in (out / "0.log").read_text()
    local = tmp_path / "run.py"
    local.write_text("print('hi')\n")
    copied = fake.tpu(
        "tpu-vm", "scp", str(local), "t1:tpu-trainer/runs/r1/", *WHERE, "--worker=all"
    )
    assert copied.code == 0, copied.err
    trained = _ssh(fake, train_command(PROGRAM, "r1"), out)
    assert trained.code == 0
    assert "Train step 1 training loss" in (out / "0.log").read_text()


def test_base_image_on_v6e_is_created_but_jax_cannot_see_the_topology(
    tmp_path: Path, fake: Fake
) -> None:
    assert _create(fake, version="tpu-ubuntu2204-base").code == 0
    fake.node("t1")
    out = tmp_path / "out"
    out.mkdir()
    _ssh(fake, install_command(PROGRAM, "r1"), out)
    answer = _ssh(fake, device_check_command(PROGRAM), out)
    assert answer.code == 1
    assert "Failed to get global TPU topology" in (out / "0.log").read_text()


def test_queued_resource_waits_then_holds_a_node_and_force_deletes_both(fake: Fake) -> None:
    made = fake.tpu(
        "queued-resources",
        "create",
        "q1",
        "--node-id=t1",
        "--accelerator-type=v6e-16",
        "--runtime-version=v2-alpha-tpuv6e",
        "--spot",
        *WHERE,
    )
    assert made.code == 0, made.err

    def state() -> str:
        answer = fake.tpu("queued-resources", "describe", "q1", *WHERE, "--format=json")
        data: dict[str, Any] = json.loads(answer.out)
        assert data["tpu"]["nodeSpec"][0]["nodeId"] == "t1" and "spot" in data
        return str(data["state"]["state"])

    assert [state(), state()] == ["WAITING_FOR_RESOURCES", "ACTIVE"]
    assert fake.nodes()["t1"]["queued_resource"] == "q1"
    refused = fake.tpu("queued-resources", "delete", "q1", *WHERE, "--quiet")
    assert refused.code == 1 and "FAILED_PRECONDITION" in refused.err
    assert fake.tpu("queued-resources", "delete", "q1", *WHERE, "--force", "--quiet").code == 0
    assert fake.nodes() == {} and read_state(fake.state)["tpu_vm"]["queued"] == {}


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
