"""Emulated Cloud TPU (``tpu.googleapis.com`` v2 and v2alpha1): TPU VMs and queued resources.

The state lives where :mod:`tpu_trainer.simcloud.tpu_state` says (a rehearsal's state file),
and ages by a scenario clock that moves one tick per API call. A node create is checked at once
(zone, accelerator type, runtime version: the API's 400 INVALID_ARGUMENT), then answers with a
long-running operation; the node is CREATING for ``creating_polls`` calls, then READY with one
network endpoint per worker, and the operation is done with the node as its response. With no
capacity (``capacity: exhausted``) the operation ends with RESOURCE_EXHAUSTED (code 8) and the
node is gone, as a stockout does. A queued resource goes ACCEPTED -> WAITING_FOR_RESOURCES (for
``queued_polls`` calls, for ever without capacity) -> PROVISIONING -> ACTIVE (its node READY);
FAILED when its node fails, SUSPENDED when its node is deleted. A spot node is PREEMPTED
``preempt_spot_after`` calls after it is READY, when the scenario says so. Deletes are operations done
one tick later. ``tpu-vm ssh`` and ``scp`` are not API calls: the local worker stand-in reads
the same nodes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tpu_trainer.fakecloud.state import advance, clock
from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import RPC_CODES, ApiError, Call, handler_for, operation_id
from tpu_trainer.simcloud.tpu_state import (
    START,
    TICK_SECONDS,
    MemoryState,
    Record,
    StateAccess,
    check_offer,
    next_seq,
    stamp,
    tpu_section,
)
from tpu_trainer.simcloud.tpu_views import node_view, queued_view, ready

Handler = Callable[[Record, dict[str, Any], Call], JsonObject]


def _parent(p: dict[str, str]) -> str:
    return f"projects/{p['projectsId']}/locations/{p['locationsId']}"


def _ticks(behaviour: Record, key: str) -> float:
    return float(behaviour.get(key, 1)) * TICK_SECONDS


def _mine(record: Record | None, params: dict[str, str]) -> bool:
    return record is not None and (record["project"], record["zone"]) == (
        params["projectsId"],
        params["locationsId"],
    )


# ---- nodes --------------------------------------------------------------------------------
def _find(tv: Record, kind: str, params: dict[str, str]) -> Record:
    """``kind`` (nodes, queuedResources) named by the path, or the API's 404."""
    key = "nodes" if kind == "nodes" else "queued"
    record: Record | None = tv[key].get(params[f"{kind}Id"])
    if record is None or not _mine(record, params):
        name = f"{_parent(params)}/{kind}/{params[f'{kind}Id']}"
        raise ApiError(404, f"Resource '{name}' was not found")
    return record


def _listed(records: dict[str, Record], params: dict[str, str]) -> list[Record]:
    """The records of the path's project and location (``-``: every location)."""
    return [
        r
        for _, r in sorted(records.items())
        if r["project"] == params["projectsId"] and params["locationsId"] in ("-", r["zone"])
    ]


def _node(tv: Record, params: dict[str, str]) -> Record:
    return _find(tv, "nodes", params)


def _node_get(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    return node_view(_node(tv, call.params), call.api.version)


def _node_list(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    version = call.api.version
    return {"nodes": [node_view(n, version) for n in _listed(tv["nodes"], call.params)]}


def _check_project(state: dict[str, Any], params: dict[str, str]) -> None:
    if state.get("project") not in (None, params["projectsId"]):
        raise ApiError(
            403, f"Permission denied on 'locations/{params['locationsId']}' (or it may not exist)."
        )


def _new_id(tv: Record, state: dict[str, Any], call: Call, kind: str) -> tuple[str, str]:
    """The id a create of ``kind`` asks for and its path: the API's 400 without one, 403 in
    another project, 409 when it is taken."""
    p, arg = call.params, "nodeId" if kind == "nodes" else "queuedResourceId"
    new_id = call.arg(arg)
    if not new_id:
        raise ApiError(400, f"{arg} is required")
    _check_project(state, p)
    path = f"{_parent(p)}/{kind}/{new_id}"
    if new_id in tv["nodes" if kind == "nodes" else "queued"]:
        raise ApiError(409, f"Resource '{path}' already exists")
    return new_id, path


def _check_node(tv: Record, zone: str, node: Record) -> None:
    """A node the zone offers (``check_offer``): its accelerator type, its runtime version."""
    accelerator, version = node.get("acceleratorType", ""), node.get("runtimeVersion", "")
    check_offer(tv["behaviour"], zone, str(accelerator), str(version))


def _node_create(tv: Record, state: dict[str, Any], call: Call) -> JsonObject:
    p = call.params
    node_id, path = _new_id(tv, state, call, "nodes")
    body = dict(call.body or {})
    _check_node(tv, p["locationsId"], body)
    op = _new_operation(tv, _parent(p), path, "create", _ticks(tv["behaviour"], "creating_polls"))
    _add_node(tv, p, node_id, body, op)
    _advance(tv)
    return _operation(tv, op)


def _add_node(
    tv: Record, p: dict[str, str], node_id: str, body: Record, op: str, queued: str | None = None
) -> None:
    now, seq = float(tv["clock"]), next_seq(tv)
    node: Record = {
        "name": node_id,
        "zone": p["locationsId"],
        "project": p["projectsId"],
        "accelerator_type": str(body.get("acceleratorType", "")),
        "runtime_version": str(body.get("runtimeVersion", "")),
        "state": "CREATING",
        "workers": [],
        "queued_resource": queued,
        "id": str(7_100_000_000_000_000_000 + seq),
        "seq": seq,
        "request": {k: v for k, v in body.items() if k not in ("state", "networkEndpoints")},
        "create_time": stamp(now),
        "ready_at": tv["operations"][op]["done_at"],
        "operation": op,
    }
    if tv["behaviour"].get("capacity") == "exhausted":
        zone = p["locationsId"]
        eid = hashlib.sha256(f"{zone}{seq}".encode()).hexdigest()[:16]
        node["error"] = [
            "RESOURCE_EXHAUSTED",
            f'There is no more capacity in the zone "{zone}"; you can try in another zone where '
            f"Cloud TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions) "
            f"[EID: 0x{eid}]",
        ]
    tv["nodes"][node_id] = node


def _node_delete(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    node = _node(tv, call.params)
    _delete_node(tv, node)
    path = f"{_parent(call.params)}/nodes/{node['name']}"
    op = _new_operation(tv, _parent(call.params), path, "delete", TICK_SECONDS)
    return _operation(tv, op)


def _delete_node(tv: Record, node: Record) -> None:
    """DELETING now, gone one tick later."""
    if node.get("gone_at") is None:
        node["gone_at"] = float(tv["clock"]) + TICK_SECONDS
    node["state"] = "DELETING"


# ---- queued resources ---------------------------------------------------------------------
def _queued(tv: Record, params: dict[str, str]) -> Record:
    return _find(tv, "queuedResources", params)


def _queued_get(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    return queued_view(_queued(tv, call.params))


def _queued_list(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    return {"queuedResources": [queued_view(q) for q in _listed(tv["queued"], call.params)]}


def _queued_create(tv: Record, state: dict[str, Any], call: Call) -> JsonObject:
    p = call.params
    qr_id, path = _new_id(tv, state, call, "queuedResources")
    body = dict(call.body or {})
    specs = (body.get("tpu") or {}).get("nodeSpec") or []
    if len(specs) != 1 or not specs[0].get("nodeId"):
        raise ApiError(400, "Cloud TPU received a bad request. Exactly one node spec with a nodeId")
    _check_node(tv, p["locationsId"], specs[0].get("node") or {})
    now = float(tv["clock"])
    tv["queued"][qr_id] = {
        "name": qr_id,
        "zone": p["locationsId"],
        "project": p["projectsId"],
        "node_id": specs[0]["nodeId"],
        "request": body,
        "state": "ACCEPTED",
        "create_time": stamp(now),
        "accepted_until": now + TICK_SECONDS,
        "waited_at": now + TICK_SECONDS + _ticks(tv["behaviour"], "queued_polls"),
    }
    op = _new_operation(tv, _parent(p), path, "create", 0.0)
    _advance(tv)
    return _operation(tv, op)


def _queued_delete(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    qr = _queued(tv, call.params)
    held = tv["nodes"].get(qr["node_id"])
    holds = held is not None and held.get("queued_resource") == qr["name"]
    if holds and call.arg("force").lower() != "true":
        raise ApiError(
            400,
            "Can only delete queued resources in ACCEPTED, FAILED or SUSPENDED state, or "
            "use --force to delete the queued resource and its nodes",
            status="FAILED_PRECONDITION",
        )
    if held is not None and holds:
        _delete_node(tv, held)
    del tv["queued"][qr["name"]]
    path = f"{_parent(call.params)}/queuedResources/{qr['name']}"
    op = _new_operation(tv, _parent(call.params), path, "delete", TICK_SECONDS)
    return _operation(tv, op)


# ---- operations and time ------------------------------------------------------------------
def _new_operation(tv: Record, parent: str, target: str, verb: str, seconds: float) -> str:
    now = float(tv["clock"])
    name = f"{parent}/operations/{operation_id(now, next_seq(tv), '013x')}"
    body: JsonObject = {
        "name": name,
        "done": False,
        "metadata": {
            "@type": "type.googleapis.com/google.cloud.common.OperationMetadata",
            "createTime": stamp(now),
            "target": target,
            "verb": verb,
            "apiVersion": "v2",
        },
    }
    tv["operations"][name] = {"body": body, "done_at": now + seconds}
    return name


def _operation(tv: Record, name: str) -> JsonObject:
    body: JsonObject = tv["operations"][name]["body"]
    return body


def _operation_get(tv: Record, _state: dict[str, Any], call: Call) -> JsonObject:
    name = f"{_parent(call.params)}/operations/{call.params['operationsId']}"
    if name not in tv["operations"]:
        raise ApiError(404, f"Resource '{name}' was not found")
    return _operation(tv, name)


def _advance(tv: Record) -> None:
    """Bring every resource to what the clock says now."""
    now = float(tv["clock"])
    for qr in tv["queued"].values():
        _advance_queued(tv, qr, now)
    for name, node in list(tv["nodes"].items()):
        if node.get("gone_at") is not None:
            if float(node["gone_at"]) <= now:
                del tv["nodes"][name]
        elif node["state"] == "CREATING" and float(node["ready_at"]) <= now:
            if node.get("error"):
                _fail(tv, str(node["operation"]), node["error"])
                del tv["nodes"][name]
            else:
                ready(node)
                _arm_preemption(tv, node, now)
        elif node["state"] == "READY" and float(node.get("preempt_at", now + 1)) <= now:
            node["state"] = "PREEMPTED"
    for qr in tv["queued"].values():
        _advance_queued(tv, qr, now)
    for op in tv["operations"].values():
        body = op["body"]
        if body["done"] or float(op["done_at"]) > now:
            continue
        body["done"] = True
        target = body["metadata"]["target"]
        node = tv["nodes"].get(target.rsplit("/", 1)[-1])
        if body["metadata"]["verb"] == "create" and "/nodes/" in target and node is not None:
            body["response"] = {
                "@type": "type.googleapis.com/google.cloud.tpu.v2.Node",
                **node_view(node),
            }


def _advance_queued(tv: Record, qr: Record, now: float) -> None:
    state = qr["state"]
    node = tv["nodes"].get(qr["node_id"])
    if state == "ACCEPTED" and now >= float(qr["accepted_until"]):
        state = "WAITING_FOR_RESOURCES"
    capacity = tv["behaviour"].get("capacity", "ok") != "exhausted"
    if state == "WAITING_FOR_RESOURCES" and now >= float(qr["waited_at"]) and capacity:
        spec = qr["request"]["tpu"]["nodeSpec"][0]
        params = {"projectsId": qr["project"], "locationsId": qr["zone"]}
        path = f"{_parent(params)}/nodes/{qr['node_id']}"
        op = _new_operation(
            tv, _parent(params), path, "create", _ticks(tv["behaviour"], "creating_polls")
        )
        body = dict(spec.get("node") or {})
        if "spot" in qr["request"]:
            body["schedulingConfig"] = {**body.get("schedulingConfig", {}), "spot": True}
        _add_node(tv, params, qr["node_id"], body, op, qr["name"])
        state = "PROVISIONING"
    elif state == "PROVISIONING" and node is None:
        state = "FAILED"
        error = _operation(tv, _last_create(tv, qr)).get("error") or {"code": 13}
        qr["failed"] = error
    elif state == "PROVISIONING" and node is not None and node["state"] == "READY":
        state = "ACTIVE"
    elif state == "ACTIVE" and (node is None or node["state"] in ("DELETING", "PREEMPTED")):
        state = "SUSPENDED"
    qr["state"] = state


def _arm_preemption(tv: Record, node: Record, now: float) -> None:
    """A spot node is taken back ``preempt_spot_after`` calls after it is READY."""
    after = tv["behaviour"].get("preempt_spot_after")
    spot = (node["request"].get("schedulingConfig") or {}).get("spot")
    if after is not None and spot:
        node["preempt_at"] = now + float(after) * TICK_SECONDS


def _last_create(tv: Record, qr: Record) -> str:
    target = f"projects/{qr['project']}/locations/{qr['zone']}/nodes/{qr['node_id']}"
    names = [n for n, op in tv["operations"].items() if op["body"]["metadata"]["target"] == target]
    return str(names[-1])


def _fail(tv: Record, op_name: str, error: list[str]) -> None:
    body = _operation(tv, op_name)
    code, message = error
    body["done"] = True
    body["error"] = {"code": RPC_CODES.get(code, 2), "message": message}


_HANDLERS: dict[str, Handler] = {
    "nodes.get": _node_get,
    "nodes.list": _node_list,
    "nodes.create": _node_create,
    "nodes.delete": _node_delete,
    "queuedResources.get": _queued_get,
    "queuedResources.list": _queued_list,
    "queuedResources.create": _queued_create,
    "queuedResources.delete": _queued_delete,
    "operations.get": _operation_get,
}


@dataclass
class Tpu:
    """The Cloud TPU service over ``state`` (in this process's memory unless given)."""

    state: StateAccess = field(default_factory=MemoryState)
    prefix: str = "/tpu/"
    apis: tuple[DiscoveryApi, ...] = field(
        default_factory=lambda: (load_api("tpu.v2"), load_api("tpu.v2alpha1"))
    )

    def handle(self, call: Call) -> JsonObject:
        handler = handler_for(_HANDLERS, call.method.id, "tpu.projects.locations.")
        with self.state() as state:
            tv = tpu_section(state)
            tv["clock"] = clock(state) - START
            _advance(tv)
            try:
                return handler(tv, state, call)
            finally:
                advance(state, TICK_SECONDS)
