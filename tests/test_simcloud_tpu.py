"""The emulated Cloud TPU API behind the real gcloud: TPU VMs and queued resources."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.server import Emulator
from tpu_trainer.simcloud.tpu import Tpu
from tpu_trainer.simcloud.tpu_state import MemoryState

pytestmark = pytest.mark.e2e

Cloud = tuple[Emulator, dict[str, str], MemoryState]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    require_gcloud()
    state = MemoryState({"project": "p", "tpu_vm": {"behaviour": {"zones": ["us-central1-a"]}}})
    with Emulator([Tpu(state)]) as emulator:
        yield (
            emulator,
            {**os.environ, **gcloud_env(emulator.base_url, tmp_path_factory.mktemp("g"))},
            state,
        )
    assert emulator.invalid() == []


def gcloud(env: dict[str, str], *argv: str, track: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gcloud", *([track] if track else []), "compute", "tpus", *argv,
         "--zone=us-central1-a", "--project=p"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_a_tpu_vm_is_created_with_its_workers_and_deleted(cloud: Cloud) -> None:
    _, env, _ = cloud
    made = gcloud(env, "tpu-vm", "create", "vm1", "--accelerator-type=v5litepod-16",
                  "--version=v2-alpha-tpuv5-lite")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "Created tpu [vm1]." in made.stderr
    seen = gcloud(env, "tpu-vm", "describe", "vm1", "--format=json")
    node = json.loads(seen.stdout)
    assert node["state"] == "READY"
    assert len(node["networkEndpoints"]) == 4
    alpha = gcloud(env, "tpu-vm", "describe", "vm1", "--format=json", track="alpha")  # v2alpha1
    assert json.loads(alpha.stdout)["apiVersion"] == "V2_ALPHA1"
    listed = gcloud(env, "tpu-vm", "list")
    assert listed.stdout.split("\n")[0].split() == [
        "NAME", "ZONE", "ACCELERATOR_TYPE", "TYPE", "TOPOLOGY", "NETWORK", "RANGE", "STATUS",
    ]  # fmt: skip
    gone = gcloud(env, "tpu-vm", "delete", "vm1", "--quiet")
    assert gone.returncode == 0, gone.stderr
    assert "Deleted tpu [vm1]." in gone.stderr
    assert gcloud(env, "tpu-vm", "describe", "vm1").returncode == 1


def test_a_stockout_fails_the_create_operation_with_its_code(cloud: Cloud) -> None:
    _, env, state = cloud
    state.data["tpu_vm"]["behaviour"]["capacity"] = "exhausted"
    try:
        r = gcloud(env, "tpu-vm", "create", "vm2", "--accelerator-type=v5litepod-256",
                   "--version=v2-alpha-tpuv5-lite")  # fmt: skip
    finally:
        state.data["tpu_vm"]["behaviour"]["capacity"] = "ok"
    assert r.returncode == 1
    assert '"code": 8' in r.stderr
    assert "There is no more capacity in the zone" in r.stderr
    assert gcloud(env, "tpu-vm", "describe", "vm2").returncode == 1


def test_a_queued_resource_becomes_active_and_force_delete_takes_its_node(cloud: Cloud) -> None:
    emulator, env, _ = cloud
    made = gcloud(env, "queued-resources", "create", "qr1", "--node-id=vm3",
                  "--accelerator-type=v5litepod-16", "--runtime-version=v2-alpha-tpuv5-lite",
                  "--spot")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "Created queued_resource [qr1]." in made.stderr
    states = [
        gcloud(
            env, "queued-resources", "describe", "qr1", "--format=value(state.state)"
        ).stdout.strip()
        for _ in range(2)
    ]
    assert states == ["PROVISIONING", "ACTIVE"]  # one scenario tick per API call
    assert gcloud(env, "tpu-vm", "describe", "vm3", "--format=value(state)").stdout.strip() == (
        "READY"
    )
    refused = gcloud(env, "queued-resources", "delete", "qr1", "--quiet")
    assert refused.returncode == 1
    assert "--force" in refused.stderr
    gone = gcloud(env, "queued-resources", "delete", "qr1", "--force", "--quiet")
    assert gone.returncode == 0, gone.stderr
    assert gcloud(env, "tpu-vm", "describe", "vm3").returncode == 1
    created = [e for e in emulator.exchanges if e.method_id.endswith("queuedResources.create")]
    assert created and not created[0].request_problems
