"""What KubeRay v1.7's controller does with a worker pod that reached a terminal phase
(``shouldDeletePod``: ``Failed`` or ``Succeeded``; with restart policy ``Always`` only
Kubernetes ends a pod so, e.g. its node's shutdown): it deletes the pod (in a multi-host group
the whole replica, every host of it), records a ``Normal`` ``DeletedWorkerPod`` Event on the
RayCluster for each pod, and makes new pods on its next reconcile (new names).

The events say what KubeRay's say: in a multi-host group ``Deleted worker Pod <ns>/<pod> for
group <group>: The worker Pod <pod> status is Failed which is a terminal state. KubeRay will
delete the Pod and create new Pods in the next reconciliation if necessary.``; with one host
``Deleted worker Pod <ns>/<pod>; Pod status: Failed; Pod restart policy: Always; Ray
container terminated status: &ContainerStateTerminated{...}`` (Go's print of the state).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tpu_trainer.fakecloud.state import State
from tpu_trainer.simcloud.kube import events, store
from tpu_trainer.simcloud.kube import raycluster_objects as objs
from tpu_trainer.simcloud.kube.resources import CORE

Obj = dict[str, Any]
PODS = next(r for r in CORE if r.plural == "pods")
REPLICA_LABEL = "ray.io/worker-group-replica-name"
_TERMINAL = ("Failed", "Succeeded")
_REPLACED = "raycluster_replaced"
"""Where the emulator counts each group's replicas made again (their names' seed)."""


def _go_time(stamp: str) -> str:
    when = datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")
    return when.strftime("%Y-%m-%d %H:%M:%S +0000 UTC")


def terminated_text(pod: Obj) -> str:
    """Go's ``%v`` of the Ray container's ``ContainerStateTerminated`` (``<nil>`` if none)."""
    ray = str(((pod.get("spec") or {}).get("containers") or [{}])[0].get("name"))
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        done = (status.get("state") or {}).get("terminated")
        if status.get("name") == ray and done:
            return (
                f"&ContainerStateTerminated{{ExitCode:{done.get('exitCode', 0)},"
                f"Signal:{done.get('signal', 0)},Reason:{done.get('reason', '')},"
                f"Message:{done.get('message', '')},"
                f"StartedAt:{_go_time(str(done.get('startedAt')))},"
                f"FinishedAt:{_go_time(str(done.get('finishedAt')))},"
                f"ContainerID:{done.get('containerID', '')},}}"
            )
    return "<nil>"


def _message(pod: Obj, group: Obj, trigger: Obj) -> str:
    meta = pod["metadata"]
    where = f"{meta.get('namespace', 'default')}/{meta['name']}"
    phase = (trigger.get("status") or {}).get("phase")
    if int(group.get("numOfHosts", 1)) > 1:
        why = (
            f"The worker Pod {trigger['metadata']['name']} status is {phase} which is a terminal "
            "state. KubeRay will delete the Pod and create new Pods in the next reconciliation "
            "if necessary."
        )
        return f"Deleted worker Pod {where} for group {group['groupName']}: {why}"
    policy = (pod.get("spec") or {}).get("restartPolicy", "Always")
    return (
        f"Deleted worker Pod {where}; Pod status: {phase}; Pod restart policy: {policy}; "
        f"Ray container terminated status: {terminated_text(pod)}"
    )


def delete_ended_workers(state: State, cluster: Obj, pods: list[Obj]) -> bool:
    """Delete the cluster's worker pods in a terminal phase (a multi-host replica whole),
    recording KubeRay's event for each; whether any went (then no pod is made until the next
    reconcile, as KubeRay requeues)."""
    deleted = False
    for group in cluster["spec"].get("workerGroupSpecs") or []:
        mine = [p for p in pods if p["metadata"]["labels"].get(objs.GROUP_LABEL) == group["groupName"]]  # fmt: skip
        gone: set[str] = set()
        for trigger in mine:
            ended = (trigger.get("status") or {}).get("phase") in _TERMINAL
            if not ended or trigger["metadata"]["name"] in gone:
                continue
            replica = trigger["metadata"]["labels"].get(REPLICA_LABEL)
            together = [p for p in mine if replica and p["metadata"]["labels"].get(REPLICA_LABEL) == replica]  # fmt: skip
            for pod in together or [trigger]:
                meta = pod["metadata"]
                store.delete(state, PODS, meta.get("namespace", "default"), meta["name"])
                events.record(state, cluster, "Normal", "DeletedWorkerPod",
                              _message(pod, group, trigger), "raycluster-controller")  # fmt: skip
                gone.add(meta["name"])
            _count_replaced(state, cluster, str(group["groupName"]))
        deleted = deleted or bool(gone)
    return deleted


def _count_replaced(state: State, cluster: Obj, group: str) -> None:
    counts = store.section(state).setdefault(_REPLACED, {})
    key = f"{cluster['metadata'].get('uid')}/{group}"
    counts[key] = int(counts.get(key, 0)) + 1


def replaced(state: State, cluster: Obj, group: str) -> int:
    """How many replicas of ``group`` were deleted so far (new pods' names differ from theirs)."""
    counts = store.section(state).get(_REPLACED) or {}
    return int(counts.get(f"{cluster['metadata'].get('uid')}/{group}", 0))
