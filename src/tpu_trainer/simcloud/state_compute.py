"""Emulated Compute Engine (``compute/beta``) over a rehearsal's state file.

Reservations are the scenario's TPU aggregate reservations, read-only: their health is where
the real API keeps it (``resourceStatus.healthInfo``), ``status`` takes only the API's values.
Workload policies (``resourcePolicies``) are made and deleted through operations DONE at once;
a policy a node pool still uses cannot be deleted (Compute's 400).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.pools import chips_per_host, tpu_accelerator
from tpu_trainer.fakecloud.state import State, clock, new_policy, next_id
from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import ApiError, Call, handler_for, operation_id
from tpu_trainer.simcloud.state_call import state_call

_BASE = "https://www.googleapis.com/compute/beta/"
_CREATED = 1_790_000_000.0
"""When the scenario's reservations and policies were made (before any rehearsal starts)."""


def compute_stamp(value: float) -> str:
    """Compute's timestamps: RFC 3339 in Pacific standard time, milliseconds."""
    local = datetime.fromtimestamp(value, UTC) - timedelta(hours=8)
    return local.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "-08:00"


def _not_found(path: str) -> ApiError:
    return ApiError(404, f"The resource '{path}' was not found")


def reservation_json(state: State, res: dict[str, Any]) -> JsonObject:
    """A TPU aggregate reservation as ``reservations.get`` answers it."""
    project, zone = state["project"], res["zone"]
    machine = res.get("machine_type") or "tpu7x-standard-4t"
    acc = tpu_accelerator(machine)
    per_host = chips_per_host(machine) or 4
    accelerator = f"projects/{project}/zones/{zone}/acceleratorTypes/{acc.gke_accelerator if acc else 'tpu7x'}"

    def chips(hosts: int) -> list[JsonObject]:
        return [
            {"accelerator": {"acceleratorCount": hosts * per_host, "acceleratorType": accelerator}}
        ]

    health: JsonObject = {
        "healthStatus": res.get("health") or "HEALTHY",
        "degradedBlockCount": int(res.get("degraded_blocks") or 0),
    }
    path = f"projects/{project}/zones/{zone}/reservations/{res['name']}"
    return {
        "kind": "compute#reservation",
        "id": str(7_300_000_000_000_000_000 + sum(map(ord, res["name"]))),
        "creationTimestamp": compute_stamp(_CREATED),
        "name": res["name"],
        "selfLink": f"{_BASE}{path}",
        "zone": f"{_BASE}projects/{project}/zones/{zone}",
        "status": res["status"],
        "specificReservationRequired": True,
        "deploymentType": "DENSE",
        "resourceStatus": {"healthInfo": health},
        "aggregateReservation": {
            "reservedResources": chips(res["host_count"]),
            "inUseResources": chips(res["in_use_hosts"]),
            "hostCount": res["host_count"],
            "inUseHostCount": res["in_use_hosts"],
            "workloadType": "BATCH",
        },
    }


def policy_json(state: State, policy: dict[str, Any]) -> JsonObject:
    project, region = state["project"], state["region"]
    workload: JsonObject = {"type": policy["type"]}
    if policy.get("accelerator_topology"):
        workload["acceleratorTopology"] = policy["accelerator_topology"]
    where = f"projects/{project}/regions/{region}"
    return {
        "kind": "compute#resourcePolicy",
        "id": str(5_100_000_000_000_000_000 + sum(map(ord, policy["name"]))),
        "creationTimestamp": compute_stamp(float(policy.get("created") or _CREATED)),
        "name": policy["name"],
        "region": f"{_BASE}{where}",
        "selfLink": f"{_BASE}{where}/resourcePolicies/{policy['name']}",
        "status": "READY",
        "workloadPolicy": workload,
    }


@dataclass
class StateCompute:
    """The Compute service over the state file at ``path``."""

    path: Path
    prefix: str = "/compute/beta/"
    apis: tuple[DiscoveryApi, ...] = field(default_factory=lambda: (load_api("compute.beta"),))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, call: Call) -> JsonObject:
        handler = handler_for({
            "compute.reservations.get": self._reservation_get,
            "compute.reservations.list": self._reservation_list,
            "compute.reservations.aggregatedList": self._reservation_aggregated,
            "compute.resourcePolicies.get": self._policy_get,
            "compute.resourcePolicies.list": self._policy_list,
            "compute.resourcePolicies.insert": self._policy_insert,
            "compute.resourcePolicies.delete": self._policy_delete,
            "compute.regionOperations.get": self._operation_get,
            "compute.regionOperations.wait": self._operation_get,
            "compute.zoneOperations.get": self._operation_get,
            "compute.zoneOperations.wait": self._operation_get,
        }, call.method.id)  # fmt: skip
        with state_call(self.path, self._lock) as state:
            return handler(state, call)

    # ---- reservations ------------------------------------------------------------------
    def _reservations(self, state: State, project: str, zone: str | None) -> list[JsonObject]:
        if project != state["project"]:
            return []
        return [
            reservation_json(state, r)
            for r in state["reservations"].values()
            if zone is None or r["zone"] == zone
        ]

    def _reservation_get(self, state: State, call: Call) -> JsonObject:
        p = call.params
        for res in self._reservations(state, p["project"], p["zone"]):
            if res["name"] == p["reservation"]:
                return res
        raise _not_found(
            f"projects/{p['project']}/zones/{p['zone']}/reservations/{p['reservation']}"
        )

    def _reservation_list(self, state: State, call: Call) -> JsonObject:
        p = call.params
        where = f"projects/{p['project']}/zones/{p['zone']}/reservations"
        items = self._reservations(state, p["project"], p["zone"])
        return {"kind": "compute#reservationList", "id": where, "items": items,
                "selfLink": f"{_BASE}{where}"}  # fmt: skip

    def _reservation_aggregated(self, state: State, call: Call) -> JsonObject:
        project = call.params["project"]
        scopes: dict[str, JsonObject] = {}
        for res in self._reservations(state, project, None):
            zone = str(res["zone"]).rsplit("/", 1)[-1]
            scopes.setdefault(f"zones/{zone}", {"reservations": []})["reservations"].append(res)
        where = f"projects/{project}/aggregated/reservations"
        return {"kind": "compute#reservationAggregatedList", "id": where, "items": scopes,
                "selfLink": f"{_BASE}{where}"}  # fmt: skip

    # ---- workload policies -------------------------------------------------------------
    def _policy_path(self, p: dict[str, str], name: str) -> str:
        return f"projects/{p['project']}/regions/{p['region']}/resourcePolicies/{name}"

    def _policy(self, state: State, p: dict[str, str], name: str) -> dict[str, Any] | None:
        if p["project"] != state["project"] or p["region"] != state["region"]:
            return None
        found: dict[str, Any] | None = state["resource_policies"].get(name)
        return found

    def _policy_get(self, state: State, call: Call) -> JsonObject:
        p = call.params
        policy = self._policy(state, p, p["resourcePolicy"])
        if policy is None:
            raise _not_found(self._policy_path(p, p["resourcePolicy"]))
        return policy_json(state, policy)

    def _policy_list(self, state: State, call: Call) -> JsonObject:
        p = call.params
        mine = p["project"] == state["project"] and p["region"] == state["region"]
        items = [policy_json(state, v) for v in state["resource_policies"].values()] if mine else []
        return {"kind": "compute#resourcePolicyList", "items": items}

    def _policy_insert(self, state: State, call: Call) -> JsonObject:
        p, body = call.params, call.body or {}
        name = str(body.get("name", ""))
        if not name:
            raise ApiError(400, "Invalid value for field 'resource.name': ''. Must be a match of "
                           "regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")  # fmt: skip
        if p["project"] != state["project"] or p["region"] != state["region"]:
            raise _not_found(f"projects/{p['project']}/regions/{p['region']}")
        if name in state["resource_policies"]:
            raise ApiError(409, f"The resource '{self._policy_path(p, name)}' already exists")
        workload = body.get("workloadPolicy") or {}
        policy = new_policy(name, workload.get("acceleratorTopology"))
        policy["type"] = workload.get("type") or "HIGH_THROUGHPUT"
        policy["created"] = clock(state)
        state["resource_policies"][name] = policy
        return self._operation(state, p, "insert", self._policy_path(p, name))

    def _policy_delete(self, state: State, call: Call) -> JsonObject:
        p = call.params
        name = p["resourcePolicy"]
        path = self._policy_path(p, name)
        if self._policy(state, p, name) is None:
            raise _not_found(path)
        users = [v for v in state["node_pools"].values() if v["placement_policy"] == name]
        if users:
            pool = users[0]
            instance = (
                f"projects/{p['project']}/zones/{pool['zone']}/instances/"
                f"gke-{state['cluster']['name']}-{pool['name']}-0"
            )
            raise ApiError(
                400, f"The resource_policy resource '{path}' is already being used by '{instance}'"
            )
        del state["resource_policies"][name]
        return self._operation(state, p, "delete", path)

    # ---- operations --------------------------------------------------------------------
    def _operation(self, state: State, p: dict[str, str], kind: str, target: str) -> JsonObject:
        now = compute_stamp(clock(state))
        name = operation_id(clock(state), next_id(state))
        where = f"projects/{p['project']}/regions/{p['region']}"
        op: JsonObject = {
            "kind": "compute#operation",
            "id": str(8_000_000_000_000_000_000 + next_id(state)),
            "name": name,
            "operationType": kind,
            "targetLink": f"{_BASE}{target}",
            "status": "DONE",
            "progress": 100,
            "insertTime": now,
            "startTime": now,
            "endTime": now,
            "selfLink": f"{_BASE}{where}/operations/{name}",
            "region": f"{_BASE}{where}",
        }
        state.setdefault("compute_operations", {})[f"{where}/operations/{name}"] = op
        return op

    def _operation_get(self, state: State, call: Call) -> JsonObject:
        p = call.params
        scope = "region" if "region" in p else "zone"
        path = f"projects/{p['project']}/{scope}s/{p[scope]}/operations/{p['operation']}"
        op: JsonObject | None = state.get("compute_operations", {}).get(path)
        if op is None:
            raise _not_found(path)
        return op
