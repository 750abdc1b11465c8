"""TPU VM planning, pure: runtime per family, gcloud argv, the commands sent to the workers and
what their answers mean."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from conftest import GOLDEN, check_golden
from tpu_trainer.catalog.accelerators import ACCELERATORS, Family
from tpu_trainer.errors import InputError
from tpu_trainer.frameworks.vm_program import LogFormat, VmProgram, remote_run_dir
from tpu_trainer.launchers.tpu_vm.ending import DEVICE_NEXT_STEP, device_check_fix
from tpu_trainer.launchers.tpu_vm.remote import (
    Left,
    ProgramLeft,
    attach_command,
    device_check_command,
    device_problems,
    failed_workers,
    install_command,
    left_command,
    program_left,
    stop_command,
    train_command,
)
from tpu_trainer.launchers.tpu_vm.spec import (
    Provisioning,
    TpuVmSpec,
    create_argv,
    parse_node,
    runtime_version,
    ssh_argv,
    tpu_vm_spec,
    vm_name,
)
from tpu_trainer.plan.naming import is_valid_workload_name
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit


def _spec(
    provisioning: Provisioning = Provisioning.ON_DEMAND, *, queued: bool = False
) -> TpuVmSpec:
    return tpu_vm_spec(
        run_id="0a1b2c3d",
        model="Qwen3 1.7B",
        project="demo-project",
        zone="europe-west4-a",
        slice=Slice.parse("v6e-16"),
        provisioning=provisioning,
        queued=queued,
    )


def _program(args: tuple[str, ...] = ("run.py", "cfg.yaml")) -> VmProgram:
    return VmProgram(
        framework="Demo",
        version="1.0",
        key="demo-1.0",
        requirements=("demo[tpu]==1.0",),
        args=args,
        env=(("PYTHONUNBUFFERED", "1"),),
        secret_env=("HF_TOKEN", "WANDB_API_KEY"),
        log_format=LogFormat.TUNIX,
    )


@pytest.mark.parametrize(
    ("device", "runtime"),
    [
        ("v6e-16", "v2-alpha-tpuv6e"),
        ("v5p-32", "v2-alpha-tpuv5"),
        ("v5litepod-16", "v2-alpha-tpuv5-lite"),
        ("v4-32", "tpu-ubuntu2204-base"),
    ],
)
def test_runtime_version_comes_from_the_catalog_per_family(device: str, runtime: str) -> None:
    assert runtime_version(Slice.parse(device)) == runtime


def test_base_image_on_v6e_is_refused_naming_the_v6e_runtime() -> None:
    with pytest.raises(InputError, match="tpu-ubuntu2204-base is a base image") as err:
        runtime_version(Slice.parse("v6e-16"), "tpu-ubuntu2204-base")
    assert err.value.fix == "use --version=v2-alpha-tpuv6e, the v6e runtime"
    # v4's own runtime is the base image: accepted there
    assert runtime_version(Slice.parse("v4-8"), "tpu-ubuntu2204-base") == "tpu-ubuntu2204-base"


def test_tpu7x_is_not_a_tpu_vm() -> None:
    assert ACCELERATORS[Family.V7].tpu_vm_runtime is None
    with pytest.raises(InputError, match="not offered as a TPU VM"):
        runtime_version(Slice.parse("tpu7x-2x2x1"))


def test_vm_name_is_a_valid_node_id_with_the_tool_prefix() -> None:
    name = vm_name("0a1b2c3d4e", "Qwen3 1.7B / GSM8K with a very long suffix indeed")
    assert name.startswith("tpt-0a1b2c3d-qwen3-1-7b")
    assert is_valid_workload_name(name)


def test_create_argv_on_demand_is_ga_tpu_vm_create_with_the_accelerator_and_version() -> None:
    argv = create_argv(_spec())
    assert argv == [
        "gcloud",
        "compute",
        "tpus",
        "tpu-vm",
        "create",
        "tpt-0a1b2c3d-qwen3-1-7b",
        "--accelerator-type=v6e-16",
        "--version=v2-alpha-tpuv6e",
        "--zone=europe-west4-a",
        "--project=demo-project",
    ]


def test_spot_is_spot_on_ga_tpu_vm_create_and_on_a_queued_resource() -> None:
    direct = create_argv(_spec(Provisioning.SPOT))
    queued = create_argv(_spec(Provisioning.SPOT, queued=True))
    reserved = create_argv(_spec(Provisioning.RESERVED, queued=True))
    assert direct[-1] == "--spot" and "--preemptible" not in direct
    assert queued[:6] == [
        "gcloud",
        "compute",
        "tpus",
        "queued-resources",
        "create",
        "tpt-0a1b2c3d-qwen3-1-7b-qr",
    ]
    assert "--node-id=tpt-0a1b2c3d-qwen3-1-7b" in queued
    assert "--runtime-version=v2-alpha-tpuv6e" in queued and queued[-1] == "--spot"
    assert reserved[-1] == "--reserved"


def test_ssh_argv_sends_secret_names_never_values() -> None:
    argv = ssh_argv(_spec(), "true", "/tmp/out", ("HF_TOKEN",))
    assert "--worker=all" in argv
    assert "--output-directory=/tmp/out" in argv
    assert argv[-1] == "--ssh-flag=-o SendEnv=HF_TOKEN"


def test_recipe_text_reaches_the_worker_shell_as_one_literal_word() -> None:
    nasty = "prompt=a fox; rm -rf ~ $(reboot) `id` \"q\" 'x'\nsecond line"
    command = train_command(_program(("-m", "demo.train", nasty)), "0a1b2c3d", 2)
    words = shlex.split(command)  # how the worker's shell splits it
    (inner,) = [words[i + 1] for i, w in enumerate(words) if w == "-c"]
    assert words[words.index("-c") - 3 : words.index("-c")] == ["setsid", "nohup", "sh"]
    trap, *middle, status = inner.split("\n")
    assert (trap, status) == ("trap : TERM", "echo $? > train.exit")
    program = shlex.split("\n".join(middle))  # how the detached sh splits its program
    assert program == [
        "env",
        "PYTHONUNBUFFERED=1",
        "../../venv-demo-1.0/bin/python",
        "-m",
        "demo.train",
        nasty,
    ]


def test_the_commands_that_start_follow_stop_and_find_the_program_are_fixed_texts(
    update_golden: bool,
) -> None:
    """Train starts the program detached (setsid, nohup, its output in train.log, its exit
    status in train.exit) and follows it; attach follows it again from the first line; stop
    TERMs its process group and waits; left says whether it runs or ended, and its segment."""
    texts = {
        "train": train_command(_program(), "0a1b2c3d", 2),
        "attach": attach_command("0a1b2c3d"),
        "stop": stop_command("0a1b2c3d"),
        "left": left_command("0a1b2c3d"),
    }
    text = "".join(f"# {name}\n{command}\n\n" for name, command in texts.items())
    check_golden(GOLDEN / "tpu_vm" / "remote_commands.txt", text, update_golden)


def test_a_run_folder_that_needs_quoting_stays_one_word_in_every_command() -> None:
    odd = "0a1b; rm -rf ~"
    folder = remote_run_dir(odd)
    for command in (attach_command(odd), left_command(odd), train_command(_program(), odd, 1)):
        assert shlex.split(command.split("\n")[0])[:2] == ["cd", folder]
    stop = shlex.split(stop_command(odd))
    assert stop[3] == f"{folder}/train.pid"


def test_what_is_left_of_the_program_is_read_from_every_worker() -> None:
    assert program_left({0: "TPU_TRAINER_RUNNING 2\n", 1: "TPU_TRAINER_ENDED 2\n"}) == (
        ProgramLeft(Left.RUNNING, 2)
    )
    assert program_left({0: "TPU_TRAINER_ENDED 3\n", 1: ""}) == ProgramLeft(Left.ENDED, 3)
    assert program_left({0: "TPU_TRAINER_ENDED 3\n", 1: "TPU_TRAINER_ENDED 2\n"}) == (
        ProgramLeft(Left.ENDED, None)  # the workers disagree: no segment is followed again
    )
    assert program_left({0: "TPU_TRAINER_ENDED \n"}) == ProgramLeft(Left.ENDED, None)
    assert program_left({0: "", 1: "bash: kill: (812) - No such process\n"}) == (
        ProgramLeft(Left.NONE)
    )


def test_install_makes_the_venv_and_lets_sshd_accept_only_the_secret_names() -> None:
    text = install_command(_program(), "0a1b2c3d")
    assert "mkdir -p tpu-trainer/runs/0a1b2c3d" in text
    assert "venv --quiet --allow-existing --python 3.12 tpu-trainer/venv-demo-1.0" in text
    assert "--python tpu-trainer/venv-demo-1.0/bin/python 'demo[tpu]==1.0'" in text
    assert "'AcceptEnv HF_TOKEN WANDB_API_KEY'" in text


def test_device_check_asks_jax_for_local_and_total_devices() -> None:
    command = device_check_command(_program())
    assert shlex.split(command) == [
        "tpu-trainer/venv-demo-1.0/bin/python",
        "-c",
        'import jax; print("TPU_TRAINER_DEVICES", jax.process_index(), jax.device_count(), '
        "jax.local_device_count())",
    ]


def test_device_problems_name_each_worker_that_is_short() -> None:
    v6e16 = Slice.parse("v6e-16")
    good = {w: f"TPU_TRAINER_DEVICES {w} 16 4\n" for w in range(4)}
    assert device_problems(good, v6e16) == []
    bad = {
        **good,
        1: "TPU_TRAINER_DEVICES 1 14 2\n",
        2: "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU topology.\n",
    }
    del bad[3]
    assert device_problems(bad, v6e16) == [
        "worker 1 sees 2 local JAX devices; v6e-4x4 has 4 per host",
        "worker 1 sees 14 JAX devices in all; v6e-4x4 has 16",
        "worker 2: JAX did not start: RuntimeError: Unable to initialize backend 'tpu': "
        "INTERNAL: Failed to get global TPU topology.",
        "worker 3: no answer",
    ]


def test_failed_workers_from_gcloud_status_lines() -> None:
    stderr = (
        "SSH: Attempting to connect to worker 0...\n"
        "##### Command execution on worker 3 failed with exit status 1. Continuing.\n"
        "##### Command execution on worker 1 failed with exit status 137. Continuing.\n"
    )
    assert failed_workers(stderr) == {3: 1, 1: 137}


def test_parse_node_reads_state_runtime_and_one_endpoint_per_worker() -> None:
    node = parse_node(
        {
            "name": "projects/p/locations/z/nodes/tpt-x",
            "state": "READY",
            "acceleratorType": "v6e-16",
            "runtimeVersion": "v2-alpha-tpuv6e",
            "networkEndpoints": [{"ipAddress": f"10.0.0.{i}"} for i in range(4)],
            "health": "HEALTHY",
        }
    )
    assert (node.name, node.state, node.runtime_version) == ("tpt-x", "READY", "v2-alpha-tpuv6e")
    assert len(node.workers) == 4


def test_a_program_refuses_file_and_variable_names_a_shell_could_misread() -> None:
    from tpu_trainer.frameworks.vm_program import RemoteFile

    with pytest.raises(InputError, match="not a plain file name"):
        VmProgram(
            framework="x",
            version="1",
            key="x-1",
            requirements=(),
            files=(RemoteFile(name="../evil.py", text=""),),
            args=(),
            log_format=LogFormat.TUNIX,
        )
    with pytest.raises(InputError, match="not valid"):
        VmProgram(
            framework="x",
            version="1",
            key="x-1",
            requirements=(),
            args=(),
            env=(("A;B", "1"),),
            log_format=LogFormat.TUNIX,
        )


INSTALL_LOG = Path("/runs/r1/install/0.log")


def test_a_device_check_without_a_known_error_names_the_runtime_and_the_install_log() -> None:
    fix = device_check_fix("TPU_TRAINER_DEVICES 1 14 2\n", INSTALL_LOG)
    assert fix == f"{DEVICE_NEXT_STEP} ({INSTALL_LOG})"


def test_a_device_check_line_only_the_classifier_knows_gets_its_family_fix_and_the_next_step() -> (
    None
):
    line = (
        "google.auth.exceptions.RefreshError: ('invalid_grant: Token has been expired or "
        "revoked.', {'error': 'invalid_grant'})"
    )
    fix = device_check_fix(f"{line}\n", INSTALL_LOG)
    assert fix.startswith("The message: google.auth.exceptions.RefreshError")
    assert "gcloud auth application-default login" in fix  # the family's generic fix
    assert fix.endswith(f"If that is not it, {DEVICE_NEXT_STEP} ({INSTALL_LOG}).")


def test_a_device_check_with_a_known_error_gets_that_errors_fix() -> None:
    log = "RuntimeError: Unable to initialize backend 'tpu': INTERNAL: Failed to get global TPU topology.\n"
    fix = device_check_fix(log, INSTALL_LOG)
    assert DEVICE_NEXT_STEP not in fix and "runtime" in fix
