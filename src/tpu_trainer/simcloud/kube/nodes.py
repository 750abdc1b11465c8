"""Node objects built from the state's node pools, as GKE registers a pool's VMs.

Each host of a pool is a Node named ``gke-<cluster>-<pool>-<hash>-<index>`` with GKE's
labels (``cloud.google.com/gke-nodepool``, and on a TPU pool
``cloud.google.com/gke-tpu-accelerator``, ``cloud.google.com/gke-tpu-topology``) and the
pool's chips per host as ``google.com/tpu`` capacity. A pool is Ready once it is RUNNING.
"""

from __future__ import annotations

import hashlib
from typing import Any

from tpu_trainer.fakecloud.pools import chips_per_host, tpu_accelerator
from tpu_trainer.fakecloud.state import State

ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
POOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_RESOURCE = "google.com/tpu"


def _topology(state: State, pool: dict[str, Any]) -> str | None:
    if pool.get("tpu_topology"):
        return str(pool["tpu_topology"])
    policy = (state.get("resource_policies") or {}).get(pool.get("placement_policy") or "")
    return (
        str(policy["accelerator_topology"])
        if policy and policy.get("accelerator_topology")
        else None
    )


def _node(state: State, pool: dict[str, Any], index: int, created: str) -> dict[str, Any]:
    cluster = state["cluster"]["name"]
    digest = hashlib.sha256(f"{cluster}/{pool['name']}".encode()).hexdigest()[:8]
    name = f"gke-{cluster}-{pool['name']}-{digest}-{index:04x}"[:63].rstrip("-")
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": pool["machine_type"],
        "topology.kubernetes.io/region": str(state.get("region", "")),
        "topology.kubernetes.io/zone": pool["zone"],
        POOL_LABEL: pool["name"],
        **{str(k): str(v) for k, v in (pool.get("labels") or {}).items()},
    }
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    taints: list[dict[str, str]] = []
    accelerator = tpu_accelerator(pool["machine_type"])
    if accelerator is not None:
        labels[ACCELERATOR_LABEL] = accelerator.gke_accelerator
        topology = _topology(state, pool)
        if topology:
            labels[TOPOLOGY_LABEL] = topology
        capacity[TPU_RESOURCE] = str(chips_per_host(pool["machine_type"]))
        taints.append({"key": TPU_RESOURCE, "value": "present", "effect": "NoSchedule"})
    ready = pool.get("status") == "RUNNING"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"node-{digest}-{index:04x}",
            "resourceVersion": "1",
            "creationTimestamp": created,
            "labels": labels,
        },
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True" if ready else "False",
                    "reason": "KubeletReady" if ready else "KubeletNotReady",
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": created,
                }
            ],
            "nodeInfo": {
                "kubeletVersion": "v" + str(pool.get("version", "")),
                "architecture": "amd64",
                "operatingSystem": "linux",
                "osImage": "Container-Optimized OS from Google",
                "containerRuntimeVersion": "containerd://1.7.24",
            },
        },
    }


def nodes(state: State, created: str) -> list[dict[str, Any]]:
    """Every node of every pool that has VMs (a pool being deleted or in ERROR has none)."""
    out: list[dict[str, Any]] = []
    for pool in (state.get("node_pools") or {}).values():
        if pool.get("status") in ("ERROR", "STOPPING", "PROVISIONING"):
            continue
        out.extend(_node(state, pool, i, created) for i in range(int(pool["node_count"])))
    return out
