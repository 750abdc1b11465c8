"""The status KubeRay v1.7 writes on a RayCluster (``calculateStatus``), from the cluster and
its pods (pure): ``state: ready`` once every pod is running and ready (kept after), the worker
replica counts, the desired CPU, memory, GPU and TPU, ``endpoints``, ``head``,
``observedGeneration``, ``stateTransitionTimes``, and the conditions ``HeadPodReady``,
``RayClusterProvisioned`` (kept once true), ``RayClusterSuspended`` and
``RayClusterSuspending``. A condition's ``lastTransitionTime`` moves only when its status does.
"""

from __future__ import annotations

from typing import Any

from tpu_trainer.simcloud.kube import raycluster_objects as objs
from tpu_trainer.simcloud.kube.nodes import TPU_RESOURCE
from tpu_trainer.simcloud.kube.scheduler import format_quantity, requests

Obj = dict[str, Any]
INT32_MAX = 2**31 - 1


def desired_workers(group: Obj) -> int:
    """Hosts the group wants: ``replicas`` within ``minReplicas``..``maxReplicas``, × hosts."""
    if group.get("suspend"):
        return 0
    low, high = int(group.get("minReplicas", 0)), int(group.get("maxReplicas", INT32_MAX))
    replicas = min(max(int(group.get("replicas", low)), low), high)
    return replicas * int(group.get("numOfHosts", 1))


def _resources(cluster: Obj) -> dict[str, str]:
    spec = cluster["spec"]
    total = dict.fromkeys(("cpu", "memory", TPU_RESOURCE), 0.0)
    parts = [(spec["headGroupSpec"]["template"].get("spec") or {}, 1)]
    for g in spec.get("workerGroupSpecs") or []:
        if not g.get("suspend"):
            parts.append(
                (
                    g["template"].get("spec") or {},
                    int(g.get("replicas", 0)) * int(g.get("numOfHosts", 1)),
                )
            )
    for pod_spec, count in parts:
        for name, value in requests(pod_spec).items():
            total[name] += value * count
    return {
        "desiredCPU": format_quantity(total["cpu"], "cpu"),
        "desiredMemory": format_quantity(total["memory"], "memory"),
        "desiredGPU": "0",
        "desiredTPU": format_quantity(total[TPU_RESOURCE], TPU_RESOURCE),
    }


def _running_and_ready(pod: Obj) -> bool:
    status = pod.get("status") or {}
    ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return status.get("phase") == "Running" and all(c.get("status") == "True" for c in ready)


def _condition(old: list[Obj], kind: str, status: str, reason: str, message: str, now: str) -> Obj:
    """A metav1.Condition; its ``lastTransitionTime`` moves only when its status does."""
    before = next((c for c in old if c.get("type") == kind), None)
    since = before["lastTransitionTime"] if before and before.get("status") == status else now
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
    }


def _head_condition(head: Obj | None, old: list[Obj], now: str) -> Obj:
    if head is None:
        return _condition(
            old, "HeadPodReady", "False", "HeadPodNotFound", "Head Pod not found", now
        )
    ready = next(
        (c for c in (head.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"),
        None,
    )
    if ready is None:
        return _condition(old, "HeadPodReady", "False", "Unknown", "", now)
    if ready.get("status") == "True":
        return _condition(old, "HeadPodReady", "True", "HeadPodRunningAndReady", "", now)
    reason, message = str(ready.get("reason") or "Unknown"), str(ready.get("message") or "")
    for status in (head.get("status") or {}).get("containerStatuses") or []:
        waiting = (status.get("state") or {}).get("waiting")
        if waiting:
            reason = str(waiting.get("reason"))
            message = f"{message}; {status['name']}: {waiting.get('message', '')}".lstrip("; ")
            break
    return _condition(old, "HeadPodReady", "False", reason, message, now)


def _counts(groups: list[Obj], workers: list[Obj]) -> Obj:
    hosts = [(g, int(g.get("numOfHosts", 1))) for g in groups]
    return {
        "desiredWorkerReplicas": sum(desired_workers(g) for g in groups),
        "readyWorkerReplicas": sum(1 for p in workers if _running_and_ready(p)),
        "availableWorkerReplicas": sum(
            1 for p in workers if (p.get("status") or {}).get("phase") == "Running"
        ),
        "minWorkerReplicas": sum(
            int(g.get("minReplicas", 0)) * n for g, n in hosts if not g.get("suspend")
        ),
        "maxWorkerReplicas": min(
            INT32_MAX, sum(int(g.get("maxReplicas", INT32_MAX)) * n for g, n in hosts)
        ),
    }


def _provisioned(old: list[Obj], all_ready: bool, now: str) -> Obj:
    kept = next((c for c in old if c.get("type") == "RayClusterProvisioned"), None)
    if kept is not None and kept.get("status") == "True":
        return kept
    if all_ready:
        return _condition(
            old, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
            "All Ray Pods are ready for the first time", now,
        )  # fmt: skip
    return _condition(
        old, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
        "RayCluster Pods are being provisioned for first time", now,
    )  # fmt: skip


def status_of(cluster: Obj, pods: list[Obj], now: str) -> Obj:
    """The cluster's status given its pods (without ``lastUpdateTime``)."""
    old = cluster.get("status") or {}
    conditions = old.get("conditions") or []
    by_type = {t: [p for p in pods if p["metadata"]["labels"].get(objs.NODE_TYPE_LABEL) == t]
               for t in ("head", "worker")}  # fmt: skip
    head = by_type["head"][0] if by_type["head"] else None
    all_ready = bool(pods) and all(_running_and_ready(p) for p in pods)
    status: Obj = {
        **({"state": old["state"]} if old.get("state") else {}),
        **_counts(cluster["spec"].get("workerGroupSpecs") or [], by_type["worker"]),
        **_resources(cluster),
        "observedGeneration": int(cluster["metadata"].get("generation", 1)),
        "conditions": [
            _head_condition(head, conditions, now),
            _provisioned(conditions, all_ready, now),
            _condition(conditions, "RayClusterSuspended", "False", "RayClusterSuspended", "", now),
            _condition(
                conditions, "RayClusterSuspending", "False", "RayClusterSuspending", "", now
            ),
        ],
        "endpoints": objs.endpoints(cluster),
    }
    if head is not None:
        ip = str((head.get("status") or {}).get("podIP") or "")
        status["head"] = {
            "podName": head["metadata"]["name"],
            "serviceName": objs.service_name(cluster),
            **({"podIP": ip, "serviceIP": ip} if ip else {}),  # headless: the head pod's IP
        }
    if all_ready and len(pods) == status["desiredWorkerReplicas"] + 1:
        status["state"] = "ready"
    times = dict(old.get("stateTransitionTimes") or {})
    if status.get("state") and status.get("state") != old.get("state"):
        times[status["state"]] = now
    if times:
        status["stateTransitionTimes"] = times
    return status
