"""Cloud resources in the store (recorded before each create call) and capacity attempts."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from tpu_trainer.store.file import StoreFile


class ResourceState(StrEnum):
    CREATING = "creating"
    """Recorded before the create call: it may or may not exist."""
    CREATED = "created"
    DELETING = "deleting"
    DELETED = "deleted"
    ABSENT = "absent"
    """The create call failed and nothing was made."""
    MAYBE = "maybe"
    """The create call failed, but may have made it: teardown asks the cloud."""
    LEFT = "left"
    """Deliberately left in place (in use by something tpu-trainer did not make)."""


LIVE_STATES = (
    ResourceState.CREATING,
    ResourceState.CREATED,
    ResourceState.DELETING,
    ResourceState.MAYBE,
)


@dataclass(frozen=True, slots=True)
class Resource:
    id: int
    run_id: str
    kind: str
    """nodepool, workload, workload-policy, tpu-vm, raycluster..."""
    name: str
    project: str
    location: str
    cluster: str | None
    state: ResourceState
    detail: dict[str, Any]


class ResourcesTable(StoreFile):
    """The ``resources`` and ``capacity_attempts`` tables."""

    # ---- resources -------------------------------------------------------------------------
    def resource_intent(
        self,
        run_id: str,
        *,
        kind: str,
        name: str,
        project: str,
        location: str,
        cluster: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> int:
        """Record a resource *before* asking the cloud to create it."""
        now = time.time()
        with self._tx() as db:
            cur = db.execute(
                "INSERT INTO resources (run_id, kind, name, project, location, cluster, state, "
                "created_at, updated_at, detail) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    kind,
                    name,
                    project,
                    location,
                    cluster,
                    ResourceState.CREATING.value,
                    now,
                    now,
                    json.dumps(detail or {}),
                ),
            )
            return int(cur.lastrowid or 0)

    def resource_state(self, resource_id: int, state: ResourceState, **detail: Any) -> None:
        with self._tx() as db:
            row = db.execute("SELECT detail FROM resources WHERE id = ?", (resource_id,)).fetchone()
            merged = {**json.loads(row[0] or "{}"), **detail} if row else detail
            db.execute(
                "UPDATE resources SET state = ?, updated_at = ?, detail = ? WHERE id = ?",
                (state.value, time.time(), json.dumps(merged), resource_id),
            )

    def hand_over(self, resource_id: int, run_id: str) -> None:
        """Make ``run_id`` the owner of a resource (its teardown deletes it)."""
        with self._tx() as db:
            db.execute(
                "UPDATE resources SET run_id = ?, updated_at = ? WHERE id = ?",
                (run_id, time.time(), resource_id),
            )

    def rename_resource(self, resource_id: int, name: str) -> None:
        with self._tx() as db:
            db.execute(
                "UPDATE resources SET name = ?, updated_at = ? WHERE id = ?",
                (name, time.time(), resource_id),
            )

    def resources(
        self, run_id: str | None = None, *, states: Sequence[ResourceState] | None = None
    ) -> list[Resource]:
        query = f"SELECT {_RESOURCE_COLUMNS} FROM resources WHERE 1=1"  # noqa: S608
        params: list[Any] = []
        if run_id is not None:
            query += " AND run_id = ?"
            params.append(run_id)
        if states is not None:
            query += f" AND state IN ({','.join('?' * len(states))})"
            params += [s.value for s in states]
        rows = self._db.execute(query + " ORDER BY id", params).fetchall()
        return [
            Resource(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                r[5],
                r[6],
                ResourceState(r[7]),
                json.loads(r[8] or "{}"),
            )
            for r in rows
        ]

    # ---- capacity attempts -----------------------------------------------------------------
    def record_attempt(
        self,
        run_id: str,
        *,
        reservation: str,
        zone: str | None,
        status: str | None,
        free_hosts: int | None,
        needed_hosts: int,
        outcome: str,
        message: str = "",
    ) -> None:
        with self._tx() as db:
            db.execute(
                "INSERT INTO capacity_attempts (run_id, at, reservation, zone, status, "
                "free_hosts, needed_hosts, outcome, message) VALUES (?,?,?,?,?,?,?,?,?)",
                (
                    run_id,
                    time.time(),
                    reservation,
                    zone,
                    status,
                    free_hosts,
                    needed_hosts,
                    outcome,
                    message,
                ),
            )

    def attempts(self, run_id: str) -> list[dict[str, Any]]:
        rows = self._db.execute(
            "SELECT reservation, zone, status, free_hosts, needed_hosts, outcome, message "
            "FROM capacity_attempts WHERE run_id = ? ORDER BY id",
            (run_id,),
        ).fetchall()
        keys = ("reservation", "zone", "status", "free_hosts", "needed_hosts", "outcome", "message")
        return [dict(zip(keys, r, strict=True)) for r in rows]


_RESOURCE_COLUMNS = "id, run_id, kind, name, project, location, cluster, state, detail"
