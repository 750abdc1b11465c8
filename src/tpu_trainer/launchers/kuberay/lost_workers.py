"""Reading the cluster's word that a RayCluster's TPU workers were taken away (pure).

Two places keep it. The worker pods themselves, while they exist: ``DisruptionTarget`` True
(node shutdown, preemption, eviction) or ``Failed`` with a node shutdown's reason. But KubeRay
deletes a worker pod that reached ``Failed`` (a multi-host replica whole) and makes new ones
within seconds, well before Ray gives up on the job, so on a real cluster those pods are
usually gone when the tool asks. The namespace's Events outlast them: KubeRay's
``DeletedWorkerPod`` on the RayCluster names each pod it deleted and its phase, the kubelet's
events about a pod name its node (``source.host``), and the kubelet's ``Shutdown`` event on a
node says it shut down. Events are matched on the RayCluster's uid, so a cluster of the same
name from an earlier segment does not speak for this one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

Obj = dict[str, Any]
DISRUPTION = "DisruptionTarget"
"""The pod condition Kubernetes sets before it takes a pod away (node shutdown or preemption,
eviction, the taint manager)."""
SHUTDOWN_REASONS = frozenset({"Terminated", "NodeShutdown", "Shutdown"})
"""A failed pod's ``status.reason`` when its node shut down under it."""
NODE_SHUTDOWN = "Shutdown"
"""The kubelet's event reason on a node whose shutdown it saw."""
_DELETED = re.compile(
    r"^Deleted worker Pod [^/\s]+/(?P<pod>[^\s;]+)"
    r"(?: for group \S+: The worker Pod \S+ status is (?P<multi>\w+) which is a terminal state"
    r"|; Pod status: (?P<single>\w+);)"
)


def lost_pod(pod: Obj) -> str | None:
    """Why Kubernetes took ``pod`` away (its ``DisruptionTarget`` condition, or a node
    shutdown's ``status.reason``), or None."""
    name = (pod.get("metadata") or {}).get("name", "?")
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == DISRUPTION and cond.get("status") == "True":
            why = ": ".join(x for x in (cond.get("reason"), cond.get("message")) if x)
            return f"TPU worker pod {name} lost ({DISRUPTION}{', ' + why if why else ''})"
    if status.get("phase") == "Failed" and status.get("reason") in SHUTDOWN_REASONS:
        return f"TPU worker pod {name} lost ({status.get('message') or status['reason']})"
    return None


def deleted_failed(events: Iterable[Obj], cluster_uid: str) -> list[str]:
    """The worker pods KubeRay deleted because they read ``Failed`` (its ``DeletedWorkerPod``
    events about the RayCluster ``cluster_uid``), in the order of the events."""
    out: list[str] = []
    for event in events:
        about = event.get("involvedObject") or {}
        if (
            event.get("reason") != "DeletedWorkerPod"
            or about.get("kind") != "RayCluster"
            or about.get("uid") != cluster_uid
        ):
            continue
        m = _DELETED.match(str(event.get("message") or ""))
        if m and (m["multi"] or m["single"]) == "Failed" and m["pod"] not in out:
            out.append(m["pod"])
    return out


def hosts_of(events: Iterable[Obj], pods: Iterable[str]) -> dict[str, str]:
    """The node each of ``pods`` ran on, from the kubelet's events about it."""
    wanted = set(pods)
    out: dict[str, str] = {}
    for event in events:
        about = event.get("involvedObject") or {}
        host = (event.get("source") or {}).get("host") or event.get("reportingInstance")
        if about.get("kind") == "Pod" and about.get("name") in wanted and host:
            out.setdefault(str(about["name"]), str(host))
    return out


def shut_down_nodes(events: Iterable[Obj]) -> set[str]:
    """Nodes whose kubelet said they shut down."""
    return {
        str((event.get("involvedObject") or {}).get("name"))
        for event in events
        if event.get("reason") == NODE_SHUTDOWN
        and (event.get("involvedObject") or {}).get("kind") == "Node"
    }


def lost_deleted(pod: str, host: str | None, down: set[str]) -> str:
    """What to say of a worker pod KubeRay deleted as ``Failed``."""
    if host and host in down:
        return f"TPU worker pod {pod} lost (its node {host} shut down; KubeRay deleted the Failed pod)"  # fmt: skip
    return f"TPU worker pod {pod} lost (Failed; KubeRay deleted it)"


def said(lost: list[str]) -> str | None:
    """The first pod's reason and how many more, or None when none was lost."""
    if not lost:
        return None
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return lost[0] + more
