"""Emulated GKE over a rehearsal's state file: the scenario's cluster and its node pools.

Every call runs inside the state file's ``transaction`` (``state_call``), so the ``train`` process, a later
``cleanup``/``gc`` and the fake xpk/kubectl see one cloud. The checks a create goes through
and the pool records are ``fakecloud.pools``' (the fake xpk creates pools through them too).

Time is the scenario's clock (``fakecloud.state.clock``): each call moves it on by ``state_call.TICK``; a
second ``operations.get`` of a running operation first moves it on by gcloud's poll period, the
time gcloud slept since its last poll. A create answers with its
operation: DONE at once unless the scenario gives ``create_seconds``; a refusal GKE makes
before it starts (404, 409, 400, a too-small reservation's 429) is an HTTP error, a failure
the operation finds (no capacity, the wrong reservation) ends the operation in an error. A
delete while the pool's create still runs is GKE's 400 ``FAILED_PRECONDITION``.

``scripted`` gives chosen pools (by name) a create of their own: a failure GKE answers at once
or ends the operation with (``CreateFailure``), or a create that runs ``create_seconds`` on the
scenario's clock; the emulator's tests and the recording of gcloud's failure texts use it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.gke_text import cluster_path
from tpu_trainer.fakecloud.pools import (
    CreateRequest,
    GkeError,
    cluster_json,
    create_done,
    create_pool,
    delete_pool,
    observe,
    pool_json,
    require_cluster,
)
from tpu_trainer.fakecloud.state import State, advance, clock, next_id
from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import (
    RPC_CODES,
    ApiError,
    Call,
    handler_for,
    operation_id,
    utc_timestamp,
)
from tpu_trainer.simcloud.state_call import state_call

GCLOUD_POLL_SECONDS = 5.0
"""gcloud's wait between two ``operations.get`` of a container operation."""

_API = "https://container.googleapis.com/v1beta1"


@dataclass(frozen=True)
class CreateFailure:
    """How a scripted node pool create ends badly: at once (an HTTP error) or in its operation."""

    canonical: str  # a StatusCondition canonicalCode: RESOURCE_EXHAUSTED, INVALID_ARGUMENT, ...
    message: str
    http_code: int | None = None  # set: the create call itself fails with this code
    condition_code: str = ""  # StatusCondition.code, e.g. GCE_STOCKOUT


@dataclass(frozen=True)
class PoolPlan:
    """What a scripted create of one pool does, whatever the scenario says."""

    create_seconds: float = 0.0
    failure: CreateFailure | None = None


def _flag_labels(config: JsonObject) -> tuple[tuple[str, str], ...]:
    labels = config.get("labels") or {}
    return tuple((str(k), str(v)) for k, v in labels.items())


def _request(p: dict[str, str], body: JsonObject, region: str) -> CreateRequest:
    """The create request of ``nodePools.create`` in ``fakecloud.pools``' terms."""
    config: JsonObject = body.get("config") or {}
    placement: JsonObject = body.get("placementPolicy") or {}
    affinity: JsonObject = config.get("reservationAffinity") or {}
    values = affinity.get("values") or []
    specific = affinity.get("consumeReservationType") == "SPECIFIC_RESERVATION"
    zones = body.get("locations") or []
    management: JsonObject = body.get("management") or {}
    return CreateRequest(
        command="gcloud.beta.container.node-pools.create",
        project=p["projectsId"],
        location=p["locationsId"],
        cluster=p["clustersId"],
        name=str(body.get("name") or ""),
        zone=str(zones[0]) if zones else f"{region}-a",
        machine_type=str(config.get("machineType") or "e2-medium"),
        num_nodes=int(body.get("initialNodeCount", 3)),
        node_version=body.get("version") or None,
        placement_policy=placement.get("policyName") or None,
        tpu_topology=placement.get("tpuTopology") or None,
        placement_type=placement.get("type") or None,
        reservation_affinity="specific" if specific else None,
        reservation=str(values[0]) if values else None,
        labels=_flag_labels(config),
        disable_autoupgrade=management.get("autoUpgrade") is False,
    )


@dataclass
class StateGke:
    """The GKE service over the state file at ``path``."""

    path: Path
    scripted: Mapping[str, PoolPlan] = field(default_factory=dict)
    """Pool name -> what its create does instead of what the scenario says."""
    prefix: str = "/"
    apis: tuple[DiscoveryApi, ...] = field(
        default_factory=lambda: (load_api("container.v1beta1"), load_api("container.v1"))
    )
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, call: Call) -> JsonObject:
        handler = handler_for({
            "clusters.get": self._cluster_get,
            "clusters.list": self._cluster_list,
            "clusters.nodePools.list": self._pool_list,
            "clusters.nodePools.get": self._pool_get,
            "clusters.nodePools.create": self._pool_create,
            "clusters.nodePools.delete": self._pool_delete,
            "operations.get": self._operation_get,
            "operations.list": self._operation_list,
        }, call.method.id, "container.projects.locations.")  # fmt: skip
        with state_call(self.path, self._lock) as state:
            try:
                answer: JsonObject = handler(state, call)
            except GkeError as e:
                busy = e.code == 400 and "incompatible operation" in e.message
                status = "FAILED_PRECONDITION" if busy else ""
                raise ApiError(e.code, e.message, status=status) from None
            return answer

    # ------------------------------------------------------------------------------------
    def _cluster(self, state: State, p: dict[str, str]) -> None:
        require_cluster(state, p["projectsId"], p["locationsId"], p["clustersId"])

    def _cluster_get(self, state: State, call: Call) -> JsonObject:
        self._cluster(state, call.params)
        _observe_all(state)
        return cluster_json(state)

    def _cluster_list(self, state: State, call: Call) -> JsonObject:
        p = call.params
        visible = (
            state["cluster"]["exists"]
            and p["projectsId"] == state["project"]
            and p["locationsId"] in ("-", state["region"])
        )
        _observe_all(state)
        return {"clusters": [cluster_json(state)] if visible else []}

    def _pool_list(self, state: State, call: Call) -> JsonObject:
        self._cluster(state, call.params)
        _observe_all(state)
        return {"nodePools": [pool_json(state, p) for p in state["node_pools"].values()]}

    def _pool_get(self, state: State, call: Call) -> JsonObject:
        p = call.params
        self._cluster(state, p)
        pool = state["node_pools"].get(p["nodePoolsId"])
        if pool is None:
            raise ApiError(404, f"Not found: {_cluster_path(p)}/nodePools/{p['nodePoolsId']}.")
        observe(state, pool)
        return pool_json(state, pool)

    def _pool_create(self, state: State, call: Call) -> JsonObject:
        p = call.params
        body = (call.body or {}).get("nodePool")
        if not isinstance(body, dict) or not body.get("name"):
            raise ApiError(400, "Node pool name must be set.")
        req = _request(p, body, state["region"])
        target = f"{_cluster_path(p)}/nodePools/{req.name}"
        plan = self.scripted.get(req.name, PoolPlan())
        try:
            failure = plan.failure
            if failure is not None:
                _scripted_refusal(state, req, failure)
            pool = create_pool(state, req)
        except GkeError as e:
            if not e.in_operation:
                raise
            failure = failure or CreateFailure(_canonical(e.message), e.message)
            op = _new_operation(state, p, "CREATE_NODE_POOL", target, clock(state))
            _fail(op, failure, clock(state))
            return _public(op)
        if plan.create_seconds:
            pool.update(status="PROVISIONING", ready_at=clock(state) + plan.create_seconds)
        op = _new_operation(state, p, "CREATE_NODE_POOL", target, float(pool["ready_at"]))
        pool["operation"] = op["name"]
        if pool["polls_left"]:  # gcloud reads the pool once its create is done: not a poll
            pool["polls_left"] += 1
        return _public(op)

    def _pool_delete(self, state: State, call: Call) -> JsonObject:
        p = call.params
        delete_pool(state, p["projectsId"], p["locationsId"], p["clustersId"], p["nodePoolsId"])
        target = f"{_cluster_path(p)}/nodePools/{p['nodePoolsId']}"
        return _public(_new_operation(state, p, "DELETE_NODE_POOL", target, clock(state)))

    def _operation_get(self, state: State, call: Call) -> JsonObject:
        op = _operations(state).get(call.params["operationsId"])
        if op is None:
            raise ApiError(404, f"Not found: operation {call.params['operationsId']}.")
        if op["status"] == "RUNNING" and op.get("_polled"):
            advance(state, GCLOUD_POLL_SECONDS)  # the wait gcloud made since its last poll
        op["_polled"] = True
        _settle(state, op)
        return _public(op)

    def _operation_list(self, state: State, call: Call) -> JsonObject:
        loc = call.params["locationsId"]
        ops = _operations(state).values()
        for op in ops:
            _settle(state, op)
        return {"operations": [_public(o) for o in ops if loc in ("-", o["location"])]}


def _cluster_path(p: dict[str, str]) -> str:
    return cluster_path(p["projectsId"], p["locationsId"], p["clustersId"])


def _observe_all(state: State) -> None:
    for pool in state["node_pools"].values():
        observe(state, pool)


def _operations(state: State) -> dict[str, Any]:
    ops: dict[str, Any] = state.setdefault("gke_operations", {})
    return ops


def _new_operation(
    state: State, p: dict[str, str], kind: str, target: str, done_at: float
) -> JsonObject:
    now = clock(state)
    name = operation_id(now, next_id(state), "04d")
    base = f"{_API}/projects/{p['projectsId']}/locations/{p['locationsId']}"
    op: JsonObject = {
        "name": name,
        "operationType": kind,
        "status": "RUNNING",
        "location": p["locationsId"],
        "zone": p["locationsId"],
        "selfLink": f"{base}/operations/{name}",
        "targetLink": f"{_API}/{target}",
        "startTime": utc_timestamp(now),
        "_done_at": done_at,
    }
    _operations(state)[name] = op
    _settle(state, op)
    return op


def _settle(state: State, op: JsonObject) -> None:
    """A RUNNING operation whose time has come is DONE (a create: once its pool's is)."""
    if op["status"] != "RUNNING" or clock(state) < float(op["_done_at"]):
        return
    pool = state["node_pools"].get(op["targetLink"].rsplit("/", 1)[-1])
    creating = op["operationType"] == "CREATE_NODE_POOL" and pool is not None
    if creating and not create_done(state, pool):
        return
    op["status"] = "DONE"
    op["endTime"] = utc_timestamp(clock(state))


def _scripted_refusal(state: State, req: CreateRequest, failure: CreateFailure) -> None:
    """A scripted failure, after the checks of the cluster and the name GKE makes first."""
    require_cluster(state, req.project, req.location, req.cluster)
    if req.name in state["node_pools"]:
        path = cluster_path(req.project, req.location, req.cluster)
        raise GkeError(409, f"Already exists: {path}/nodePools/{req.name}.")
    raise GkeError(failure.http_code or 0, failure.message)


def _canonical(message: str) -> str:
    return next((c for key, c in _CANONICAL.items() if key in message), "INTERNAL")


def _fail(op: JsonObject, failure: CreateFailure, now: float) -> None:
    """The create operation DONE with the failure: its error, its cluster condition."""
    message = failure.message
    condition: JsonObject = {"message": message, "canonicalCode": failure.canonical}
    if failure.condition_code:
        condition["code"] = failure.condition_code
    op.update(
        status="DONE",
        endTime=utc_timestamp(now),
        statusMessage=message,
        detail=message,
        error={"code": RPC_CODES.get(failure.canonical, 2), "message": message},
        clusterConditions=[condition],
        nodepoolConditions=[],
    )


_CANONICAL = {
    "RESOURCE_EXHAUSTED": "RESOURCE_EXHAUSTED",
    "was not found": "NOT_FOUND",
    "is incorrect": "INVALID_ARGUMENT",
}


def _public(op: JsonObject) -> JsonObject:
    return {k: v for k, v in op.items() if not k.startswith("_")}
