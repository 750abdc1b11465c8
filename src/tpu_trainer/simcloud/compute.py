"""Emulated Compute Engine (``compute/beta``): reservations, resource policies, operations.

Reservations are the scenario's, read-only as the tool uses them: ``get``, ``list`` and
``aggregatedList`` (what ``gcloud beta compute reservations list`` asks). A reservation's health
is where the real API keeps it, ``resourceStatus.healthInfo.healthStatus``; ``status`` only takes
the API's own values (CREATING, DELETING, INVALID, READY, UPDATING). Resource policies (the
workload policies of multi-host TPU pools) are created and deleted through operations that are
DONE at once.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from tpu_trainer.simcloud.discovery import DiscoveryApi, JsonObject, load_api
from tpu_trainer.simcloud.server import ApiError, Call, Clock

_BASE = "https://www.googleapis.com/compute/beta/"


def compute_stamp(value: float) -> str:
    """Compute's timestamps: RFC 3339 in Pacific standard time, milliseconds."""
    local = datetime.fromtimestamp(value, UTC) - timedelta(hours=8)
    return local.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "-08:00"


def _not_found(path: str) -> ApiError:
    return ApiError(404, f"The resource '{path}' was not found")


@dataclass
class Compute:
    """The Compute service: reservations given at start, policies and operations as made."""

    clock: Clock
    prefix: str = "/compute/beta/"
    apis: tuple[DiscoveryApi, ...] = field(default_factory=lambda: (load_api("compute.beta"),))
    reservations: dict[str, JsonObject] = field(default_factory=dict)
    policies: dict[str, JsonObject] = field(default_factory=dict)
    operations: dict[str, JsonObject] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def add_reservation(self, project: str, zone: str, body: JsonObject) -> None:
        """A reservation as the API returns it; ``name`` is required, the rest is filled in."""
        path = f"projects/{project}/zones/{zone}/reservations/{body['name']}"
        self.reservations[path] = {
            "kind": "compute#reservation",
            "id": str(next(self._ids)),
            "creationTimestamp": compute_stamp(self.clock()),
            "zone": f"{_BASE}projects/{project}/zones/{zone}",
            "selfLink": f"{_BASE}{path}",
            "status": "READY",
            **body,
        }

    # ------------------------------------------------------------------------------------
    def handle(self, call: Call) -> JsonObject:
        with self._lock:
            handler = {
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
            }.get(call.method.id)
            if handler is None:
                raise ApiError(501, f"Method {call.method.id} is not emulated.")
            return handler(call)

    def _reservation_get(self, call: Call) -> JsonObject:
        p = call.params
        path = f"projects/{p['project']}/zones/{p['zone']}/reservations/{p['reservation']}"
        if path not in self.reservations:
            raise _not_found(path)
        return self.reservations[path]

    def _reservation_list(self, call: Call) -> JsonObject:
        p = call.params
        prefix = f"projects/{p['project']}/zones/{p['zone']}/reservations/"
        items = [r for k, r in sorted(self.reservations.items()) if k.startswith(prefix)]
        return {
            "kind": "compute#reservationList",
            "id": prefix.rstrip("/"),
            "items": items,
            "selfLink": f"{_BASE}{prefix.rstrip('/')}",
        }

    def _reservation_aggregated(self, call: Call) -> JsonObject:
        project = call.params["project"]
        scopes: dict[str, JsonObject] = {}
        for path, body in sorted(self.reservations.items()):
            parts = path.split("/")
            if parts[1] != project:
                continue
            scope = scopes.setdefault(f"zones/{parts[3]}", {"reservations": []})
            scope["reservations"].append(body)
        return {
            "kind": "compute#reservationAggregatedList",
            "id": f"projects/{project}/aggregated/reservations",
            "items": scopes,
            "selfLink": f"{_BASE}projects/{project}/aggregated/reservations",
        }

    def _policy_path(self, p: dict[str, str], name: str | None = None) -> str:
        return f"projects/{p['project']}/regions/{p['region']}/resourcePolicies/" + (
            name if name is not None else p["resourcePolicy"]
        )

    def _policy_get(self, call: Call) -> JsonObject:
        path = self._policy_path(call.params)
        if path not in self.policies:
            raise _not_found(path)
        return self.policies[path]

    def _policy_list(self, call: Call) -> JsonObject:
        prefix = self._policy_path(call.params, "")
        items = [b for k, b in sorted(self.policies.items()) if k.startswith(prefix)]
        return {"kind": "compute#resourcePolicyList", "items": items}

    def _policy_insert(self, call: Call) -> JsonObject:
        body = call.body or {}
        name = str(body.get("name", ""))
        if not name:
            raise ApiError(400, "Invalid value for field 'resource.name': ''. Must be a match of "
                           "regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'")  # fmt: skip
        path = self._policy_path(call.params, name)
        if path in self.policies:
            raise ApiError(409, f"The resource '{path}' already exists")
        region = f"{_BASE}projects/{call.params['project']}/regions/{call.params['region']}"
        self.policies[path] = {
            "kind": "compute#resourcePolicy",
            "id": str(next(self._ids)),
            "creationTimestamp": compute_stamp(self.clock()),
            "region": region,
            "selfLink": f"{_BASE}{path}",
            "status": "READY",
            **body,
        }
        return self._operation(call.params, "insert", path, "region")

    def _policy_delete(self, call: Call) -> JsonObject:
        path = self._policy_path(call.params)
        if path not in self.policies:
            raise _not_found(path)
        del self.policies[path]
        return self._operation(call.params, "delete", path, "region")

    def _operation(self, p: dict[str, str], kind: str, target: str, scope: str) -> JsonObject:
        now = self.clock()
        name = f"operation-{int(now * 1000)}-{next(self._ids)}"
        where = f"projects/{p['project']}/{scope}s/{p[scope]}"
        op: JsonObject = {
            "kind": "compute#operation",
            "id": str(next(self._ids)),
            "name": name,
            "operationType": kind,
            "targetLink": f"{_BASE}{target}",
            "status": "DONE",
            "progress": 100,
            "insertTime": compute_stamp(now),
            "startTime": compute_stamp(now),
            "endTime": compute_stamp(now),
            "selfLink": f"{_BASE}{where}/operations/{name}",
            scope: f"{_BASE}{where}",
        }
        self.operations[f"{where}/operations/{name}"] = op
        return op

    def _operation_get(self, call: Call) -> JsonObject:
        p = call.params
        scope = "region" if "region" in p else "zone"
        path = f"projects/{p['project']}/{scope}s/{p[scope]}/operations/{p['operation']}"
        if path not in self.operations:
            raise _not_found(path)
        return self.operations[path]
