"""Placing a pod a controller made on one of the cluster's nodes, as kube-scheduler does for
what the simulation needs: the node is Ready, has no ``NoSchedule`` taint the pod does not
tolerate (a pod asking for ``google.com/tpu`` tolerates GKE's TPU taint: GKE's admission adds
that toleration), has every label of the pod's ``nodeSelector``, and has room left for the
pod's ``cpu``, ``memory`` and ``google.com/tpu`` requests next to the pods already bound to
it. When no node fits, the scheduler's ``PodScheduled`` message says why, node by node.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from tpu_trainer.simcloud.kube.nodes import TPU_RESOURCE

Obj = dict[str, Any]
RESOURCES = ("cpu", "memory", TPU_RESOURCE)
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}  # fmt: skip


def quantity(text: object) -> float:
    """A Kubernetes quantity (``8``, ``500m``, ``16Gi``) as a number (0 when unreadable)."""
    m = _QUANTITY.match(str(text).strip())
    if m is None or m[2] not in _SUFFIX:
        return 0.0
    try:
        return float(m[1]) * _SUFFIX[m[2]]
    except ValueError:
        return 0.0


def format_quantity(value: float, resource: str) -> str:
    """``value`` the way the API server writes a quantity of ``resource``."""
    if resource == "memory":
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            if value and value % _SUFFIX[suffix] == 0:
                return f"{int(value // _SUFFIX[suffix])}{suffix}"
    if value == int(value):
        return str(int(value))
    return f"{round(value * 1000)}m"


def requests(spec: Mapping[str, Any]) -> dict[str, float]:
    """What a pod spec asks for: the sum of its containers' requests (limits when no request)."""
    total: dict[str, float] = {}
    for container in spec.get("containers") or []:
        res = container.get("resources") or {}
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for name in RESOURCES:
            if name in asked:
                total[name] = total.get(name, 0.0) + quantity(asked[name])
    return total


def _ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _untolerated(node: Obj, spec: Mapping[str, Any], asked: Mapping[str, float]) -> Obj | None:
    tolerated = {t.get("key") for t in spec.get("tolerations") or []}
    if asked.get(TPU_RESOURCE):
        tolerated.add(TPU_RESOURCE)
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") == "NoSchedule" and taint.get("key") not in tolerated:
            return dict(taint)
    return None


def _why_not(
    node: Obj, spec: Mapping[str, Any], asked: Mapping[str, float], used: Mapping[str, float]
) -> str:
    """Why ``node`` cannot take the pod (``""``: it can): the first of the scheduler's filters
    that fails, in its order (taints, then node affinity, then resources)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not _ready(node):
        return "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"
    taint = _untolerated(node, spec, asked)
    if taint is not None:
        return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value', '')}}}"
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return "node(s) didn't match Pod's node affinity/selector"
    free = (node.get("status") or {}).get("allocatable") or {}
    for name in RESOURCES:
        if asked.get(name, 0) > quantity(free.get(name, 0)) - used.get(name, 0.0):
            return f"Insufficient {name}"
    return ""


def place(pod: Obj, nodes: Iterable[Obj], bound: Iterable[Obj]) -> tuple[str, str]:
    """(node name, "") for the first node that takes ``pod``; ("", the scheduler's message)
    when none does. ``bound`` are the pods already on nodes (their requests are taken)."""
    spec = pod.get("spec") or {}
    asked = requests(spec)
    used: dict[str, dict[str, float]] = {}
    for other in bound:
        node_name = (other.get("spec") or {}).get("nodeName")
        if node_name:
            on_node = used.setdefault(node_name, {})
            for name, value in requests(other.get("spec") or {}).items():
                on_node[name] = on_node.get(name, 0.0) + value
    reasons: Counter[str] = Counter()
    listed = list(nodes)
    for node in listed:
        name = node["metadata"]["name"]
        why = _why_not(node, spec, asked, used.get(name, {}))
        if not why:
            return name, ""
        reasons[why] += 1
    if not listed:
        return "", "no nodes available to schedule pods"
    total = len(listed)
    said = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    helpful = sum(n for why, n in reasons.items() if why.startswith("Insufficient"))
    preemption = ", ".join(
        part
        for part in (
            f"{helpful} No preemption victims found for incoming pod" if helpful else "",
            f"{total - helpful} Preemption is not helpful for scheduling"
            if total - helpful
            else "",
        )
        if part
    )
    return "", (
        f"0/{total} nodes are available: {said}. preemption: 0/{total} nodes are available: "
        f"{preemption}."
    )
