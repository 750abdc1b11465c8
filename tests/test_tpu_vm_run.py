"""The TPU VM launcher end to end against the simulated cloud (the real gcloud, the emulated
Cloud TPU API, the local ssh stand-in): create -> READY -> install -> device check -> train on
every worker -> metrics in the store -> delete, and every way it can fail."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import CONFIG, RECIPES, RECIPES_ROOT
from tpu_cloud_setup import stop_all, tpu_cloud
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.outcome import RunOutcome
from tpu_trainer.errors import InputError, TpuTrainerError
from tpu_trainer.fakecloud.state import read_state, recorded_calls
from tpu_trainer.fakecloud.tpu_vm_commands import parse
from tpu_trainer.frameworks.tunix.config import GrpoSettings, MemoryProfile
from tpu_trainer.frameworks.tunix.program import tunix_program
from tpu_trainer.frameworks.vm_program import maxtext_program
from tpu_trainer.infra.redact import Redactor
from tpu_trainer.infra.runner import CommandResult, SubprocessRunner
from tpu_trainer.launchers.tpu_vm.provision import ProvisionError
from tpu_trainer.launchers.tpu_vm.run import TpuVmRun
from tpu_trainer.launchers.tpu_vm.spec import Provisioning, tpu_vm_spec
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.server import Emulator
from tpu_trainer.store.db import RunRow, RunStatus, RunStore

pytestmark = pytest.mark.e2e

SCENARIOS = Path(__file__).resolve().parent / "fixtures" / "tpu_vm"
HF_TOKEN = "hf_" + "Zq8" * 11  # made up, shaped like a real one
WANDB_KEY = "wandb-local-7f3e9a1c5b2d4e6f8a0b"  # made up, shaped like nothing in particular


@dataclass
class Cloud:
    state: Path
    env: dict[str, str]
    store: RunStore
    display: SilentDisplay
    runner: SubprocessRunner
    current: dict[str, str]
    """The run the recorded commands belong to."""
    emulator: Emulator

    def calls(self, *prefix: str) -> list[list[str]]:
        """The commands the run sent (as its store recorded them) that start with ``prefix``."""
        run = self.current.get("run", "")
        found = [argv for argv, _, _ in self.store.commands(run)]
        return [c for c in found if c[: len(prefix)] == list(prefix)]

    def nodes(self) -> dict[str, Any]:
        return dict(read_state(self.state)["tpu_vm"]["nodes"])


@pytest.fixture(autouse=True)
def _emulators() -> Iterator[None]:
    yield
    assert stop_all() == []  # every request and answer matched the discovery documents


def _cloud(tmp_path: Path, scenario: str, **extra_env: str) -> Cloud:
    state, env, emulator = tpu_cloud(
        tmp_path / "fake", SCENARIOS / scenario, {**os.environ, **extra_env}
    )
    store = RunStore(tmp_path / "store" / "runs.db")
    current: dict[str, str] = {}
    runner = SubprocessRunner(
        env=env,
        redactor=Redactor(env=env),
        recorder=lambda r: store.record_command(current.get("run"), r),
    )
    return Cloud(state, env, store, SilentDisplay(), runner, current, emulator)


def _tunix_run(cloud: Cloud, *, topology: str = "v6e-16", **kw: Any) -> TpuVmRun:
    slice_ = Slice.parse(topology)
    run = TpuVmRun(
        store=cloud.store,
        runner=cloud.runner,
        display=cloud.display,
        vm=tpu_vm_spec(
            run_id="0a1b2c3d",
            model="qwen3-1.7b",
            project="demo-project",
            zone=kw.pop("zone", "europe-west4-a"),
            slice=slice_,
            runtime=kw.pop("runtime", None),
            provisioning=kw.pop("provisioning", Provisioning.ON_DEMAND),
            queued=kw.pop("queued", False),
        ),
        program=tunix_program(
            GrpoSettings(), hosts=slice_.hosts, profile=MemoryProfile.SMALL_BATCH, wandb=True
        ),
        request="seed 002 (Tunix GRPO)",
        model="qwen3-1.7b",
        run_id="0a1b2c3d",
        env=cloud.env,
        poll_seconds=0.01,
        **kw,
    )
    cloud.current["run"] = run.run_id
    return run


def _files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()]


def _mentions(root: Path, secret: str) -> list[Path]:
    """The files under ``root`` that hold ``secret``; what the program printed on the fake's
    workers (their ``train.log``, kept under ``tpu-vm-workers/``) is the workers' own."""
    return [
        p
        for p in _files(root)
        if "tpu-vm-workers" not in p.relative_to(root).parts and secret.encode() in p.read_bytes()
    ]


def _live(cloud: Cloud) -> list[tuple[str, str, str]]:
    db = sqlite3.connect(cloud.store.path)
    return db.execute("SELECT kind, name, state FROM resources ORDER BY id").fetchall()


@dataclass
class SeenOnWorkers:
    """A runner that, after each training ssh, reads which secrets the fake's workers got."""

    inner: SubprocessRunner
    state: Path
    seen: list[list[str]]

    def run(self, argv: Sequence[str], **kw: Any) -> CommandResult:
        result = self.inner.run(argv, **kw)
        if "ssh" in argv and any("train.pid" in a for a in argv):
            nodes = read_state(self.state)["tpu_vm"]["nodes"]
            self.seen.extend(n["env_seen"] for n in nodes.values())
        return result


@pytest.fixture(scope="module")
def tunix_done(tmp_path_factory: pytest.TempPathFactory) -> tuple[Cloud, SeenOnWorkers]:
    """One successful Tunix run on a v6e-16 (several tests read what it left)."""
    tmp = tmp_path_factory.mktemp("tunix")
    cloud = _cloud(tmp, "tunix_v6e16.yaml", HF_TOKEN=HF_TOKEN, WANDB_API_KEY=WANDB_KEY)
    spy = SeenOnWorkers(cloud.runner, cloud.state, [])
    run = _tunix_run(cloud)
    run.runner = spy
    outcome = run.start()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    return cloud, spy


def test_tunix_run_on_v6e16_creates_trains_on_4_workers_stores_steps_and_deletes(
    tunix_done: tuple[Cloud, SeenOnWorkers],
) -> None:
    cloud, _ = tunix_done
    stages = [(name, status) for name, status, *_ in cloud.store.stages("0a1b2c3d")]
    assert stages == [
        ("provision", "ok"),
        ("install", "ok"),
        ("devices", "ok"),
        ("train", "ok"),
        ("collect", "ok"),
    ]
    steps = cloud.store.steps("0a1b2c3d")
    assert [s["step"] for s in steps] == [0, 1, 2, 3, 4]
    assert steps[0]["loss"] == pytest.approx(0.000057)
    assert steps[2]["seconds"] == pytest.approx(37.71, abs=0.01)  # 06:06:00.02 - 06:05:22.31
    metrics = cloud.store.metrics("0a1b2c3d") or {}
    assert metrics["steps_completed"] == 5
    assert metrics["loss"]["last"] == pytest.approx(0.000039)
    run_dir = cloud.store.path.parent / "runs" / "0a1b2c3d"
    assert sorted(p.name for p in (run_dir / "train").iterdir()) == [f"{w}.log" for w in range(4)]
    assert "Train step 5 training loss" in (run_dir / "worker0.log").read_text()
    # the VM was created with the v6e runtime and is gone; the store says so
    (create,) = cloud.calls("gcloud", "compute", "tpus", "tpu-vm", "create")
    assert "--version=v2-alpha-tpuv6e" in create and "--accelerator-type=v6e-16" in create
    assert cloud.nodes() == {}
    assert _live(cloud) == [("tpu-vm", "tpt-0a1b2c3d-qwen3-1-7b", "deleted")]
    # the configuration reached every worker, complete and with the memory profile
    config = (run_dir / "files" / "grpo.yaml").read_text()
    assert "batch_size: 1\n" in config and "num_generations: 4\n" in config


def test_secrets_reach_the_workers_through_the_environment_and_no_file_or_store(
    tunix_done: tuple[Cloud, SeenOnWorkers],
) -> None:
    cloud, _ = tunix_done
    seen_calls = cloud.calls("gcloud", "compute", "tpus", "tpu-vm", "ssh")
    train = next(c for c in seen_calls if any("setsid nohup" in a for a in c))
    assert "--ssh-flag=-o SendEnv=HF_TOKEN" in train
    assert not any(HF_TOKEN in a or WANDB_KEY in a for c in recorded_calls(cloud.state) for a in c)
    store_dir = cloud.store.path.parent
    for secret in (HF_TOKEN, WANDB_KEY):
        assert _mentions(store_dir, secret) == []  # runs.db, its WAL, every run file
        assert _mentions(cloud.state.parent, secret) == []  # the fake's state: every argv
    worker0 = (store_dir / "runs" / "0a1b2c3d" / "worker0.log").read_text()
    assert "HF_TOKEN=***" in worker0 and "WANDB_API_KEY=***" in worker0


def test_the_workers_really_received_the_secrets(tunix_done: tuple[Cloud, SeenOnWorkers]) -> None:
    _, spy = tunix_done
    assert spy.seen == [["HF_TOKEN", "WANDB_API_KEY"]]


def test_missing_hf_token_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    cloud = _cloud(tmp_path, "tunix_v6e16.yaml")
    cloud.env.pop("HF_TOKEN", None)
    with pytest.raises(InputError, match="HF_TOKEN not set"):
        _tunix_run(cloud).start()
    assert recorded_calls(cloud.state) == [] and cloud.emulator.exchanges == []


def _failed(tmp_path: Path, scenario: str) -> tuple[Cloud, RunOutcome, RunRow]:
    """A Tunix run of ``scenario`` that fails: the cloud, the outcome and the stored run."""
    cloud = _cloud(tmp_path, scenario, HF_TOKEN=HF_TOKEN)
    outcome = _tunix_run(cloud).start()
    row = cloud.store.run("0a1b2c3d")
    assert outcome.status is RunStatus.FAILED
    assert row is not None and row.status is RunStatus.FAILED
    return cloud, outcome, row


def test_one_failing_worker_fails_the_run_with_its_tail_and_diagnosis_and_deletes_the_vm(
    tmp_path: Path,
) -> None:
    cloud, outcome, _ = _failed(tmp_path, "failing_worker.yaml")
    error = outcome.error or ""
    assert error.startswith("training failed on worker 2 (exit 1): Out of HBM while running")
    assert "batch_size=1" in error  # the seed's fix, from the diagnosis
    assert "Attempting to reserve 30.31G. Only 29.35G free." in error  # the worker's tail
    assert cloud.nodes() == {}
    assert [state for _, _, state in _live(cloud)] == ["deleted"]
    # the steps worker 0 logged before the failure are kept
    assert len(cloud.store.steps("0a1b2c3d")) == 5


def test_a_failure_no_signature_knows_is_explained_by_its_wording_in_the_runs_error(
    tmp_path: Path,
) -> None:
    cloud, outcome, row = _failed(tmp_path, "unknown_failure.yaml")
    assert row.error is not None
    assert row.error.startswith("training failed on worker 1 (exit 1)")
    assert "Authentication and permissions (by its wording, confidence 0." in row.error
    assert "line 4 of train/1.log" in row.error
    assert "RefreshError: ('invalid_grant" in row.error  # the fix quotes the line
    assert outcome.error == row.error
    assert any("no known error in the run's logs" in m for m in cloud.display.messages)
    assert cloud.nodes() == {}


def test_a_runtime_the_zone_does_not_offer_fails_the_create_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    cloud = _cloud(tmp_path, "tunix_v6e16.yaml", HF_TOKEN=HF_TOKEN)
    with pytest.raises(ProvisionError, match="INVALID_ARGUMENT") as err:
        _tunix_run(cloud, runtime="v2-alpha-tpuv6").start()
    assert "versions list --zone=europe-west4-a" in err.value.fix
    assert [(n, st) for n, st, *_ in cloud.store.stages("0a1b2c3d")] == [("provision", "failed")]
    assert cloud.nodes() == {}
    assert [state for _, _, state in _live(cloud)] == ["absent"]
    assert cloud.calls("gcloud", "compute", "tpus", "tpu-vm", "delete") == []
    row = cloud.store.run("0a1b2c3d")
    assert row is not None and row.status is RunStatus.FAILED


def test_no_capacity_says_what_to_try_next(tmp_path: Path) -> None:
    cloud = _cloud(tmp_path, "no_capacity.yaml", HF_TOKEN=HF_TOKEN)
    with pytest.raises(ProvisionError, match="There is no more capacity") as err:
        _tunix_run(cloud).start()
    assert "queued resource" in err.value.fix
    assert cloud.nodes() == {}


def test_spot_capacity_through_a_queued_resource_is_given_back_whole(tmp_path: Path) -> None:
    cloud = _cloud(tmp_path, "tunix_v6e16.yaml", HF_TOKEN=HF_TOKEN)
    outcome = _tunix_run(cloud, queued=True, provisioning=Provisioning.SPOT).start()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    (create,) = cloud.calls("gcloud", "compute", "tpus", "queued-resources", "create")
    assert "--spot" in create and "--node-id=tpt-0a1b2c3d-qwen3-1-7b" in create
    state = read_state(cloud.state)["tpu_vm"]
    assert state["nodes"] == {} and state["queued"] == {}
    assert sorted((k, s) for k, _, s in _live(cloud)) == [
        ("queued-resource", "deleted"),
        ("tpu-vm", "deleted"),
    ]


def test_a_spot_vm_taken_back_before_it_is_used_fails_the_run_and_is_deleted(
    tmp_path: Path,
) -> None:
    cloud = _cloud(tmp_path, "spot_preempted.yaml", HF_TOKEN=HF_TOKEN)
    with pytest.raises(ProvisionError, match="is PREEMPTED instead of READY") as err:
        _tunix_run(cloud, provisioning=Provisioning.SPOT).start()
    assert "a preempted VM cannot be resumed" in err.value.fix
    (create,) = cloud.calls("gcloud", "compute", "tpus", "tpu-vm", "create")
    assert create[-1] == "--spot"
    assert cloud.nodes() == {}
    assert _live(cloud) == [("tpu-vm", "tpt-0a1b2c3d-qwen3-1-7b", "deleted")]


def test_a_worker_that_misses_chips_stops_the_run_before_training(tmp_path: Path) -> None:
    cloud = _cloud(tmp_path, "missing_chips.yaml", HF_TOKEN=HF_TOKEN)
    with pytest.raises(
        TpuTrainerError, match="worker 1 sees 2 local JAX devices; v6e-4x4 has 4"
    ) as err:
        _tunix_run(cloud).start()
    assert err.value.fix.startswith("check the runtime version and the install log (")
    assert err.value.fix.endswith("/0a1b2c3d/install/1.log)")
    assert not any("train.pid" in " ".join(c) for c in recorded_calls(cloud.state))
    assert cloud.nodes() == {}


def test_maxtext_recipe_on_a_tpu_vm_goes_through_record_results_to_the_readme(
    tmp_path: Path,
) -> None:
    from tpu_trainer.app.planning import Request, plan_request
    from tpu_trainer.plan.plan import PlanOptions

    recipes = tmp_path / "recipes" / "training" / "trillium" / "tinyllama-8b"
    folder = recipes / "8k-bf16-v6e-2x4"
    shutil.copytree(RECIPES_ROOT / RECIPES["classic"], folder / "xpk")
    script = folder / "xpk" / "run_recipe.sh"
    script.write_text(script.read_text().replace("tpu7x-2x2x1", "v6e-2x4"))
    plan = plan_request(
        Request(str(folder / "xpk"), config_path=CONFIG),
        # the scenario's log reaches step 4: the 5 steps asked for are all done
        PlanOptions(
            user="t", now=datetime(2026, 11, 22), profiler=None, overrides=(("steps", "5"),)
        ),
    )
    cloud = _cloud(tmp_path, "maxtext_v6e8.yaml")
    run = TpuVmRun(
        store=cloud.store,
        runner=cloud.runner,
        display=cloud.display,
        vm=tpu_vm_spec(
            run_id="5e6f7a8b",
            model=plan.model,
            project="demo-project",
            zone="us-central1-ai1a",
            slice=plan.slice,
        ),
        program=maxtext_program(plan),
        request=str(folder),
        model=plan.model,
        plan=plan,
        run_id="5e6f7a8b",
        env=cloud.env,
        poll_seconds=0.01,
        lang="en",
    )
    cloud.current["run"] = run.run_id
    outcome = run.start()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    assert outcome.readme is not None and "5e6f7a8b" in outcome.readme.read_text()
    metrics = cloud.store.metrics("5e6f7a8b") or {}
    assert metrics["steady_steps"] == [2, 3, 4]
    assert metrics["tflops_per_chip"] == pytest.approx(410.42, abs=0.01)
    (train,) = [c for c in cloud.calls("gcloud") if any("train.pid" in a for a in c)]
    command = next(a for a in train if a.startswith("--command="))
    program = parse(command.removeprefix("--command=")).program  # the words the worker reads
    assert "maxtext.trainers.pre_train.train" in program
    assert any(
        w.startswith("LIBTPU_INIT_ARGS=--xla_tpu_scoped_vmem_limit_kib=65536") for w in program
    )
    assert cloud.nodes() == {}


_DRIVER = """
import os, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import test_tpu_vm_run as t
cloud = t._cloud(Path({tmp!r}), "hang.yaml", HF_TOKEN={token!r})
run = t._tunix_run(cloud)
print("ready", flush=True)
run.start()
"""


def test_sigterm_during_training_stops_the_program_by_pid_and_deletes_the_vm(
    tmp_path: Path,
) -> None:
    code = _DRIVER.format(tests=str(Path(__file__).parent), tmp=str(tmp_path), token=HF_TOKEN)
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    state = tmp_path / "fake" / "state.json"
    deadline = time.monotonic() + 120
    running = False
    while time.monotonic() < deadline and proc.poll() is None:
        if state.exists():
            nodes = read_state(state)["tpu_vm"]["nodes"]
            running = any(n.get("program") for n in nodes.values())
            if running:
                break
        time.sleep(0.1)
    assert running, proc.communicate(timeout=30)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0
    calls = [argv for argv, _, _ in RunStore(tmp_path / "store" / "runs.db").commands("0a1b2c3d")]
    stops = [c for c in calls if any(a.startswith("--command=if [ -f ") for a in c)]
    assert len(stops) == 1 and "--worker=all" in stops[0], err[-2000:]
    assert read_state(state)["tpu_vm"]["nodes"] == {}
    deletes = [
        i for i, c in enumerate(calls) if c[:5] == ["gcloud", "compute", "tpus", "tpu-vm", "delete"]
    ]
    assert len(deletes) == 1 and calls.index(stops[0]) < deletes[0]  # stopped, then deleted
    row = RunStore(tmp_path / "store" / "runs.db").run("0a1b2c3d")
    assert row is not None and row.status is RunStatus.CANCELLED


def test_transformers_on_a_v5e8_vm_stores_its_steps_and_passes_hf_token_by_name_only(
    tmp_path: Path,
) -> None:
    from tpu_trainer.frameworks.hf.program import HfSettings, hf_program

    cloud = _cloud(tmp_path, "hf_v5e8.yaml", HF_TOKEN=HF_TOKEN)
    run = TpuVmRun(
        store=cloud.store,
        runner=cloud.runner,
        display=cloud.display,
        vm=tpu_vm_spec(
            run_id="7c8d9e0f",
            model="llama-3.2-1b",
            project="demo-project",
            zone="us-west4-a",
            slice=Slice.parse("v5litepod-8"),
        ),
        program=hf_program(HfSettings()),
        request="seed 004 (Transformers on TPU)",
        model="llama-3.2-1b",
        run_id="7c8d9e0f",
        env=cloud.env,
        poll_seconds=0.01,
    )
    cloud.current["run"] = run.run_id
    outcome = run.start()
    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    steps = cloud.store.steps("7c8d9e0f")
    assert [s["step"] for s in steps] == [0, 1, 2, 3, 4, 5]
    assert steps[0]["seconds"] == pytest.approx(96.3121)  # the XLA compile
    assert steps[5]["loss"] == pytest.approx(8.302)
    metrics = cloud.store.metrics("7c8d9e0f") or {}
    assert metrics["steps_completed"] == 6 and metrics["first_step_seconds"] == pytest.approx(
        96.3121
    )
    (train,) = [c for c in cloud.calls("gcloud") if any("train.pid" in a for a in c)]
    command = next(a for a in train if a.startswith("--command="))
    assert "PJRT_DEVICE=TPU" in command and "train_hf.py" in command
    assert "--ssh-flag=-o SendEnv=HF_TOKEN" in train
    run_dir = cloud.store.path.parent / "runs" / "7c8d9e0f"
    assert "xla_fsdp_v2" in (run_dir / "files" / "train_hf.py").read_text()
    assert _mentions(cloud.store.path.parent, HF_TOKEN) == []
    assert _mentions(cloud.state.parent, HF_TOKEN) == []
    assert cloud.nodes() == {}
