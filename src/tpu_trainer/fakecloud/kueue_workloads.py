"""The Workload objects Kueue makes for submitted JobSets, with its admission conditions: why
it holds one back (``QuotaReserved`` False and Kueue's message) or where it admitted it."""

from __future__ import annotations

import hashlib
from typing import Any

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.state import FAKE_NOW, State
from tpu_trainer.fakecloud.workloads import kueue_blocker, name_suffix


def kueue_workload_json(state: State, wl: dict[str, Any]) -> dict[str, Any]:
    """The Workload Kueue makes for the JobSet: QuotaReserved/Admitted with Kueue's reason."""
    blocker = kueue_blocker(state, wl)
    flavor = f"{wl['num_slices']}x{wl['device']}"
    if blocker is None:
        conditions = [
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
    else:
        conditions = [
            {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": blocker}
        ]
    for cond in conditions:
        cond["lastTransitionTime"] = FAKE_NOW
    status: dict[str, Any] = {"conditions": conditions}
    if blocker is None:
        status["admission"] = {
            "clusterQueue": k8s.CLUSTER_QUEUE,
            "podSetAssignments": [{"name": "slice-job", "flavors": {k8s.TPU_RESOURCE: flavor}}],
        }
    return {
        "apiVersion": k8s.KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{wl['name']}-{name_suffix(wl['name'])}",
            "namespace": "default",
            "creationTimestamp": FAKE_NOW,
            "labels": {
                "kueue.x-k8s.io/job-uid": hashlib.sha256(wl["name"].encode()).hexdigest()[:36]
            },
            "ownerReferences": [
                {
                    "apiVersion": "jobset.x-k8s.io/v1alpha2",
                    "kind": "JobSet",
                    "name": wl["name"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "queueName": k8s.LOCAL_QUEUE,
            "podSets": [{"name": "slice-job", "count": wl["hosts"] * wl["num_slices"]}],
        },
        "status": status,
    }
