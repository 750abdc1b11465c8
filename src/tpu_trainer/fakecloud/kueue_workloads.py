"""The Workload objects Kueue makes for submitted JobSets (served as ``kueue.x-k8s.io/v1beta2``),
with its admission conditions: why it holds one back (``QuotaReserved`` False with Kueue's
reason and message, see :mod:`kueue_admission`) or where it admitted it. Kueue labels each with
the JobSet's uid (``kueue.x-k8s.io/job-uid``) and makes the JobSet its controlling owner."""

from __future__ import annotations

from typing import Any

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.kueue_admission import blocker, pod_set
from tpu_trainer.fakecloud.state import FAKE_NOW, State
from tpu_trainer.fakecloud.workloads import jobset_uid, name_suffix

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"


def _conditions(held: tuple[str, str] | None) -> list[dict[str, Any]]:
    if held is not None:
        reason, message = held
        return [{"type": "QuotaReserved", "status": "False", "reason": reason, "message": message}]
    return [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": f"Quota reserved in ClusterQueue {k8s.CLUSTER_QUEUE}",
        },
        {
            "type": "Admitted",
            "status": "True",
            "reason": "Admitted",
            "message": "The workload is admitted",
        },
    ]


def kueue_workload_json(state: State, wl: dict[str, Any]) -> dict[str, Any]:
    """The Workload Kueue makes for the JobSet: QuotaReserved/Admitted with Kueue's reason."""
    held = blocker(state, wl)
    conditions = _conditions(held)
    for cond in conditions:
        cond["lastTransitionTime"] = FAKE_NOW
    status: dict[str, Any] = {"conditions": conditions}
    if held is None:
        flavor = f"{wl['num_slices']}x{wl['device']}"
        status["admission"] = {
            "clusterQueue": k8s.CLUSTER_QUEUE,
            "podSetAssignments": [{"name": pod_set(wl), "flavors": {k8s.TPU_RESOURCE: flavor}}],
        }
    uid = jobset_uid(wl["name"])
    return {
        "apiVersion": k8s.KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{wl['name']}-{name_suffix(wl['name'])}",
            "namespace": "default",
            "creationTimestamp": FAKE_NOW,
            "labels": {JOB_UID_LABEL: uid},
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": wl["name"],
                    "uid": uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": str(wl.get("queue") or k8s.LOCAL_QUEUE),
            "podSets": [{"name": pod_set(wl), "count": wl["hosts"] * wl["num_slices"]}],
        },
        "status": status,
    }
