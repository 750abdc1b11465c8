"""The fake's TPU VMs as data: the state they start from, the API's JSON for a node, and the
checks and texts every create shares (docs/simulated-cloud.md, "TPU VMs")."""

from __future__ import annotations

import hashlib
import zlib
from typing import TYPE_CHECKING, Any

from tpu_trainer.errors import TopologyError
from tpu_trainer.fakecloud.common import Answer, ToolExit
from tpu_trainer.fakecloud.formats import FormatError, render
from tpu_trainer.fakecloud.gcloud_cli import Ctx
from tpu_trainer.fakecloud.state import FAKE_NOW, State, next_id
from tpu_trainer.plan.slices import Slice

if TYPE_CHECKING:  # the fake tools never load a scenario: keep them quick to start
    from tpu_trainer.fakecloud.scenario import Scenario

_RUNTIMES = {
    "v6e": ("v2-alpha-tpuv6e",),
    "v5p": ("v2-alpha-tpuv5",),
    "v5litepod": ("v2-alpha-tpuv5-lite",),
    "v4": ("tpu-vm-v4-base", "v2-alpha-tpuv4"),
}
BASE_IMAGE = "tpu-ubuntu2204-base"
_LIST_COLUMNS = [
    "name",
    "zone:label=ZONE",
    "acceleratorType:label=ACCELERATOR_TYPE",
    "network:label=NETWORK",
    "cidrBlock:label=RANGE",
    "state:label=STATUS",
]


def initial_tpu_vms(scenario: Scenario) -> dict[str, Any]:
    """The ``tpu_vm`` part of the state: behaviour, nodes (the scenario's existing VMs) and
    queued resources."""
    tv = scenario.tpu_vm
    zones = list(tv.zones) or [f"{scenario.region}-{z}" for z in "abc"]

    def script(s: Any) -> dict[str, Any]:
        return {
            "log": s.log,
            "other_workers_log": s.other_workers_log,
            "exit_code": s.exit_code,
            "failing_worker": s.failing_worker,
            "failing_exit_code": s.failing_exit_code,
            "failing_log": s.failing_log,
        }

    behaviour = {
        "zones": zones,
        "creating_polls": tv.creating_polls,
        "queued_polls": tv.queued_polls,
        "capacity": tv.capacity,
        "install": script(tv.install),
        "devices": {str(k): v for k, v in tv.devices.items()},
        "train": {
            **script(tv.train.script),
            "hang": tv.train.hang,
            "echo_env": list(tv.train.echo_env),
        },
    }
    nodes = {
        vm.name: new_node(
            vm.name,
            zone=vm.zone,
            project=scenario.project,
            accelerator_type=vm.accelerator_type,
            runtime_version=vm.runtime_version,
            state=vm.state,
            seq=1 + i,
        )
        for i, vm in enumerate(tv.existing)
    }
    return {"tpu_vm": {"behaviour": behaviour, "nodes": nodes, "queued": {}}}


def new_node(
    name: str,
    *,
    zone: str,
    project: str,
    accelerator_type: str,
    runtime_version: str,
    state: str,
    seq: int,
    polls_left: int = 0,
    scheduling: dict[str, bool] | None = None,
    queued_resource: str | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "zone": zone,
        "project": project,
        "accelerator_type": accelerator_type,
        "runtime_version": runtime_version,
        "state": state,
        "polls_left": polls_left,
        "scheduling": dict(scheduling or {}),
        "queued_resource": queued_resource,
        "id": str(7_100_000_000_000_000_000 + seq),
        "seq": seq,
        "files": {},
        "venvs": [],
        "accept_env": [],
        "env_seen": [],
        "train_running": False,
    }


def vm_slice(accelerator_type: str) -> Slice | None:
    try:
        return Slice.parse(accelerator_type)
    except TopologyError:
        return None


def node_json(node: dict[str, Any]) -> dict[str, Any]:
    """``tpu-vm describe --format=json`` (API v2 Node); endpoints once the VM is READY."""
    project, zone, name = node["project"], node["zone"], node["name"]
    found = vm_slice(node["accelerator_type"])
    region = zone.rsplit("-", 1)[0]
    data: dict[str, Any] = {
        "name": f"projects/{project}/locations/{zone}/nodes/{name}",
        "acceleratorType": node["accelerator_type"],
        "apiVersion": "V2",
        "cidrBlock": "10.128.0.0/20",
        "createTime": FAKE_NOW,
        "id": node["id"],
        "networkConfig": {
            "enableExternalIps": True,
            "network": f"projects/{project}/global/networks/default",
            "subnetwork": f"projects/{project}/regions/{region}/subnetworks/default",
        },
        "runtimeVersion": node["runtime_version"],
        "schedulingConfig": {k: True for k, v in node["scheduling"].items() if v},
        "serviceAccount": {
            "email": f"{zlib.crc32(project.encode())}-compute@developer.gserviceaccount.com",
            "scope": ["https://www.googleapis.com/auth/cloud-platform"],
        },
        "shieldedInstanceConfig": {},
        "state": node["state"],
    }
    if found is not None:
        data["acceleratorConfig"] = {
            "topology": found.topology_name,
            "type": found.accelerator.xpk_prefix.upper().replace("LITEPOD", "LITE_POD"),
        }
    if node.get("queued_resource"):
        data["queuedResource"] = (
            f"projects/{project}/locations/{zone}/queuedResources/{node['queued_resource']}"
        )
    if node["state"] == "READY":
        data["health"] = "HEALTHY"
        hosts = found.hosts if found is not None else 1
        data["networkEndpoints"] = [
            {
                "accessConfig": {"externalIp": f"34.{node['seq'] % 250}.{w // 250}.{w % 250 + 1}"},
                "ipAddress": f"10.128.{node['seq'] % 250}.{w + 2}",
                "port": 8470,
            }
            for w in range(hosts)
        ]
    return data


def emit(ctx: Ctx, answer: Answer, data: Any, *, many: bool) -> None:
    try:
        text = render(data, ctx.fmt, many=many, default_keys=_LIST_COLUMNS)
    except FormatError:
        raise ToolExit(f"ERROR: ({ctx.command}) Format [{ctx.fmt}] not found.\n", 1) from None
    if text:
        answer.out(text)
    if many and not data and (ctx.fmt is None or ctx.fmt.startswith("table")):
        answer.err("Listed 0 items.")


def zone_of(ctx: Ctx, zone: str | None, kind: str = "tpu") -> str:
    if not zone:
        raise ctx.fail(
            f"Error parsing [{kind}].\nThe [{kind}] resource is not properly specified.\n"
            "Failed to find attribute [zone]. The attribute can be set in the following ways: \n"
            "- provide the argument `--zone` on the command line\n"
            "- set the property `compute/zone`"
        )
    return zone


def node_path(project: str, zone: str, name: str) -> str:
    return f"projects/{project}/locations/{zone}/nodes/{name}"


def not_found(ctx: Ctx, path: str) -> ToolExit:
    return ctx.fail(f"NOT_FOUND: Resource '{path}' was not found")


def find_node(ctx: Ctx, state: State, name: str, zone: str) -> dict[str, Any]:
    project = ctx.project or state["project"]
    node: dict[str, Any] | None = state["tpu_vm"]["nodes"].get(name)
    if node is None or node["zone"] != zone or node["project"] != project:
        raise not_found(ctx, node_path(project, zone, name))
    return node


def observe(node: dict[str, Any]) -> None:
    """A read of a CREATING VM: after ``creating_polls`` reads it is READY."""
    if node["state"] == "CREATING":
        if node["polls_left"] <= 0:
            node["state"] = "READY"
        else:
            node["polls_left"] -= 1


def operation(project: str, zone: str, state: State) -> str:
    op = f"operation-{1763791200000 + next_id(state)}-{next_id(state):013x}-fake"
    return f"projects/{project}/locations/{zone}/operations/{op}"


def eid(text: str, state: State) -> str:
    """An error id like the API's (``0xe1d1ce9f2eae7a03``), made up but stable per state."""
    return "0x" + hashlib.sha256(f"{text}{next_id(state)}".encode()).hexdigest()[:16]


def _bad_request(ctx: Ctx, detail: str, state: State) -> ToolExit:
    return ctx.fail(
        f"INVALID_ARGUMENT: Cloud TPU received a bad request. {detail} [EID: {eid(detail, state)}]"
    )


def check_request(
    ctx: Ctx, state: State, zone: str, accelerator_type: str | None, version: str | None
) -> None:
    """The checks a create makes before it starts: zone, accelerator type, runtime version."""
    offered = state["tpu_vm"]["behaviour"]["zones"]
    found = vm_slice(accelerator_type or "")
    if zone not in offered or found is None or found.accelerator.tpu_vm_runtime is None:
        acc = accelerator_type or "v2-8"
        raise _bad_request(
            ctx,
            f'The requested accelerator configuration for accelerator type, "{acc}", could not '
            f'be found in the zonal accelerator configurations for "{zone}".; the accelerator '
            f"{acc} was not found in zone {zone}",
            state,
        )
    allowed = (*_RUNTIMES.get(found.accelerator.xpk_prefix, ()), BASE_IMAGE)
    if version not in allowed:
        raise _bad_request(
            ctx,
            f'Runtime version "{version}" is not supported for accelerator type '
            f'"{accelerator_type}" in zone "{zone}".',
            state,
        )


def no_capacity(ctx: Ctx, zone: str, state: State) -> ToolExit:
    message = (
        f'There is no more capacity in the zone \\"{zone}\\"; you can try in another zone where '
        "Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) "
        f"[EID: {eid(zone, state)}]"
    )
    return ToolExit(f'ERROR: ({ctx.command}) {{\n  "code": 8,\n  "message": "{message}"\n}}\n', 1)
