"""Kubernetes objects of the fake cluster: kinds, the store, merge patches, and the Kueue and
ConfigMap objects xpk writes (built here as xpk 1.16.0's templates write them, not with the
tool's own builders, so a bug there is not copied into the fake).

Kueue v0.19 stores and serves ``kueue.x-k8s.io/v1beta2``: an object written as ``v1beta1`` (what
xpk's templates say) is stored converted, its last-applied annotation keeping what was sent, and
the write draws the CRD's deprecation warning."""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tpu_trainer.fakecloud.state import FAKE_NOW, State, next_id

if TYPE_CHECKING:  # the fake tools never load a scenario: keep them quick to start
    from tpu_trainer.fakecloud.scenario import Scenario

KUEUE = "kueue.x-k8s.io/v1beta2"
"""The version Kueue stores and ``kubectl get`` returns."""
XPK_KUEUE = "kueue.x-k8s.io/v1beta1"
"""The version xpk's templates write (deprecated: served, converted, warned about)."""
DEPRECATED_WARNING = "Warning: This version is deprecated. Use v1beta2 instead."
"""What kubectl prints for a write in a deprecated Kueue version (the CRD's own text)."""
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "multislice-queue"
TPU_RESOURCE = "google.com/tpu"
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


@dataclass(frozen=True, slots=True)
class Kind:
    kind: str
    plural: str
    group: str
    namespaced: bool
    virtual: bool = False
    """Pods and JobSets are derived from the workloads, not stored."""


KINDS = (
    Kind("ResourceFlavor", "resourceflavors", "kueue.x-k8s.io", False),
    Kind("ClusterQueue", "clusterqueues", "kueue.x-k8s.io", False),
    Kind("LocalQueue", "localqueues", "kueue.x-k8s.io", True),
    Kind("Workload", "workloads", "kueue.x-k8s.io", True),
    Kind("ConfigMap", "configmaps", "", True),
    Kind("PriorityClass", "priorityclasses", "scheduling.k8s.io", False),
    Kind("Pod", "pods", "", True, virtual=True),
    Kind("JobSet", "jobsets", "jobset.x-k8s.io", True, virtual=True),
)
"""The kinds kept in ``state["k8s"]``, where the fake xpk and the workload model read them
(the Kubernetes API emulator serves them from there too)."""


def kind_of(obj: dict[str, Any]) -> Kind | None:
    return next((k for k in KINDS if k.kind == obj.get("kind")), None)


def key(kind: Kind, name: str, namespace: str) -> str:
    return f"{kind.kind}/{namespace if kind.namespaced else ''}/{name}"


def get(state: State, kind: Kind, name: str, namespace: str = "default") -> dict[str, Any] | None:
    found: dict[str, Any] | None = state["k8s"].get(key(kind, name, namespace))
    return found


def listed(state: State, kind: Kind, namespace: str | None) -> list[dict[str, Any]]:
    """Stored objects of ``kind`` (in ``namespace``, or everywhere when None)."""
    prefix = f"{kind.kind}/"
    out = []
    for k, obj in state["k8s"].items():
        ns = k.split("/")[1]
        if k.startswith(prefix) and (namespace is None or not kind.namespaced or ns == namespace):
            out.append(obj)
    return out


def put(
    state: State, obj: dict[str, Any], namespace: str = "default", *, applied: bool = False
) -> str:
    """Store ``obj`` (create or replace); returns ``created``, ``configured`` or ``unchanged``."""
    kind = kind_of(obj)
    if kind is None:
        raise ValueError(f"unknown kind {obj.get('kind')}")
    meta = obj.setdefault("metadata", {})
    if kind.namespaced:
        meta["namespace"] = meta.get("namespace") or namespace
    else:
        meta.pop("namespace", None)
    k = key(kind, meta["name"], meta.get("namespace", ""))
    old = state["k8s"].get(k)
    if applied:
        clean = copy.deepcopy(obj)
        meta.setdefault("annotations", {})[_LAST_APPLIED] = (
            json.dumps(clean, separators=(",", ":")) + "\n"
        )
    _to_stored_version(obj)
    if old is not None and _content(old) == _content(obj):
        return "unchanged"
    number = next_id(state)
    old_meta = (old or {}).get("metadata", {})
    meta["uid"] = old_meta.get("uid") or f"0f4c{number:04d}-5a1e-4c0d-9a7b-{number:012d}"
    meta["creationTimestamp"] = old_meta.get("creationTimestamp") or FAKE_NOW
    meta["resourceVersion"] = str(number)
    meta["generation"] = int(old_meta.get("generation", 0)) + 1
    state["k8s"][k] = obj
    return "configured" if old is not None else "created"


def deprecated(obj: dict[str, Any]) -> bool:
    """Whether a write of ``obj`` draws Kueue's deprecation warning."""
    return obj.get("apiVersion") == XPK_KUEUE


def _to_stored_version(obj: dict[str, Any]) -> None:
    """A v1beta1 Kueue object as v1beta2 (ClusterQueue's renamed fields moved), in place."""
    if not deprecated(obj):
        return
    obj["apiVersion"] = KUEUE
    spec = obj.get("spec")
    if obj.get("kind") != "ClusterQueue" or not isinstance(spec, dict):
        return
    if "cohort" in spec:
        spec["cohortName"] = spec.pop("cohort")
    checks = spec.pop("admissionChecks", None)
    if checks:
        strategy = spec.setdefault("admissionChecksStrategy", {})
        strategy.setdefault("admissionChecks", []).extend({"name": n} for n in checks)


def _content(obj: dict[str, Any]) -> Any:
    meta = {
        k: v
        for k, v in obj.get("metadata", {}).items()
        if k not in ("uid", "creationTimestamp", "resourceVersion", "generation")
    }
    return {**{k: v for k, v in obj.items() if k != "metadata"}, "metadata": meta}


# ---- what xpk writes ---------------------------------------------------------------------------
def configmap(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": dict(data)}


def resource_flavor(name: str, accelerator: str | None, topology: str | None) -> dict[str, Any]:
    labels = {}
    if accelerator:
        labels["cloud.google.com/gke-tpu-accelerator"] = accelerator
    if topology:
        labels["cloud.google.com/gke-tpu-topology"] = topology
    return {
        "apiVersion": XPK_KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": labels},
    }


def cluster_queue(flavors: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": XPK_KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority"},
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": [TPU_RESOURCE],
                    "flavors": [
                        {"name": n, "resources": [{"name": TPU_RESOURCE, "nominalQuota": q}]}
                        for n, q in flavors.items()
                    ],
                }
            ],
        },
    }


def local_queue() -> dict[str, Any]:
    return {
        "apiVersion": XPK_KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": "default"},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }


def _flavor_labels(name: str) -> tuple[str | None, str | None]:
    """Node labels of a scenario flavor ``1xtpu7x-256``: the slice it names, if it parses."""
    from tpu_trainer.errors import TpuTrainerError
    from tpu_trainer.plan.slices import Slice

    device = name.split("x", 1)[1] if "x" in name and name.split("x", 1)[0].isdigit() else name
    try:
        s = Slice.parse(device)
    except TpuTrainerError:
        return None, None
    return s.accelerator.gke_accelerator, s.topology_name


def initial_objects(scenario: Scenario) -> dict[str, Any]:
    """The Kubernetes objects a scenario starts with (stored without server fields yet)."""
    state: State = {"k8s": {}, "seq": 100}
    for name in scenario.kueue.resource_flavors:
        put(state, resource_flavor(name, *_flavor_labels(name)))
    kueue = scenario.kueue
    if kueue.cluster_queue is not None:
        put(state, cluster_queue(dict(kueue.cluster_queue)))
    if kueue.local_queue or (kueue.local_queue is None and kueue.cluster_queue is not None):
        put(state, local_queue())
    if scenario.kueue.configmap is not None:
        name = f"{scenario.cluster.name}-resources-configmap"
        put(state, configmap(name, dict(scenario.kueue.configmap)))
    objects: dict[str, Any] = state["k8s"]
    return objects


def flavor_quota(state: State, flavor: str) -> int | None:
    """The ``google.com/tpu`` quota ``cluster-queue`` gives ``flavor`` (None: not listed)."""
    queue = get(state, KINDS[1], CLUSTER_QUEUE)
    for group in ((queue or {}).get("spec") or {}).get("resourceGroups") or []:
        for f in group.get("flavors") or []:
            if f.get("name") != flavor:
                continue
            for r in f.get("resources") or []:
                if r.get("name") == TPU_RESOURCE:
                    try:
                        return int(str(r.get("nominalQuota")))
                    except ValueError:
                        return None
    return None
