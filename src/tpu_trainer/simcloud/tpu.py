"""Emulated Cloud TPU (``tpu.googleapis.com`` v2 and v2alpha1): TPU VMs and queued resources.

A node create answers with a long-running operation; the node is CREATING until the scenario's
clock has run ``create_seconds``, then READY with one network endpoint per worker (or the
operation ends with the scenario's error and the node is gone, as a stockout does). A queued
resource goes ACCEPTED -> WAITING_FOR_RESOURCES -> PROVISIONING -> ACTIVE (its node READY), or
FAILED. A delete is an operation that is done after ``delete_seconds``. ``tpu-vm ssh`` and
``scp`` are not API calls: they stay with the local worker stand-in.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import RPC_CODES, ApiError, Call, Clock, utc_timestamp


@dataclass(frozen=True)
class TpuPlan:
    """What the scenario says a create does: how long, how many workers, or which error."""

    create_seconds: float = 0.0
    wait_seconds: float = 0.0  # queued resources: time spent WAITING_FOR_RESOURCES
    workers: int = 1
    error: tuple[str, str] | None = None  # (canonical code, message)


Decide = Callable[[str, JsonObject], TpuPlan]


def _fine(_parent: str, _body: JsonObject) -> TpuPlan:
    return TpuPlan()


@dataclass
class _Node:
    body: JsonObject
    ready_at: float
    plan: TpuPlan
    operation: str
    gone_at: float | None = None


@dataclass
class Tpu:
    """The Cloud TPU service."""

    clock: Clock
    decide: Decide = _fine
    delete_seconds: float = 0.0
    prefix: str = "/tpu/"
    apis: tuple[DiscoveryApi, ...] = field(
        default_factory=lambda: (load_api("tpu.v2"), load_api("tpu.v2alpha1"))
    )
    _nodes: dict[str, _Node] = field(default_factory=dict)
    _queued: dict[str, JsonObject] = field(default_factory=dict)
    _queued_times: dict[str, tuple[float, float, TpuPlan]] = field(default_factory=dict)
    _ops: dict[str, tuple[JsonObject, float]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def handle(self, call: Call) -> JsonObject:
        with self._lock:
            self._advance()
            name = call.method.id.removeprefix("tpu.projects.locations.")
            handler = {
                "nodes.get": self._node_get,
                "nodes.list": self._node_list,
                "nodes.create": self._node_create,
                "nodes.delete": self._node_delete,
                "queuedResources.get": self._queued_get,
                "queuedResources.list": self._queued_list,
                "queuedResources.create": self._queued_create,
                "queuedResources.delete": self._queued_delete,
                "operations.get": self._operation_get,
            }.get(name)
            if handler is None:
                raise ApiError(501, f"Method {call.method.id} is not emulated.")
            return handler(call)

    # nodes ------------------------------------------------------------------------------
    @staticmethod
    def _parent(p: dict[str, str]) -> str:
        return f"projects/{p['projectsId']}/locations/{p['locationsId']}"

    def _node_get(self, call: Call) -> JsonObject:
        path = f"{self._parent(call.params)}/nodes/{call.params['nodesId']}"
        node = self._nodes.get(path)
        if node is None:
            raise ApiError(404, f"{path} not found")
        return self._node_view(node)

    def _node_list(self, call: Call) -> JsonObject:
        prefix = f"{self._parent(call.params)}/nodes/"
        nodes = [self._node_view(n) for k, n in sorted(self._nodes.items()) if k.startswith(prefix)]
        return {"nodes": nodes}

    def _node_create(self, call: Call) -> JsonObject:
        parent = self._parent(call.params)
        node_id = call.arg("nodeId")
        if not node_id:
            raise ApiError(400, "nodeId is required")
        path = f"{parent}/nodes/{node_id}"
        if path in self._nodes:
            raise ApiError(409, f"Resource '{path}' already exists")
        body = dict(call.body or {})
        plan = self.decide(parent, body)
        op = self._new_operation(parent, path, "create", plan.create_seconds)
        self._add_node(path, body, plan, op, self.clock() + plan.create_seconds)
        self._advance()
        return self._ops[op][0]

    def _add_node(self, path: str, body: JsonObject, plan: TpuPlan, op: str, ready: float) -> None:
        view = {k: v for k, v in body.items() if k not in ("state", "networkEndpoints")}
        view.update(name=path, createTime=utc_timestamp(self.clock()), apiVersion="V2")
        self._nodes[path] = _Node(view, ready, plan, op)

    def _node_delete(self, call: Call) -> JsonObject:
        path = f"{self._parent(call.params)}/nodes/{call.params['nodesId']}"
        node = self._nodes.get(path)
        if node is None:
            raise ApiError(404, f"{path} not found")
        node.gone_at = self.clock() + self.delete_seconds
        op = self._new_operation(self._parent(call.params), path, "delete", self.delete_seconds)
        self._advance()
        return self._ops[op][0]

    def _node_view(self, node: _Node) -> JsonObject:
        view = dict(node.body)
        if node.gone_at is not None:
            view["state"] = "DELETING"
        elif node.ready_at > self.clock():
            view["state"] = "CREATING"
        else:
            view["state"] = "READY"
            view["health"] = "HEALTHY"
            view["networkEndpoints"] = [
                {"ipAddress": f"10.130.0.{i + 2}", "port": 8470} for i in range(node.plan.workers)
            ]
        return view

    # queued resources -------------------------------------------------------------------
    def _queued_get(self, call: Call) -> JsonObject:
        path = f"{self._parent(call.params)}/queuedResources/{call.params['queuedResourcesId']}"
        if path not in self._queued:
            raise ApiError(404, f"{path} not found")
        return self._queued[path]

    def _queued_list(self, call: Call) -> JsonObject:
        prefix = f"{self._parent(call.params)}/queuedResources/"
        found = [q for k, q in sorted(self._queued.items()) if k.startswith(prefix)]
        return {"queuedResources": found}

    def _queued_create(self, call: Call) -> JsonObject:
        parent = self._parent(call.params)
        qr_id = call.arg("queuedResourceId")
        path = f"{parent}/queuedResources/{qr_id}"
        if not qr_id:
            raise ApiError(400, "queuedResourceId is required")
        if path in self._queued:
            raise ApiError(409, f"Resource '{path}' already exists")
        body = dict(call.body or {})
        plan = self.decide(parent, body)
        now = self.clock()
        self._queued[path] = {**body, "name": path, "createTime": utc_timestamp(now),
                              "state": {"state": "ACCEPTED"}}  # fmt: skip
        self._queued_times[path] = (now + plan.wait_seconds, now + plan.create_seconds, plan)
        op = self._new_operation(parent, path, "create", 0.0)
        self._advance()
        return self._ops[op][0]

    def _queued_delete(self, call: Call) -> JsonObject:
        parent = self._parent(call.params)
        path = f"{parent}/queuedResources/{call.params['queuedResourcesId']}"
        qr = self._queued.get(path)
        if qr is None:
            raise ApiError(404, f"{path} not found")
        held = self._held_nodes(path)
        if held and call.arg("force").lower() != "true":
            raise ApiError(
                400,
                "Can only delete queued resources in ACCEPTED, FAILED or SUSPENDED state, or "
                "use --force to delete the queued resource and its nodes",
                status="FAILED_PRECONDITION",
            )
        for node_path in held:
            self._nodes[node_path].gone_at = self.clock() + self.delete_seconds
        del self._queued[path]
        self._queued_times.pop(path, None)
        op = self._new_operation(parent, path, "delete", self.delete_seconds)
        self._advance()
        return self._ops[op][0]

    def _held_nodes(self, qr_path: str) -> list[str]:
        return [k for k, n in self._nodes.items() if n.body.get("queuedResource") == qr_path]

    # operations and time ----------------------------------------------------------------
    def _new_operation(self, parent: str, target: str, verb: str, seconds: float) -> str:
        now = self.clock()
        name = f"{parent}/operations/operation-{int(now * 1000)}-{next(self._ids)}"
        body: JsonObject = {
            "name": name,
            "done": False,
            "metadata": {
                "@type": "type.googleapis.com/google.cloud.common.OperationMetadata",
                "createTime": utc_timestamp(now),
                "target": target,
                "verb": verb,
                "apiVersion": "v2",
            },
        }
        self._ops[name] = (body, now + seconds)
        return name

    def _operation_get(self, call: Call) -> JsonObject:
        name = f"{self._parent(call.params)}/operations/{call.params['operationsId']}"
        if name not in self._ops:
            raise ApiError(404, f"{name} not found")
        return self._ops[name][0]

    def _advance(self) -> None:
        now = self.clock()
        for path, (waited, ready, plan) in list(self._queued_times.items()):
            self._advance_queued(path, waited, ready, plan, now)
        for path, node in list(self._nodes.items()):
            if node.gone_at is not None and node.gone_at <= now:
                del self._nodes[path]
            elif node.ready_at <= now and node.plan.error is not None:
                self._fail(node.operation, node.plan.error)
                del self._nodes[path]
        for body, done_at in self._ops.values():
            if not body["done"] and done_at <= now:
                body["done"] = True
                target = body["metadata"]["target"]
                if target in self._nodes and body["metadata"]["verb"] == "create":
                    body["response"] = {
                        "@type": "type.googleapis.com/google.cloud.tpu.v2.Node",
                        **self._node_view(self._nodes[target]),
                    }

    def _advance_queued(
        self, path: str, waited: float, ready: float, plan: TpuPlan, now: float
    ) -> None:
        qr = self._queued[path]
        state = qr["state"]["state"]
        if state in ("ACTIVE", "FAILED"):
            return
        if plan.error is not None and now >= waited:
            code, message = plan.error
            qr["state"] = {"state": "FAILED", "failedData": {"error": {
                "code": RPC_CODES.get(code, 2), "message": message}}}  # fmt: skip
            return
        if now < waited:
            qr["state"] = {"state": "WAITING_FOR_RESOURCES"}
            return
        if now < ready:
            qr["state"] = {"state": "PROVISIONING"}
            return
        qr["state"] = {"state": "ACTIVE"}
        parent = path.rsplit("/queuedResources/", 1)[0]
        for spec in qr.get("tpu", {}).get("nodeSpec", []):
            node_path = f"{parent}/nodes/{spec.get('nodeId', '')}"
            body = {**spec.get("node", {}), "queuedResource": path}
            op = self._new_operation(parent, node_path, "create", 0.0)
            self._add_node(node_path, body, plan, op, now)

    def _fail(self, op_name: str, error: tuple[str, str]) -> None:
        body, _ = self._ops[op_name]
        code, message = error
        body["done"] = True
        body["error"] = {"code": RPC_CODES.get(code, 2), "message": message}
