"""The fake ``gcloud compute tpus queued-resources``: create, describe, delete. A queued
resource waits ``queued_polls`` describes, then becomes ACTIVE and holds its node."""

from __future__ import annotations

from typing import Any

from tpu_trainer.fakecloud.common import Answer, Handler
from tpu_trainer.fakecloud.gcloud_cli import Ctx
from tpu_trainer.fakecloud.state import FAKE_NOW, State, next_id
from tpu_trainer.fakecloud.tpu_vm_nodes import (
    check_request,
    emit,
    new_node,
    not_found,
    operation,
    zone_of,
)


def _queued_json(qr: dict[str, Any]) -> dict[str, Any]:
    project, zone = qr["project"], qr["zone"]
    data: dict[str, Any] = {
        "name": f"projects/{project}/locations/{zone}/queuedResources/{qr['name']}",
        "createTime": FAKE_NOW,
        "tpu": {
            "nodeSpec": [
                {
                    "parent": f"projects/{project}/locations/{zone}",
                    "nodeId": qr["node_id"],
                    "node": {
                        "acceleratorType": qr["accelerator_type"],
                        "runtimeVersion": qr["runtime_version"],
                        "networkConfig": {"enableExternalIps": True},
                    },
                }
            ]
        },
        "state": {"state": qr["state"]},
        "queueingPolicy": {},
    }
    if qr["spot"]:
        data["spot"] = {}
    if qr["reserved"]:
        data["guaranteed"] = {"reserved": True}
    return data


def _observe_queued(state: State, qr: dict[str, Any]) -> None:
    if qr["state"] != "WAITING_FOR_RESOURCES" or state["tpu_vm"]["behaviour"]["capacity"] != "ok":
        return
    if qr["polls_left"] > 0:
        qr["polls_left"] -= 1
        return
    qr["state"] = "ACTIVE"
    state["tpu_vm"]["nodes"][qr["node_id"]] = new_node(
        qr["node_id"],
        zone=qr["zone"],
        project=qr["project"],
        accelerator_type=qr["accelerator_type"],
        runtime_version=qr["runtime_version"],
        state="CREATING",
        seq=next_id(state),
        polls_left=state["tpu_vm"]["behaviour"]["creating_polls"],
        scheduling={"spot": qr["spot"], "reserved": qr["reserved"]},
        queued_resource=qr["name"],
    )


def _queued_path(project: str, zone: str, name: str) -> str:
    return f"projects/{project}/locations/{zone}/queuedResources/{name}"


def queued_create(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    for flag in ("--zone", "--node-id", "--accelerator-type", "--runtime-version", "--network"):
        p.add_argument(flag)
    for flag in ("--spot", "--reserved", "--best-effort", "--guaranteed", "--async"):
        p.add_argument(flag, action="store_true")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone, "queued_resource")
    if not ns.node_id:
        raise ctx.fail("argument --node-id: Must be specified.", 2)

    def run(state: State, answer: Answer) -> None:
        project = ctx.project or state["project"]
        tv = state["tpu_vm"]
        if ns.name in tv["queued"]:
            raise ctx.fail(
                f"ALREADY_EXISTS: Resource '{_queued_path(project, zone, ns.name)}' already exists"
            )
        check_request(ctx, state, zone, ns.accelerator_type, ns.runtime_version)
        tv["queued"][ns.name] = {
            "name": ns.name,
            "zone": zone,
            "project": project,
            "node_id": ns.node_id,
            "accelerator_type": ns.accelerator_type,
            "runtime_version": ns.runtime_version,
            "state": "WAITING_FOR_RESOURCES",
            "polls_left": tv["behaviour"]["queued_polls"],
            "spot": ns.spot,
            "reserved": ns.reserved,
        }
        answer.err(f"Create request issued for: [{ns.name}]")
        answer.err(f"Waiting for operation [{operation(project, zone, state)}] to complete...done.")
        answer.err(f"Created queued_resource [{ns.name}].")

    return run


def _find_queued(ctx: Ctx, state: State, name: str, zone: str) -> dict[str, Any]:
    project = ctx.project or state["project"]
    qr: dict[str, Any] | None = state["tpu_vm"]["queued"].get(name)
    if qr is None or qr["zone"] != zone or qr["project"] != project:
        raise not_found(ctx, _queued_path(project, zone, name))
    return qr


def queued_describe(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--zone")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone, "queued_resource")

    def run(state: State, answer: Answer) -> None:
        answer.latency = "describe"
        qr = _find_queued(ctx, state, ns.name, zone)
        _observe_queued(state, qr)
        emit(ctx, answer, _queued_json(qr), many=False)

    return run


def queued_delete(ctx: Ctx, args: list[str]) -> Handler:
    p = ctx.parser()
    p.add_argument("name")
    p.add_argument("--zone")
    p.add_argument("--force", action="store_true")
    p.add_argument("--async", action="store_true", dest="run_async")
    ns = p.parse_args(args)
    zone = zone_of(ctx, ns.zone, "queued_resource")

    def run(state: State, answer: Answer) -> None:
        qr = _find_queued(ctx, state, ns.name, zone)
        nodes = state["tpu_vm"]["nodes"]
        if qr["node_id"] in nodes and not ns.force:
            raise ctx.fail(
                f"FAILED_PRECONDITION: Queued resource '{ns.name}' still has node "
                f"'{qr['node_id']}': delete the node first or use --force."
            )
        nodes.pop(qr["node_id"], None)
        del state["tpu_vm"]["queued"][ns.name]
        answer.err(f"Delete request issued for: [{ns.name}]")
        answer.err(
            f"Waiting for operation [{operation(qr['project'], zone, state)}] to complete...done."
        )
        answer.err(f"Deleted queued_resource [{ns.name}].")

    return run
