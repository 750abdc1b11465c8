"""A TPU slice taken back under a RayCluster, as Kubernetes shows it: the nodes its worker pods
run on shut down, and each node's kubelet does what its graceful node shutdown does
(``pkg/kubelet/nodeshutdown``):

- a ``Normal`` ``Shutdown`` Event about the node, ``Shutdown manager detected shutdown event``;
- every pod on the node killed: a ``Normal`` ``Killing`` Event per container (``Stopping
  container <name>``), then the pod ``Failed``, reason ``Terminated``, message ``Pod was
  terminated in response to imminent node shutdown.``, condition ``DisruptionTarget`` True
  (``TerminationByKubelet``), ``Ready`` and ``ContainersReady`` False (``PodFailed``), its
  containers terminated with exit code 137 (a Ray container's ``bash -c``, PID 1, does not
  act on SIGTERM: it is killed at the end of the grace period).

The nodes themselves come back (a preempted VM made again under its name): the pods a
controller makes next are placed on them. Events about a node are kept in ``default``, the
kubelet's in the pod's namespace, each naming its node (``source.host``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.state import State, transaction
from tpu_trainer.simcloud.kube import events, store
from tpu_trainer.simcloud.kube import raycluster_objects as objs
from tpu_trainer.simcloud.kube.resources import CORE

Obj = dict[str, Any]
PODS = next(r for r in CORE if r.plural == "pods")
SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
_TERMINAL = ("Failed", "Succeeded")


def reclaim_workers(path: Path | str, name: str, namespace: str = "default") -> int:
    """The nodes under RayCluster ``name``'s worker pods shut down (its TPU slice preempted).
    Returns how many pods their kubelets stopped (0 when no worker pod runs on a node)."""
    with transaction(Path(path)) as state:
        hosts = sorted(
            {
                str(p["spec"]["nodeName"])
                for p in store.kept_objects(state, PODS)
                if _worker_of(p, name, namespace) and (p.get("spec") or {}).get("nodeName")
            }
        )
        return shut_down(state, hosts)


def _worker_of(pod: Obj, cluster: str, namespace: str) -> bool:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    return (
        meta.get("namespace", "default") == namespace
        and labels.get(objs.CLUSTER_LABEL) == cluster
        and labels.get(objs.NODE_TYPE_LABEL) == "worker"
    )


def shut_down(state: State, hosts: list[str]) -> int:
    """Nodes ``hosts`` shut down: the kubelet's Events and its pods' ending (module doc)."""
    for host in hosts:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": host, "uid": host}}
        events.record(state, node, "Normal", "Shutdown", "Shutdown manager detected shutdown event",
                      "kubelet", host=host)  # fmt: skip
    stopped = 0
    for pod in store.kept_objects(state, PODS):
        host = str((pod.get("spec") or {}).get("nodeName") or "")
        if host not in hosts or (pod.get("status") or {}).get("phase") in _TERMINAL:
            continue
        for container in pod["spec"].get("containers") or []:
            name = str(container.get("name"))
            events.record(
                state, pod, "Normal", "Killing", f"Stopping container {name}", "kubelet",
                host=host, field_path=f"spec.containers{{{name}}}",
            )  # fmt: skip
        meta = pod["metadata"]
        new = {**copy.deepcopy(pod), "status": terminated(pod, store.now(state))}
        store.replace(state, PODS, meta.get("namespace", "default"), meta["name"], new)
        stopped += 1
    return stopped


def _condition(kind: str, status: str, reason: str, message: str, now: str) -> Obj:
    out: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now,
                "reason": reason}  # fmt: skip
    if message:
        out["message"] = message
    return out


def terminated(pod: Obj, now: str) -> Obj:
    """The status the kubelet writes on a pod it killed for its node's shutdown."""
    status = copy.deepcopy(pod.get("status") or {})
    changed = {
        "Ready": _condition("Ready", "False", "PodFailed", "", now),
        "ContainersReady": _condition("ContainersReady", "False", "PodFailed", "", now),
        "DisruptionTarget": _condition(
            "DisruptionTarget", "True", "TerminationByKubelet", SHUTDOWN_MESSAGE, now
        ),
    }
    kept = [changed.pop(c["type"], c) for c in status.get("conditions") or []]
    status["conditions"] = [*kept, *changed.values()]
    status.update(phase="Failed", reason=SHUTDOWN_REASON, message=SHUTDOWN_MESSAGE)
    for container in status.get("containerStatuses") or []:
        started = ((container.get("state") or {}).get("running") or {}).get("startedAt", now)
        container.update(ready=False, started=False)
        container["state"] = {
            "terminated": {
                "exitCode": 137,
                "reason": "Error",
                "startedAt": started,
                "finishedAt": now,
            }
        }
    return status
