"""How many gcloud questions provisioning asks: every reservation in one list, the workload
policy once per run, and no describe after a create whose own JSON answer says RUNNING (GKE) or
READY (a TPU VM that is not spot). Each test fails if a call that was removed comes back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from test_provision_failures import _provisioner, _recorded, _reservation
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.infra.gcloud import NodePool, created_pool
from tpu_trainer.infra.gcloud_errors import XpkFailure
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.tpu_vm.cloud import TpuVmCloud, created_node
from tpu_trainer.launchers.tpu_vm.provision import VmProvisioner
from tpu_trainer.launchers.tpu_vm.spec import Provisioning, TpuVmSpec
from tpu_trainer.plan.slices import Slice
from tpu_trainer.store.db import RunStore

pytestmark = pytest.mark.unit

NOT_FOUND = "ERROR: (gcloud.compute.x.describe) ResponseError: code=404, message=Not found"


def _pool_json(name: str, status: str) -> str:
    return json.dumps([{"name": name, "status": status, "config": {"machineType": "tpu7x"}}])


class Cloud:
    """gcloud for a failover: the first reservation is exhausted, the second makes the pool."""

    def __init__(self, status: str = "RUNNING") -> None:
        self.status = status
        self.argvs: list[list[str]] = []
        self.creates = 0

    def run(self, argv: Sequence[str], **_options: object) -> CommandResult:
        self.argvs.append(list(argv))
        words = " ".join(argv)

        def answer(code: int, out: str = "", err: str = "") -> CommandResult:
            return CommandResult(tuple(argv), code, out, err, 0.0)

        if "reservations list" in words:
            a = _reservation("demo-reservation-a", "us-central1-ai1a", "HEALTHY", 0, 0)
            b = _reservation("demo-reservation-b", "us-central1-c", "HEALTHY", 0, 0)
            for res in (a, b):
                res["aggregateReservation"]["hostCount"] = 64
            return answer(0, json.dumps([a, b]))
        if "resource-policies create" in words:
            return answer(0)
        if "node-pools create" in words:
            self.creates += 1
            if self.creates == 1:
                return answer(1, err=_recorded(XpkFailure.CAPACITY))
            return answer(0, _pool_json(argv[5], self.status))
        if "node-pools describe" in words and self.creates > 1:
            return answer(0, _pool_json(argv[4], "RUNNING")[1:-1])
        return answer(1, err=NOT_FOUND)

    def verbs(self) -> list[str]:
        return [" ".join(a[a.index("gcloud") + 1 :][:4]) for a in self.argvs]


def _xpk_pool() -> NodePool:
    """An xpk pool of another device type: xpk cluster adapt is not run (it would delete it)."""
    return NodePool("demo-cluster-np-0", "RUNNING", "ct5p", 1, (), None, None, {}, "1.34")


def test_a_failover_asks_each_question_once(tmp_path: Path) -> None:
    cloud = Cloud()
    prov = _provisioner(tmp_path, cloud)  # type: ignore[arg-type]
    prov.slice = Slice.parse("tpu7x-4x4x4")  # multi-host: needs the workload policy
    made = prov._create([_xpk_pool()], "1.34.1-gke.1829001")
    assert made.zone == "us-central1-c" and made.created
    assert [a.outcome for a in prov.attempts] == ["exhausted", "created"]
    # 1 reservations list (both reservations), the workload policy asked and made once for the
    # two attempts, the exhausted create and the describe that checks it left no pool, then the
    # create whose JSON answer is a RUNNING pool: no describe after it.
    assert cloud.verbs() == [
        "beta compute reservations list",
        "compute resource-policies describe tpu7x-128-4x4x4-placement-policy",
        "beta compute resource-policies create",
        "beta container node-pools create",
        "container node-pools describe tpt-0a0a0a0a-tpu7x-128",
        "beta container node-pools create",
    ]
    assert all(a[-1] == "--format=json" for a in cloud.argvs if "create" in a and "node-pools" in a)


def test_a_create_that_answers_a_pool_still_provisioning_is_waited_for(tmp_path: Path) -> None:
    cloud = Cloud(status="PROVISIONING")
    prov = _provisioner(tmp_path, cloud)  # type: ignore[arg-type]
    prov.poll_seconds = 0.0
    prov._create([_xpk_pool()], "1.34.1-gke.1829001")
    assert cloud.verbs()[-1] == "container node-pools describe tpt-0a0a0a0a-tpu7x-8"


@pytest.mark.parametrize(
    ("stdout", "code", "status"),
    [
        (_pool_json("p", "RUNNING"), 0, "RUNNING"),
        (_pool_json("p", "RUNNING")[1:-1], 0, "RUNNING"),
        (_pool_json("p", "RUNNING"), 1, None),
        ("Created [https://container.googleapis.com/...].", 0, None),
        ("[]", 0, None),
    ],
)
def test_created_pool_reads_only_a_json_pool(stdout: str, code: int, status: str | None) -> None:
    pool = created_pool(CommandResult(("gcloud",), code, stdout, "", 0.0))
    assert (pool.status if pool else None) == status


# ---- TPU VM -------------------------------------------------------------------------------
def _node(state: str, workers: int = 1) -> str:
    return json.dumps(
        {
            "name": "projects/p/locations/us-central2-b/nodes/vm1",
            "state": state,
            "acceleratorType": "v4-8",
            "runtimeVersion": "tpu-ubuntu2204-base",
            "networkEndpoints": [{"ipAddress": f"10.0.0.{i}"} for i in range(workers)],
        }
    )


class TpuGcloud:
    def __init__(self, state: str) -> None:
        self.state = state
        self.argvs: list[list[str]] = []

    def run(self, argv: Sequence[str], **_options: object) -> CommandResult:
        self.argvs.append(list(argv))
        state = self.state if "create" in argv else "READY"
        return CommandResult(tuple(argv), 0, _node(state), "", 0.0)


def _spec(provisioning: Provisioning = Provisioning.ON_DEMAND) -> TpuVmSpec:
    return TpuVmSpec(
        name="vm1", project="p", zone="us-central2-b", slice=Slice.parse("v4-8"),
        runtime_version="tpu-ubuntu2204-base", provisioning=provisioning,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("state", "provisioning", "calls"),
    [
        ("READY", Provisioning.ON_DEMAND, ["create"]),
        ("READY", Provisioning.RESERVED, ["create"]),
        ("CREATING", Provisioning.ON_DEMAND, ["create", "describe"]),
        # spot capacity can be taken back as soon as it is READY: it is looked at once more
        ("READY", Provisioning.SPOT, ["create", "describe"]),
    ],
)
def test_a_tpu_vm_create_that_answers_ready_is_not_described_again(
    tmp_path: Path, state: str, provisioning: Provisioning, calls: list[str]
) -> None:
    gcloud = TpuGcloud(state)
    store = RunStore(tmp_path / "runs.db")
    store.create_run(
        "r1", model="m", request="r", launcher=LaunchPath.TPU_VM, device_type="v4-8",
        precision="bf16", project="p", cluster=None, region=None, zone="us-central2-b",
        plan_json=None,
    )  # fmt: skip
    cloud = TpuVmCloud(gcloud)
    prov = VmProvisioner(store, cloud, SilentDisplay(), "r1", _spec(provisioning), poll_seconds=0)
    node = prov.provision()
    assert node.state == "READY" and node.workers == ("10.0.0.0",)
    assert [a[4] for a in gcloud.argvs] == calls
    assert "--format=json" in gcloud.argvs[0]


def test_created_node_reads_only_a_json_node() -> None:
    assert created_node(CommandResult(("gcloud",), 0, _node("READY"), "", 0.0)) is not None
    assert created_node(CommandResult(("gcloud",), 1, _node("READY"), "", 0.0)) is None
    assert created_node(CommandResult(("gcloud",), 0, "Create request issued", "", 0.0)) is None
