"""gcloud, asked for JSON: argv builders (pure), parsers (pure) and a thin client."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.runner import CommandFailed, CommandResult, CommandRunner


@dataclass(frozen=True, slots=True)
class Cluster:
    name: str
    location: str
    status: str
    node_version: str
    datapath: str
    """``ADVANCED_DATAPATH`` (Dataplane V2) or ``LEGACY_DATAPATH``."""
    multi_networking: bool
    raw: dict[str, Any] = field(compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class NodePool:
    name: str
    status: str
    """RUNNING, PROVISIONING, RECONCILING, STOPPING, ERROR..."""
    machine_type: str
    node_count: int
    zones: tuple[str, ...]
    tpu_topology: str | None
    placement_policy: str | None
    labels: dict[str, str]
    version: str


@dataclass(frozen=True, slots=True)
class Reservation:
    name: str
    zone: str
    status: str
    """The API's lifecycle state: CREATING, DELETING, INVALID, READY or UPDATING."""
    host_count: int | None
    in_use_hosts: int | None
    health: str | None = None
    """``resourceStatus.healthInfo.healthStatus``: HEALTHY, DEGRADED (blocks in maintenance)."""
    degraded_blocks: int | None = None
    """``resourceStatus.healthInfo.degradedBlockCount``, when the API gives it."""

    @property
    def free_hosts(self) -> int | None:
        if self.host_count is None or self.in_use_hosts is None:
            return None
        return self.host_count - self.in_use_hosts


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _last(url: str) -> str:
    return url.rstrip("/").rsplit("/", 1)[-1]


def parse_cluster(obj: dict[str, Any]) -> Cluster:
    net = obj.get("networkConfig") or {}
    return Cluster(
        name=obj["name"],
        location=obj.get("location", ""),
        status=obj.get("status", ""),
        node_version=obj.get("currentNodeVersion", ""),
        datapath=net.get("datapathProvider", "LEGACY_DATAPATH"),
        multi_networking=bool(net.get("enableMultiNetworking")),
        raw=obj,
    )


def parse_node_pool(obj: dict[str, Any]) -> NodePool:
    config = obj.get("config") or {}
    placement = obj.get("placementPolicy") or {}
    count = _int(obj.get("initialNodeCount"))
    return NodePool(
        name=obj["name"],
        status=obj.get("status", ""),
        machine_type=config.get("machineType", ""),
        node_count=count or 0,
        zones=tuple(obj.get("locations") or ()),
        tpu_topology=placement.get("tpuTopology"),
        placement_policy=placement.get("policyName"),
        labels=dict(config.get("labels") or {}),
        version=obj.get("version", ""),
    )


def parse_reservation(obj: dict[str, Any]) -> Reservation:
    """A reservation as ``gcloud beta compute reservations describe/list --format=json`` prints
    it. Health is not in ``status`` (no DEGRADED there) but in ``resourceStatus.healthInfo``."""
    agg = obj.get("aggregateReservation") or {}
    spec = obj.get("specificReservation") or {}
    hosts = _int(agg.get("hostCount"))
    used = _int(agg.get("inUseHostCount"))
    if hosts is None:
        hosts, used = _int(spec.get("count")), _int(spec.get("inUseCount"))
    health = (obj.get("resourceStatus") or {}).get("healthInfo") or {}
    return Reservation(
        obj["name"],
        _last(obj.get("zone", "")),
        obj.get("status", ""),
        hosts,
        used,
        health=health.get("healthStatus") or None,
        degraded_blocks=_int(health.get("degradedBlockCount")),
    )


def printed_object(result: CommandResult, key: str) -> dict[str, Any] | None:
    """The one JSON object a successful ``--format=json`` command printed (alone or as a
    one-item list) when it has ``key``, or None when its output is not that."""
    if not result.ok:
        return None
    try:
        data = json.loads(result.stdout or "null")
    except json.JSONDecodeError:
        return None
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    if not isinstance(data, dict) or not data.get(key):
        return None
    return data


def created_pool(result: CommandResult) -> NodePool | None:
    """The pool a successful ``node-pools create --format=json`` printed (gcloud waits for the
    operation, then describes the pool: ``[{...}]``), or None when its output is not that."""
    data = printed_object(result, "name")
    return None if data is None else parse_node_pool(data)


def _json(result: CommandResult) -> Any:
    try:
        return json.loads(result.stdout or "null")
    except json.JSONDecodeError:
        raise TpuTrainerError(
            f"`{' '.join(result.argv[:4])}` did not answer JSON: {result.stdout[:200]!r}",
            fix="check the gcloud installation (`gcloud --version`)",
        ) from None


def is_not_found(result: CommandResult) -> bool:
    text = result.text()
    return (
        "code=404" in text or "Not found" in text or "NOT_FOUND" in text or "was not found" in text
    )


def is_already_exists(result: CommandResult) -> bool:
    """GKE says ``code=409 ... Already exists``; Compute says ``The resource '...' already exists``."""
    text = result.text()
    return "code=409" in text or "ALREADY_EXISTS" in text or "already exists" in text.lower()


@dataclass
class Gcloud:
    runner: CommandRunner
    project: str

    def _run(self, argv: list[str], timeout: float = 300) -> CommandResult:
        return self.runner.run(["gcloud", *argv, f"--project={self.project}"], timeout=timeout)

    # credentials ------------------------------------------------------------------------
    def active_account(self) -> str | None:
        """The account gcloud acts as (``gcloud auth list``), or None when none is active."""
        r = self.runner.run(["gcloud", "auth", "list", "--format=json"], timeout=60)
        if not r.ok:
            raise CommandFailed(r, fix="check the gcloud installation (`gcloud --version`)")
        for entry in _json(r) or []:
            if entry.get("status") == "ACTIVE" and entry.get("account"):
                return str(entry["account"])
        return None

    # the project ----------------------------------------------------------------------
    def project_number(self) -> str | None:
        """The project's number (``gcloud projects describe``), or None when it cannot be read
        (the account may not see the project itself: xpk then asks Resource Manager)."""
        r = self.runner.run(
            ["gcloud", "projects", "describe", self.project, "--format=value(projectNumber)"],
            timeout=120,
        )
        number = r.stdout.strip()
        return number if r.ok and number.isdigit() else None

    # clusters ---------------------------------------------------------------------------
    def cluster_names(self, region: str) -> list[str]:
        r = self._run(["container", "clusters", "list", f"--region={region}", "--format=json"])
        if not r.ok:
            raise CommandFailed(r)
        return [str(c.get("name")) for c in _json(r) or []]

    def cluster(self, name: str, region: str) -> Cluster | None:
        r = self._run(
            ["container", "clusters", "describe", name, f"--region={region}", "--format=json"]
        )
        if not r.ok:
            if is_not_found(r):
                return None
            raise CommandFailed(r)
        return parse_cluster(_json(r))

    # node pools -------------------------------------------------------------------------
    def node_pools(self, cluster: str, region: str) -> list[NodePool]:
        r = self._run(
            [
                "container",
                "node-pools",
                "list",
                f"--cluster={cluster}",
                f"--region={region}",
                "--format=json",
            ]
        )
        if not r.ok:
            raise CommandFailed(r, fix=f"check that cluster {cluster} exists in {region}")
        return [parse_node_pool(o) for o in _json(r) or []]

    def node_pool(self, cluster: str, region: str, name: str) -> NodePool | None:
        r = self._run(
            [
                "container",
                "node-pools",
                "describe",
                name,
                f"--cluster={cluster}",
                f"--region={region}",
                "--format=json",
            ]
        )
        if not r.ok:
            if is_not_found(r):
                return None
            raise CommandFailed(r)
        return parse_node_pool(_json(r))

    def create_node_pool(self, argv: list[str]) -> CommandResult:
        """Run a ``gcloud beta container node-pools create`` built by plan.nodepool (no --project),
        asking for JSON: gcloud waits for the create and prints the pool it made (see
        :func:`created_pool`)."""
        if not any(a.startswith("--format") for a in argv):
            argv = [*argv, "--format=json"]
        return self.runner.run(argv, timeout=7200)

    def delete_node_pool(self, cluster: str, region: str, name: str) -> CommandResult:
        return self._run(
            [
                "container",
                "node-pools",
                "delete",
                name,
                f"--cluster={cluster}",
                f"--region={region}",
                "--quiet",
            ],
            timeout=3600,
        )

    # reservations -----------------------------------------------------------------------
    def reservation(self, name: str, zone: str | None) -> Reservation | None:
        return self.reservations([(name, zone)])[0]

    def reservations(self, refs: Sequence[tuple[str, str | None]]) -> list[Reservation | None]:
        """Every ``(name, zone or None)`` asked with one ``reservations list``: for each, the
        reservation of that name in that zone (any zone when None), or None when absent."""
        if not refs:
            return []
        names = " ".join(dict.fromkeys(name for name, _ in refs))
        r = self._run(
            ["beta", "compute", "reservations", "list", f"--filter=name=({names})", "--format=json"]
        )
        if not r.ok:
            raise CommandFailed(r)
        found = [parse_reservation(o) for o in _json(r) or []]
        return [
            next((f for f in found if f.name == name and (not zone or f.zone == zone)), None)
            for name, zone in refs
        ]

    # workload (placement) policies ------------------------------------------------------
    def resource_policy_exists(self, name: str, region: str) -> bool:
        r = self._run(
            [
                "compute",
                "resource-policies",
                "describe",
                name,
                f"--region={region}",
                "--format=json",
            ]
        )
        if r.ok:
            return True
        if is_not_found(r):
            return False
        raise CommandFailed(r)

    def create_workload_policy(self, name: str, region: str, topology: str) -> CommandResult:
        return self._run(
            [
                "beta",
                "compute",
                "resource-policies",
                "create",
                "workload-policy",
                name,
                "--type=HIGH_THROUGHPUT",
                f"--accelerator-topology={topology}",
                f"--region={region}",
            ]
        )

    def delete_resource_policy(self, name: str, region: str) -> CommandResult:
        return self._run(
            ["compute", "resource-policies", "delete", name, f"--region={region}", "--quiet"]
        )
