"""The status the kubelet and the scheduler write on a controller's pod: Pending and
``Unschedulable`` when no node takes it; once bound, Running with every condition True, or
(an image that cannot be pulled) Pending with its containers waiting in ``ImagePullBackOff``
and ``Ready`` False, ``ContainersNotReady``."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def _cond(kind: str, status: str, now: str, reason: str = "", message: str = "") -> Obj:
    out: Obj = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def unschedulable_status(message: str, now: str) -> Obj:
    return {
        "phase": "Pending",
        "qosClass": "Burstable",
        "conditions": [_cond("PodScheduled", "False", now, "Unschedulable", message)],
    }


def bound_status(pod: Obj, now: str, *, ready: bool, seed: int) -> Obj:
    """A pod bound to its node: running and ready, or waiting for its images."""
    containers = [str(c.get("name")) for c in pod["spec"].get("containers") or []]
    images = {
        str(c.get("name")): str(c.get("image", "")) for c in pod["spec"].get("containers") or []
    }
    ip = f"10.{64 + seed // 62500 % 64}.{seed // 250 % 250}.{seed % 250 + 2}"
    status: Obj = {
        "phase": "Running" if ready else "Pending",
        "qosClass": "Burstable",
        "hostIP": f"10.128.0.{seed % 250 + 2}",
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
    }
    if ready:
        status["conditions"] = [
            _cond(kind, "True", now)
            for kind in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ]  # fmt: skip
        state: Obj = {"running": {"startedAt": now}}
    else:
        unready = f"containers with unready status: [{' '.join(containers)}]"
        status["conditions"] = [
            _cond("PodReadyToStartContainers", "True", now),
            _cond("Initialized", "True", now),
            _cond("Ready", "False", now, "ContainersNotReady", unready),
            _cond("ContainersReady", "False", now, "ContainersNotReady", unready),
            _cond("PodScheduled", "True", now),
        ]
        state = {}
    status["containerStatuses"] = [
        {
            "name": name,
            "image": images[name],
            "imageID": "",
            "ready": ready,
            "started": ready,
            "restartCount": 0,
            "state": state
            or {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": f'Back-off pulling image "{images[name]}"',
                }
            },
        }
        for name in containers
    ]
    return status
