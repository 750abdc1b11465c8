"""GKE node pools: the checks a create goes through, reservation accounting, and the JSON.

Used by the emulated GKE API (``simcloud.state_gke``). A refusal is a ``GkeError``: the API
answers it as an HTTP error or a failed operation, and gcloud prints its own text for it.
"""

from __future__ import annotations

import hashlib
import math
import zlib
from dataclasses import dataclass
from typing import Any

from tpu_trainer.catalog.accelerators import ACCELERATORS, Accelerator
from tpu_trainer.fakecloud.gke_text import CONTAINER_API, EXHAUSTED, cluster_path
from tpu_trainer.fakecloud.state import State, clock, new_pool, project_number


class GkeError(Exception):
    """GKE said no: at once (``code``, an HTTP status) or in the create operation (``code`` 0)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def in_operation(self) -> bool:
        return self.code == 0


_GENERIC_FAMILIES = (
    "e2",
    "n1",
    "n2",
    "n2d",
    "n4",
    "c2",
    "c2d",
    "c3",
    "c3d",
    "c4",
    "m1",
    "m2",
    "m3",
    "t2d",
    "t2a",
    "a2",
    "a3",
    "g2",
    "h3",
)


def tpu_accelerator(machine_type: str) -> Accelerator | None:
    """The TPU family of a GKE machine type, or None for a CPU machine type."""
    for acc in ACCELERATORS.values():
        if machine_type in (
            acc.machine_type,
            acc.machine_type_single_chip,
            *acc.other_machine_types,
        ):
            return acc
    return None


def chips_per_host(machine_type: str) -> int:
    acc = tpu_accelerator(machine_type)
    if acc is None:
        return 0
    return 1 if machine_type == acc.machine_type_single_chip else acc.chips_per_host


def _known_machine_type(machine_type: str) -> bool:
    return tpu_accelerator(machine_type) is not None or (
        machine_type.split("-", 1)[0] in _GENERIC_FAMILIES and machine_type.count("-") >= 1
    )


def topology_hosts(topology: str, machine_type: str) -> int | None:
    try:
        chips = math.prod(int(d) for d in topology.split("x"))
    except ValueError:
        return None
    per_host = chips_per_host(machine_type) or 1
    return max(1, chips // per_host)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateRequest:
    """One ``node-pools create``; ``command`` is gcloud's command path for messages."""

    command: str
    project: str
    location: str
    cluster: str
    name: str
    zone: str
    machine_type: str
    num_nodes: int
    node_version: str | None = None
    placement_policy: str | None = None
    tpu_topology: str | None = None
    placement_type: str | None = None
    reservation_affinity: str | None = None
    reservation: str | None = None
    labels: tuple[tuple[str, str], ...] = ()
    disable_autoupgrade: bool = False


def require_cluster(state: State, project: str, location: str, name: str) -> None:
    """404 unless the scenario's cluster is ``name`` in ``location`` of ``project``."""
    c = state["cluster"]
    if not (
        c["exists"]
        and project == state["project"]
        and location == state["region"]
        and name == c["name"]
    ):
        raise GkeError(404, f"Not found: {cluster_path(project, location, name)}.")


def reservation_name(value: str) -> str:
    """``R`` from ``R``, ``projects/P/reservations/R`` or ``.../reservations/R/reservationBlocks/B``."""
    parts = value.strip("/").split("/")
    return parts[parts.index("reservations") + 1] if "reservations" in parts[:-1] else parts[-1]


def _invalid(req: CreateRequest, message: str) -> GkeError:  # noqa: ARG001
    return GkeError(400, f"INVALID_ARGUMENT: {message}")


def _check_request(state: State, req: CreateRequest) -> None:
    """The checks GKE makes before it starts an operation (nothing is created on failure)."""
    require_cluster(state, req.project, req.location, req.cluster)
    pool_path = f"{cluster_path(req.project, req.location, req.cluster)}/nodePools/{req.name}"
    if req.name in state["node_pools"] or req.name in state["behaviours"]["conflict_on_create"]:
        raise GkeError(409, f"Already exists: {pool_path}.")
    if req.disable_autoupgrade:
        raise GkeError(400, "Auto_upgrade must be true when release_channel RAPID is set.")
    if not req.zone.startswith(state["region"] + "-"):
        raise _invalid(req, f"node location {req.zone} is not a zone of region {state['region']}.")
    if not _known_machine_type(req.machine_type):
        raise GkeError(
            400,
            f"Invalid value for field 'resource.machineType': 'zones/{req.zone}/machineTypes/"
            f"{req.machine_type}'. Machine type with name '{req.machine_type}' does not exist "
            f"in zone '{req.zone}'.",
        )
    if (req.reservation_affinity or "").lower() == "specific" and not req.reservation:
        raise _invalid(req, "--reservation must be given with --reservation-affinity=specific.")
    _check_tpu_shape(state, req)


def _check_tpu_shape(state: State, req: CreateRequest) -> None:
    acc = tpu_accelerator(req.machine_type)
    if acc is None:
        if req.tpu_topology:
            raise _invalid(req, f"--tpu-topology needs a TPU machine type, not {req.machine_type}.")
        return
    if acc.multi_host_needs_workload_policy:
        if req.tpu_topology or req.placement_type:
            raise _invalid(
                req,
                f"node pools of machine type {req.machine_type} take a workload "
                "policy (--placement-policy), not a TPU topology or a COMPACT placement "
                "(--tpu-topology, --placement-type).",
            )
        if req.num_nodes > 1 and not req.placement_policy:
            raise _invalid(
                req,
                f"a multi-host node pool of machine type {req.machine_type} needs "
                "a HIGH_THROUGHPUT workload policy: pass --placement-policy.",
            )
    topology = req.tpu_topology
    if req.placement_policy:
        policy = state["resource_policies"].get(req.placement_policy)
        if policy is None:
            raise _invalid(
                req,
                f"resource policy projects/{req.project}/regions/"
                f"{state['region']}/resourcePolicies/{req.placement_policy} was not found.",
            )
        topology = topology or policy.get("accelerator_topology")
    hosts = topology_hosts(topology, req.machine_type) if topology else None
    if hosts is not None and hosts != req.num_nodes:
        raise _invalid(
            req,
            f"TPU topology {topology} on {req.machine_type} needs {hosts} nodes, "
            f"but --num-nodes is {req.num_nodes}.",
        )


def _capacity_problem(state: State, req: CreateRequest) -> str | None:
    """Why the create operation fails for lack of (the right) capacity, or None; a SPECIFIC
    reservation too small for the pool is refused at once (GKE's 429)."""
    if not req.reservation or (req.reservation_affinity or "").lower() != "specific":
        return None
    name = reservation_name(req.reservation)
    res = state["reservations"].get(name)
    where = f"projects/{req.project}/zones/{req.zone}/reservations/{name}"
    if res is None:
        return f"Google Compute Engine: The resource '{where}' was not found"
    if res["zone"] != req.zone or (res.get("machine_type") not in (None, req.machine_type)):
        return "Google Compute Engine: Reservation is incorrect for the requested resources."
    degraded = res.get("health") == "DEGRADED"
    if res["status"] != "READY" or degraded or res["capacity"] == "exhausted":
        return EXHAUSTED.format(where=where)
    free = res["host_count"] - res["in_use_hosts"]
    if free < req.num_nodes:
        raise GkeError(
            429,
            "Reservation does not have enough resources for the request: specific reservation "
            f'"{name}" is insufficient for node pool "{req.name}" at zone "{req.zone}": '
            f"required {req.num_nodes} and short of {req.num_nodes - max(0, free)} VM count of "
            f"machine type {req.machine_type}.",
        )
    return None


def create_pool(state: State, req: CreateRequest) -> dict[str, Any]:
    """Create the pool (or refuse as GKE would: ``GkeError``). Returns the new pool record;
    it is PROVISIONING until the scenario's clock has run ``create_seconds`` and its
    ``provisioning_polls`` reads are done."""
    _check_request(state, req)
    problem = _capacity_problem(state, req)
    behaviours = state["behaviours"]
    if problem is None and behaviours["error_pools"]:
        problem = (
            "Google Compute Engine: An internal error has occurred while creating the "
            "instances of the node pool. Please try again later."
        )
    res_name = reservation_name(req.reservation) if req.reservation else None
    polls = int(behaviours["provisioning_polls"])
    seconds = float(behaviours.get("create_seconds") or 0.0)
    pool = new_pool(
        req.name,
        machine_type=req.machine_type,
        node_count=req.num_nodes,
        zone=req.zone,
        status="ERROR" if problem else ("PROVISIONING" if polls or seconds else "RUNNING"),
        version=req.node_version or state["cluster"]["node_version"],
        tpu_topology=req.tpu_topology,
        placement_policy=req.placement_policy,
        placement_type=req.placement_type or ("COMPACT" if req.tpu_topology else None),
        reservation=res_name if res_name in state["reservations"] else None,
        polls_left=polls,
        labels=dict(req.labels),
    )
    if problem is not None:
        if behaviours["error_pools"]:
            pool["status_message"] = problem
            state["node_pools"][req.name] = pool
        raise GkeError(0, problem)
    pool["ready_at"] = clock(state) + seconds
    state["node_pools"][req.name] = pool
    if pool["reservation"]:
        state["reservations"][pool["reservation"]]["in_use_hosts"] += req.num_nodes
    return pool


def delete_pool(state: State, project: str, location: str, cluster: str, name: str) -> None:
    """Delete a pool and give its hosts back to its reservation."""
    require_cluster(state, project, location, cluster)
    pool = state["node_pools"].get(name)
    path = f"{cluster_path(project, location, cluster)}/nodePools/{name}"
    if pool is None:
        raise GkeError(404, f"Not found: {path}.")
    observe(state, pool, read=False)
    if pool["status"] == "PROVISIONING":
        raise GkeError(
            400,
            f"Cluster is running incompatible operation {pool.get('operation') or 'operation'}. "
            f"Operation {pool.get('operation') or 'operation'} is currently creating node pool "
            f"{name}. Please wait and try again once it is done.",
        )
    if state["behaviours"].get("lost_pool_deletes", 0) > 0:
        state["behaviours"]["lost_pool_deletes"] -= 1
        return
    del state["node_pools"][name]
    res = state["reservations"].get(pool.get("reservation") or "")
    if res is not None and pool["hosts_held"]:
        res["in_use_hosts"] = max(0, res["in_use_hosts"] - pool["hosts_held"])


def create_done(state: State, pool: dict[str, Any]) -> bool:
    """Whether the pool's create operation has run its time on the scenario's clock."""
    return clock(state) >= float(pool.get("ready_at") or 0.0)


def observe(state: State, pool: dict[str, Any], *, read: bool = True) -> None:
    """A describe/list read (``read``) or another look: a PROVISIONING pool counts down its
    polls and waits out its create operation's time, then runs."""
    if pool["status"] != "PROVISIONING":
        return
    if read and pool["polls_left"] > 0:
        pool["polls_left"] -= 1
        return
    if create_done(state, pool) and pool["polls_left"] <= 0:
        pool["status"] = "RUNNING"


def pool_json(state: State, pool: dict[str, Any]) -> dict[str, Any]:
    """The node pool as ``gcloud container node-pools describe --format=json`` shows it."""
    project, region, cluster = state["project"], state["region"], state["cluster"]["name"]
    config: dict[str, Any] = {
        "machineType": pool["machine_type"],
        "diskSizeGb": 100,
        "diskType": "pd-balanced",
        "imageType": "COS_CONTAINERD",
        "labels": dict(pool["labels"]),
        "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
        "serviceAccount": "default",
        "gvnic": {"enabled": True},
    }
    if pool["reservation"]:
        config["reservationAffinity"] = {
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": [pool["reservation"]],
        }
    out: dict[str, Any] = {
        "name": pool["name"],
        "status": pool["status"],
        "config": config,
        "initialNodeCount": pool["node_count"],
        "locations": [pool["zone"]],
        "version": pool["version"],
        "management": {"autoRepair": True, "autoUpgrade": True},
        "maxPodsConstraint": {
            "maxPodsPerNode": "15" if tpu_accelerator(pool["machine_type"]) else "110"
        },
        "podIpv4CidrSize": 24,
        "selfLink": f"{CONTAINER_API}/v1/{cluster_path(project, region, cluster)}/nodePools/{pool['name']}",
        "etag": f"{zlib.crc32(pool['name'].encode()):08x}",
    }
    placement = {
        k: v
        for k, v in (
            ("policyName", pool["placement_policy"]),
            ("tpuTopology", pool["tpu_topology"]),
            ("type", pool["placement_type"]),
        )
        if v
    }
    if placement:
        out["placementPolicy"] = placement
    if pool["status_message"]:
        out["statusMessage"] = pool["status_message"]
    return out


def _endpoints(state: State) -> dict[str, Any]:
    """GKE's control plane endpoints: the IP endpoint (the cluster's ``endpoint``), and the DNS
    endpoint every cluster has, with external traffic off (the default without
    ``--enable-dns-access``), so ``get-credentials --dns-endpoint`` is refused and the IP
    endpoint is the one to use."""
    uid = hashlib.sha256(f"{state['project']}/{state['cluster']['name']}".encode()).hexdigest()
    dns = f"gke-{uid[:32]}-{project_number(state)}.{state['region']}.gke.goog"
    return {
        "dnsEndpointConfig": {"endpoint": dns},
        "ipEndpointsConfig": {"enabled": True, "enablePublicEndpoint": True},
    }


def cluster_json(state: State) -> dict[str, Any]:
    """The scenario's cluster as ``clusters.get`` answers it. Its ``endpoint`` and CA
    (``masterAuth.clusterCaCertificate``) are the Kubernetes API emulator's once a rehearsal
    has started it (``simcloud.rehearsal``); before, a fixed address nothing answers at and no CA."""
    c, project, region = state["cluster"], state["project"], state["region"]
    network: dict[str, Any] = {
        "network": f"projects/{project}/global/networks/default",
        "subnetwork": f"projects/{project}/regions/{region}/subnetworks/default",
    }
    if c["datapath"] == "ADVANCED_DATAPATH":  # GKE leaves the legacy default out
        network["datapathProvider"] = "ADVANCED_DATAPATH"
    if c["multi_networking"]:  # false booleans are left out of the JSON
        network["enableMultiNetworking"] = True
    return {
        "name": c["name"],
        "location": region,
        "zone": region,
        "status": "RUNNING",
        "currentMasterVersion": c["node_version"],
        "currentNodeVersion": c["node_version"],
        "initialClusterVersion": c["node_version"],
        "currentNodeCount": sum(p["node_count"] for p in state["node_pools"].values()),
        "locations": [f"{region}-a", f"{region}-b", f"{region}-c"],
        "endpoint": c.get("endpoint") or "34.118.10.20",
        **({"masterAuth": {"clusterCaCertificate": c["ca_data"]}} if c.get("ca_data") else {}),
        "networkConfig": network,
        "releaseChannel": {"channel": "RAPID"},
        "nodePools": [pool_json(state, p) for p in state["node_pools"].values()],
        "controlPlaneEndpointsConfig": _endpoints(state),
        "selfLink": f"https://container.googleapis.com/v1/projects/{project}/locations/"
        f"{region}/clusters/{c['name']}",
    }
