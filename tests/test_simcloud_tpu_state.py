"""The emulated Cloud TPU's state machine, called directly (no HTTP, no gcloud): what each call
finds in the state file's ``tpu_vm`` part as the scenario clock moves one tick per call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.fakecloud import init_state, parse_scenario, read_state
from tpu_trainer.fakecloud.state import FAKE_EPOCH
from tpu_trainer.simcloud.server import ApiError, Call
from tpu_trainer.simcloud.tpu import Tpu
from tpu_trainer.simcloud.tpu_state import TICK_SECONDS, file_state

pytestmark = pytest.mark.unit

ZONE = "europe-west4-a"
WHERE = {"projectsId": "demo-project", "locationsId": ZONE}
NODE = {"acceleratorType": "v6e-16", "runtimeVersion": "v2-alpha-tpuv6e"}


class Api:
    def __init__(self, tmp_path: Path, **tpu_vm: Any) -> None:
        self.state = tmp_path / "state.json"
        scenario = {"project": "demo-project", "region": "europe-west4"}
        init_state(parse_scenario({**scenario, "tpu_vm": {"zones": [ZONE], **tpu_vm}}), self.state)
        self.tpu = Tpu(file_state(self.state))

    def __call__(
        self, method: str, body: dict[str, Any] | None = None, query: str = "", **params: str
    ) -> dict[str, Any]:
        api = self.tpu.apis[0]
        found = api.method(f"tpu.projects.locations.{method}")
        key, _, value = query.partition("=")
        call = Call(api, found, {**WHERE, **params}, {key: [value]} if key else {}, body)
        answer: dict[str, Any] = self.tpu.handle(call)
        return answer

    def data(self) -> dict[str, Any]:
        tv: dict[str, Any] = read_state(self.state)["tpu_vm"]
        return tv


def test_a_node_is_creating_for_creating_polls_calls_then_ready_with_its_workers(
    tmp_path: Path,
) -> None:
    api = Api(tmp_path, creating_polls=2)
    op = api("nodes.create", NODE, "nodeId=t1")
    assert op["done"] is False
    assert api.data()["nodes"]["t1"]["state"] == "CREATING"
    assert api("nodes.get", nodesId="t1")["state"] == "CREATING"
    ready = api("nodes.get", nodesId="t1")
    assert ready["state"] == "READY" and len(ready["networkEndpoints"]) == 4
    node = api.data()["nodes"]["t1"]
    assert node["workers"] == [e["ipAddress"] for e in ready["networkEndpoints"]]
    opid = op["name"].rsplit("/", 1)[1]
    done = api("operations.get", operationsId=opid)
    assert done["done"] is True and done["response"]["state"] == "READY"
    assert read_state(api.state)["clock"] == FAKE_EPOCH + 4 * TICK_SECONDS  # four calls


def test_a_zone_or_runtime_not_offered_is_invalid_argument_and_no_capacity_fails_the_op(
    tmp_path: Path,
) -> None:
    api = Api(tmp_path, capacity="exhausted")
    with pytest.raises(ApiError, match="was not found in zone europe-west4-b") as bad_zone:
        api("nodes.create", NODE, "nodeId=t1", locationsId="europe-west4-b")
    assert bad_zone.value.status == "INVALID_ARGUMENT"
    with pytest.raises(ApiError, match='Runtime version "v2-alpha-tpuv5" is not supported'):
        api("nodes.create", {**NODE, "runtimeVersion": "v2-alpha-tpuv5"}, "nodeId=t1")
    op = api("nodes.create", NODE, "nodeId=t1")
    failed = api("operations.get", operationsId=op["name"].rsplit("/", 1)[1])
    assert failed["error"]["code"] == 8
    assert failed["error"]["message"].startswith('There is no more capacity in the zone "europe')
    assert api.data()["nodes"] == {}


def _queued_body(node_id: str = "t1") -> dict[str, Any]:
    spec = {"parent": f"projects/demo-project/locations/{ZONE}", "nodeId": node_id, "node": NODE}
    return {"tpu": {"nodeSpec": [spec]}, "spot": {}}


def test_a_queued_resource_waits_provisions_holds_its_node_and_is_suspended_without_it(
    tmp_path: Path,
) -> None:
    api = Api(tmp_path, queued_polls=1, creating_polls=1)
    api("queuedResources.create", _queued_body(), "queuedResourceId=q1")
    states = [
        api("queuedResources.get", queuedResourcesId="q1")["state"]["state"] for _ in range(3)
    ]
    assert states == ["WAITING_FOR_RESOURCES", "PROVISIONING", "ACTIVE"]
    assert api.data()["nodes"]["t1"]["queued_resource"] == "q1"
    with pytest.raises(ApiError, match="use --force") as refused:
        api("queuedResources.delete", queuedResourcesId="q1")
    assert refused.value.status == "FAILED_PRECONDITION"
    api("nodes.delete", nodesId="t1")
    assert api("queuedResources.get", queuedResourcesId="q1")["state"]["state"] == "SUSPENDED"
    api("queuedResources.delete", queuedResourcesId="q1")
    assert api.data()["queued"] == {} and api.data()["nodes"] == {}


def test_without_capacity_a_queued_resource_waits_for_ever(tmp_path: Path) -> None:
    api = Api(tmp_path, capacity="exhausted", queued_polls=0)
    api("queuedResources.create", _queued_body(), "queuedResourceId=q1")
    states = {api("queuedResources.get", queuedResourcesId="q1")["state"]["state"] for _ in "abc"}
    assert states == {"WAITING_FOR_RESOURCES"}
    assert api.data()["nodes"] == {}


def test_the_scenarios_existing_vms_are_served_in_their_state(tmp_path: Path) -> None:
    vm = {"name": "old", "zone": ZONE, "accelerator_type": "v5litepod-8",
          "runtime_version": "v2-alpha-tpuv5-lite", "state": "PREEMPTED"}  # fmt: skip
    api = Api(tmp_path, existing=[vm])
    listed = api("nodes.list")["nodes"]
    assert [(n["name"].rsplit("/", 1)[1], n["state"]) for n in listed] == [("old", "PREEMPTED")]
    with pytest.raises(ApiError, match="already exists"):
        api("nodes.create", NODE, "nodeId=old")


def test_spot_capacity_is_taken_back_when_the_scenario_says_and_suspends_its_queued_resource(
    tmp_path: Path,
) -> None:
    api = Api(tmp_path, preempt_spot_after=1, creating_polls=0, queued_polls=0)
    api("nodes.create", {**NODE, "schedulingConfig": {"spot": True}}, "nodeId=s1")
    api("nodes.create", NODE, "nodeId=d1")  # on demand: never preempted
    api("queuedResources.create", _queued_body("q-node"), "queuedResourceId=q1")
    seen = [api("queuedResources.get", queuedResourcesId="q1")["state"]["state"] for _ in "abc"]
    assert seen == ["ACTIVE", "SUSPENDED", "SUSPENDED"]  # READY for one call, then taken back
    nodes = {n["name"].rsplit("/", 1)[1]: n for n in api("nodes.list")["nodes"]}
    assert {k: n["state"] for k, n in nodes.items()} == {
        "d1": "READY",
        "q-node": "PREEMPTED",
        "s1": "PREEMPTED",
    }
    assert "networkEndpoints" not in nodes["s1"]
    assert nodes["q-node"]["schedulingConfig"] == {"spot": True}
