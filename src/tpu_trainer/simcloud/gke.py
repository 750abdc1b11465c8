"""Emulated GKE (``container.googleapis.com`` v1 and v1beta1): clusters, node pools, operations.

Node pools follow GKE's state machine: a create answers at once with a RUNNING operation and a
PROVISIONING pool; when the scenario's clock has run ``create_seconds`` the pool becomes RUNNING
(or ERROR, the operation DONE with the error that made it so). A second create with a name in
use is a 409; a delete while the pool's create still runs is GKE's 400; a delete makes the pool
STOPPING until ``delete_seconds`` have passed, then it is gone.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import RPC_CODES, ApiError, Call, Clock, utc_timestamp


@dataclass(frozen=True)
class CreateFailure:
    """How a node pool create ends badly: at once (an HTTP error) or in its operation."""

    canonical: str  # a StatusCondition canonicalCode: RESOURCE_EXHAUSTED, INVALID_ARGUMENT, ...
    message: str
    http_code: int | None = None  # set: the create call itself fails with this code
    condition_code: str = ""  # StatusCondition.code, e.g. GCE_STOCKOUT


@dataclass(frozen=True)
class PoolPlan:
    """What the scenario says a create of this pool does."""

    create_seconds: float = 0.0
    failure: CreateFailure | None = None


Decide = Callable[[str, JsonObject], PoolPlan]


def _always_fine(_cluster: str, _pool: JsonObject) -> PoolPlan:
    return PoolPlan()


@dataclass
class _Pool:
    body: JsonObject
    ready_at: float
    plan: PoolPlan
    operation: str
    gone_at: float | None = None


@dataclass
class _Operation:
    body: JsonObject
    done_at: float


@dataclass
class Gke:
    """The GKE service: clusters given at start, node pools and operations as they happen."""

    clock: Clock
    decide: Decide = _always_fine
    delete_seconds: float = 0.0
    prefix: str = "/"
    apis: tuple[DiscoveryApi, ...] = field(
        default_factory=lambda: (load_api("container.v1beta1"), load_api("container.v1"))
    )
    clusters: dict[str, JsonObject] = field(default_factory=dict)
    _pools: dict[str, dict[str, _Pool]] = field(default_factory=dict)
    _ops: dict[str, _Operation] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def add_cluster(self, project: str, location: str, name: str, **extra: object) -> None:
        key = f"projects/{project}/locations/{location}/clusters/{name}"
        self.clusters[key] = {
            "name": name,
            "location": location,
            "status": "RUNNING",
            "endpoint": "127.0.0.1",
            "selfLink": f"https://container.googleapis.com/v1/{key}",
            **extra,
        }
        self._pools.setdefault(key, {})

    # ------------------------------------------------------------------------------------
    def handle(self, call: Call) -> JsonObject:
        with self._lock:
            self._advance()
            name = call.method.id.removeprefix("container.projects.locations.")
            handler = {
                "clusters.get": self._cluster_get,
                "clusters.list": self._cluster_list,
                "clusters.nodePools.list": self._pool_list,
                "clusters.nodePools.get": self._pool_get,
                "clusters.nodePools.create": self._pool_create,
                "clusters.nodePools.delete": self._pool_delete,
                "operations.get": self._operation_get,
                "operations.list": self._operation_list,
            }.get(name)
            if handler is None:
                raise ApiError(501, f"Method {call.method.id} is not emulated.")
            answer: JsonObject = handler(call)
            return answer

    def _cluster_key(self, p: dict[str, str]) -> str:
        key = f"projects/{p['projectsId']}/locations/{p['locationsId']}/clusters/{p['clustersId']}"
        if key not in self.clusters:
            raise ApiError(404, f"Not found: {key}.")
        return key

    def _cluster_get(self, call: Call) -> JsonObject:
        return self._cluster_view(self._cluster_key(call.params))

    def _cluster_list(self, call: Call) -> JsonObject:
        p = call.params
        prefix = f"projects/{p['projectsId']}/locations/"
        loc = p["locationsId"]
        found = [
            self._cluster_view(k)
            for k in sorted(self.clusters)
            if k.startswith(prefix) and (loc == "-" or k.startswith(prefix + loc + "/"))
        ]
        return {"clusters": found}

    def _cluster_view(self, key: str) -> JsonObject:
        pools = [self._pool_view(pool) for pool in self._pools[key].values()]
        return {**self.clusters[key], "nodePools": pools}

    def _pool_list(self, call: Call) -> JsonObject:
        key = self._cluster_key(call.params)
        return {"nodePools": [self._pool_view(pool) for pool in self._pools[key].values()]}

    def _pool_get(self, call: Call) -> JsonObject:
        key = self._cluster_key(call.params)
        pool = self._pools[key].get(call.params["nodePoolsId"])
        if pool is None:
            raise ApiError(404, f"Not found: {key}/nodePools/{call.params['nodePoolsId']}.")
        return self._pool_view(pool)

    def _pool_create(self, call: Call) -> JsonObject:
        key = self._cluster_key(call.params)
        body = (call.body or {}).get("nodePool")
        if not isinstance(body, dict) or not body.get("name"):
            raise ApiError(400, "Node pool name must be set.")
        name = str(body["name"])
        if name in self._pools[key]:
            raise ApiError(409, f"Already exists: {key}/nodePools/{name}.")
        plan = self.decide(key, body)
        if plan.failure is not None and plan.failure.http_code is not None:
            raise ApiError(plan.failure.http_code, plan.failure.message)
        now = self.clock()
        op = self._new_operation(key, "CREATE_NODE_POOL", f"{key}/nodePools/{name}", now)
        self._ops[op].done_at = now + plan.create_seconds
        view = {k: v for k, v in body.items() if k not in ("status", "statusMessage")}
        view["selfLink"] = f"https://container.googleapis.com/v1beta1/{key}/nodePools/{name}"
        self._pools[key][name] = _Pool(view, now + plan.create_seconds, plan, op)
        self._advance()
        return self._ops[op].body

    def _pool_delete(self, call: Call) -> JsonObject:
        key = self._cluster_key(call.params)
        name = call.params["nodePoolsId"]
        pool = self._pools[key].get(name)
        if pool is None:
            raise ApiError(404, f"Not found: {key}/nodePools/{name}.")
        now = self.clock()
        if pool.ready_at > now:
            raise ApiError(
                400,
                f'Cluster is running incompatible operation "{pool.operation}". '
                f"Node pool {name} is currently creating node pool {name}. "
                "Please wait and try again once it is done.",
                status="FAILED_PRECONDITION",
            )
        op = self._new_operation(key, "DELETE_NODE_POOL", f"{key}/nodePools/{name}", now)
        self._ops[op].done_at = now + self.delete_seconds
        pool.gone_at = now + self.delete_seconds
        self._advance()
        return self._ops[op].body

    def _operation_get(self, call: Call) -> JsonObject:
        p = call.params
        op = self._ops.get(p["operationsId"])
        if op is None:
            raise ApiError(404, f"Not found: operation {p['operationsId']}.")
        return op.body

    def _operation_list(self, call: Call) -> JsonObject:
        loc = call.params["locationsId"]
        ops = [o.body for o in self._ops.values() if loc in ("-", o.body["location"])]
        return {"operations": ops}

    # ------------------------------------------------------------------------------------
    def _new_operation(self, cluster: str, kind: str, target: str, now: float) -> str:
        name = f"operation-{int(now * 1000)}-{next(self._ids):04d}"
        location = cluster.split("/")[3]
        project = cluster.split("/")[1]
        self._ops[name] = _Operation(
            {
                "name": name,
                "operationType": kind,
                "status": "RUNNING",
                "location": location,
                "zone": location,
                "selfLink": f"https://container.googleapis.com/v1beta1/projects/{project}"
                f"/locations/{location}/operations/{name}",
                "targetLink": f"https://container.googleapis.com/v1beta1/{target}",
                "startTime": utc_timestamp(now),
            },
            done_at=now,
        )
        return name

    def _advance(self) -> None:
        now = self.clock()
        for pools in self._pools.values():
            for name, pool in list(pools.items()):
                if pool.gone_at is not None and pool.gone_at <= now:
                    del pools[name]
                    continue
                if pool.ready_at <= now and "status" not in pool.body:
                    self._finish_create(pool, now)
        for op in self._ops.values():
            if op.body["status"] == "RUNNING" and op.done_at <= now:
                op.body["status"] = "DONE"
                op.body["endTime"] = utc_timestamp(now)

    def _finish_create(self, pool: _Pool, now: float) -> None:
        failure = pool.plan.failure
        op = self._ops[pool.operation].body
        if failure is None:
            pool.body["status"] = "RUNNING"
            return
        pool.body["status"] = "ERROR"
        pool.body["statusMessage"] = failure.message
        condition: JsonObject = {"message": failure.message, "canonicalCode": failure.canonical}
        if failure.condition_code:
            condition["code"] = failure.condition_code
        op["error"] = {"code": RPC_CODES.get(failure.canonical, 2), "message": failure.message}
        op["statusMessage"] = failure.message
        op["clusterConditions"] = [condition]
        op["nodepoolConditions"] = []
        op["status"] = "DONE"
        op["endTime"] = utc_timestamp(now)

    def _pool_view(self, pool: _Pool) -> JsonObject:
        view = dict(pool.body)
        view.setdefault("status", "STOPPING" if pool.gone_at is not None else "PROVISIONING")
        if pool.gone_at is not None:
            view["status"] = "STOPPING"
        return view
