"""What the KubeRay launcher reads of the namespace's Events once KubeRay has deleted the
RayCluster's Failed workers: only this cluster's (by uid), only pods that read Failed, their
nodes' shutdown when the kubelet said so."""

from __future__ import annotations

from typing import Any

import pytest

from tpu_trainer.launchers.kuberay.lost_workers import (
    deleted_failed,
    hosts_of,
    lost_deleted,
    said,
    shut_down_nodes,
)

pytestmark = pytest.mark.unit

UID = "0b5e6f1c-2a10-4a43-9b0e-5d3f0c1e2a10"
TERMINAL = (
    "which is a terminal state. KubeRay will delete the Pod and create new Pods in the next "
    "reconciliation if necessary."
)


def _kuberay(message: str, uid: str = UID) -> dict[str, Any]:
    return {
        "reason": "DeletedWorkerPod",
        "message": message,
        "involvedObject": {"kind": "RayCluster", "name": "tpu-trainer-r1", "uid": uid},
    }


def _kubelet(reason: str, kind: str, name: str, host: str) -> dict[str, Any]:
    return {
        "reason": reason,
        "involvedObject": {"kind": kind, "name": name},
        "source": {"component": "kubelet", "host": host},
    }


def _multi(pod: str, trigger: str, phase: str) -> str:
    """KubeRay's words deleting a host of a multi-host replica."""
    return (
        f"Deleted worker Pod default/{pod} for group tpu-group: The worker Pod {trigger} "
        f"status is {phase} {TERMINAL}"
    )


def _single(pod: str, phase: str, policy: str = "Always") -> str:
    """KubeRay's words deleting a single-host worker."""
    return (
        f"Deleted worker Pod default/{pod}; Pod status: {phase}; Pod restart policy: {policy}; "
        "Ray container terminated status: <nil>"
    )


def test_only_this_clusters_failed_workers_count() -> None:
    events = [
        _kuberay(_multi("w-a", "w-a", "Failed")),
        _kuberay(_multi("w-b", "w-a", "Failed")),
        _kuberay(_multi("w-old", "w-old", "Failed"), uid="earlier"),  # an earlier segment's
        # a pod that ended well, a scale-down: not taken away
        _kuberay(_multi("w-c", "w-c", "Succeeded")),
        _kuberay(
            "Deleted worker Pod default/w-d for group tpu-group: autoscaler scale-down request"
        ),
        _kuberay(_single("w-e", "Failed")),
        _kuberay(_single("w-f", "Running", "Never")),
    ]
    assert deleted_failed(events, UID) == ["w-a", "w-b", "w-e"]
    assert deleted_failed(events, "another") == []


def test_a_deleted_pods_node_shutdown_is_named_when_the_kubelet_said_so() -> None:
    events = [
        _kubelet("Killing", "Pod", "w-a", "gke-n-0000"),
        _kubelet("Killing", "Pod", "w-b", "gke-n-0001"),
        _kubelet("Shutdown", "Node", "gke-n-0000", "gke-n-0000"),
        _kubelet("Shutdown", "Pod", "w-b", "gke-n-0001"),  # not a node's
    ]
    hosts = hosts_of(events, ["w-a", "w-b", "w-z"])
    assert hosts == {"w-a": "gke-n-0000", "w-b": "gke-n-0001"}
    down = shut_down_nodes(events)
    assert down == {"gke-n-0000"}
    assert lost_deleted("w-a", hosts.get("w-a"), down) == (
        "TPU worker pod w-a lost (its node gke-n-0000 shut down; KubeRay deleted the Failed pod)"
    )
    assert lost_deleted("w-b", hosts.get("w-b"), down) == (
        "TPU worker pod w-b lost (Failed; KubeRay deleted it)"
    )
    assert lost_deleted("w-z", None, down) == "TPU worker pod w-z lost (Failed; KubeRay deleted it)"
    assert said(["first", "second", "third"]) == "first and 2 more"
    assert said(["only"]) == "only"
    assert said([]) is None
