"""Kueue and xpk objects for a TPU slice, and the repairs an existing cluster needs (pure).

xpk admits a workload of ``num_slices`` slices only when three things agree with the slice:

* a ResourceFlavor ``<num_slices>x<device>`` (``1xtpu7x-256``) selecting the slice's nodes;
* the ClusterQueue ``cluster-queue`` listing that flavor with a ``google.com/tpu`` quota of every
  chip of every slice;
* the ConfigMap ``<cluster>-resources-configmap`` (namespace ``default``) mapping the device
  (``tpu7x-256``) to the number of hosts of all slices.

Builders here return plain dicts in Kueue's ``v1beta2`` API (the version Kueue v0.19 stores and
serves; ``v1beta1``, which xpk's templates still write, is deprecated and the server warns on
every write). A repair of an object read as ``v1beta1`` is written as ``v1beta2`` with the
fields v1beta2 renamed moved (``spec.cohort`` → ``spec.cohortName``, ``spec.admissionChecks``
→ ``spec.admissionChecksStrategy``). The cluster checks every object before it is applied
(``kubectl apply --dry-run=server``); the tests check them against the real CRDs.
``kueue_findings`` turns the
current objects into problems, each with the exact command that fixes it. Nothing here runs.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

from tpu_trainer.errors import InputError
from tpu_trainer.infra.kube_yaml import dump_all
from tpu_trainer.plan.naming import LOCAL_QUEUE
from tpu_trainer.plan.slices import Slice

API_VERSION = "kueue.x-k8s.io/v1beta2"
DEPRECATED_API_VERSION = "kueue.x-k8s.io/v1beta1"
CLUSTER_QUEUE = "cluster-queue"
CONFIGMAP_NAMESPACE = "default"
TPU_RESOURCE = "google.com/tpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"
TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"

_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{s: Decimal(1024**i) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), start=1)},
}


def configmap_name(cluster: str) -> str:
    """``<cluster>-resources-configmap``, the map xpk reads device host counts from."""
    return f"{cluster}-resources-configmap"


# ---- builders --------------------------------------------------------------------------------
def _node_labels(slice_: Slice) -> dict[str, str]:
    return {
        ACCELERATOR_LABEL: slice_.accelerator.gke_accelerator,
        TOPOLOGY_LABEL: slice_.topology_name,
    }


def resource_flavor(slice_: Slice, num_slices: int) -> dict[str, Any]:
    """The ResourceFlavor xpk creates for ``num_slices`` slices of ``slice_``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": slice_.kueue_flavor(num_slices)},
        "spec": {"nodeLabels": _node_labels(slice_)},
    }


def _tpu_flavor(slice_: Slice, num_slices: int) -> dict[str, Any]:
    return {
        "name": slice_.kueue_flavor(num_slices),
        "resources": [{"name": TPU_RESOURCE, "nominalQuota": slice_.kueue_quota(num_slices)}],
    }


def cluster_queue(slice_: Slice, num_slices: int) -> dict[str, Any]:
    """A new ``cluster-queue`` as xpk writes it, admitting from every namespace."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {"coveredResources": [TPU_RESOURCE], "flavors": [_tpu_flavor(slice_, num_slices)]}
            ],
        },
    }


def local_queue(namespace: str = CONFIGMAP_NAMESPACE, name: str = LOCAL_QUEUE) -> dict[str, Any]:
    """The LocalQueue ``name`` feeding ``cluster-queue``: xpk's ``multislice-queue``, or the one
    a gcluster recipe's ``--queue`` names."""
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": CLUSTER_QUEUE},
    }


# ---- repairs ---------------------------------------------------------------------------------
def _applyable(current: Mapping[str, Any]) -> dict[str, Any]:
    """``current`` as read from the cluster, less what the server owns (status, uid, ...)."""
    meta = current.get("metadata") or {}
    clean_meta: dict[str, Any] = {"name": meta.get("name")}
    if meta.get("labels"):
        clean_meta["labels"] = copy.deepcopy(meta["labels"])
    notes = {k: v for k, v in (meta.get("annotations") or {}).items() if k != _LAST_APPLIED}
    if notes:
        clean_meta["annotations"] = notes
    out = {"apiVersion": API_VERSION, "kind": current.get("kind")}
    out["metadata"] = clean_meta
    out["spec"] = as_v1beta2_spec(current.get("kind"), current.get("spec") or {})
    return out


def as_v1beta2_spec(kind: object, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A Kueue ``spec`` (v1beta1 or v1beta2) in v1beta2's field names.

    Of the three kinds written here only ClusterQueue changed: ``cohort`` became
    ``cohortName``, and the ``admissionChecks`` name list became
    ``admissionChecksStrategy.admissionChecks`` entries.
    """
    out = copy.deepcopy(dict(spec))
    if kind != "ClusterQueue":
        return out
    if "cohort" in out:
        out.setdefault("cohortName", out.pop("cohort"))
    checks = out.pop("admissionChecks", None)
    if checks:
        strategy = out.setdefault("admissionChecksStrategy", {})
        listed = strategy.setdefault("admissionChecks", [])
        known = {c.get("name") for c in listed}
        listed.extend({"name": name} for name in checks if name not in known)
    return out


def resource_flavor_repair(
    current: Mapping[str, Any] | None, slice_: Slice, num_slices: int
) -> dict[str, Any] | None:
    """The flavor to apply: a new one, the current one with its node labels fixed, or None."""
    if current is None:
        return resource_flavor(slice_, num_slices)
    labels = (current.get("spec") or {}).get("nodeLabels") or {}
    wanted = _node_labels(slice_)
    if all(labels.get(k) == v for k, v in wanted.items()):
        return None
    updated = _applyable(current)
    updated["spec"]["nodeLabels"] = {**labels, **wanted}
    return updated


def quantity(value: object) -> Decimal | None:
    """A Kubernetes quantity (``128``, ``"128"``, ``"1k"``, ``"2Ki"``) as a number; None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return Decimal(value)
    match = _QUANTITY.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    number, suffix = match.groups()
    try:
        if suffix and suffix[0] in "eE" and suffix not in _SUFFIXES:
            return Decimal(number + suffix)
        return Decimal(number) * _SUFFIXES.get(suffix or "", Decimal(1))
    except InvalidOperation:
        return None


def _find_flavor(
    groups: list[dict[str, Any]], name: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    for group in groups:
        for flavor in group.get("flavors") or []:
            if flavor.get("name") == name:
                return group, flavor
    return None


def _new_flavor_in(group: dict[str, Any], slice_: Slice, num_slices: int) -> dict[str, Any]:
    """A TPU flavor for ``group``, listing its covered resources in order (a CRD rule).

    Other resources xpk covers (``cpu``, ``memory`` with ``--cpu-limit``/``--memory-limit``) get
    the quota the group's first flavor gives them: xpk sets them cluster-wide.
    """
    first = (group.get("flavors") or [{}])[0]
    existing = {r.get("name"): r for r in first.get("resources") or []}
    resources: list[dict[str, Any]] = []
    for resource in group["coveredResources"]:
        if resource == TPU_RESOURCE:
            resources.append({"name": TPU_RESOURCE, "nominalQuota": slice_.kueue_quota(num_slices)})
        elif resource in existing:
            resources.append(copy.deepcopy(existing[resource]))
        else:
            raise InputError(
                f"ClusterQueue {CLUSTER_QUEUE} covers {resource} but its flavor "
                f"{first.get('name')} gives it no quota",
                fix=f"kubectl edit clusterqueue {CLUSTER_QUEUE}: give every flavor of that "
                "resource group a quota for each covered resource",
            )
    return {"name": slice_.kueue_flavor(num_slices), "resources": resources}


def cluster_queue_repair(
    current: Mapping[str, Any] | None, slice_: Slice, num_slices: int
) -> dict[str, Any] | None:
    """The whole ClusterQueue to apply so it admits the slices, or None if it already does.

    A missing queue becomes a new ``cluster-queue``. Otherwise the flavor is added to the
    resource group covering ``google.com/tpu`` (a new group if none does), or its quota is set
    right; other flavors, groups and settings stay as they are. Server-owned fields (status,
    uid, resourceVersion, the last-applied annotation) are left out of the result.
    """
    if current is None:
        return cluster_queue(slice_, num_slices)
    name, quota = slice_.kueue_flavor(num_slices), slice_.kueue_quota(num_slices)
    updated = _applyable(current)
    groups: list[dict[str, Any]] = updated["spec"].setdefault("resourceGroups", [])
    located = _find_flavor(groups, name)
    if located is None:
        group = next((g for g in groups if TPU_RESOURCE in g.get("coveredResources", ())), None)
        if group is None:
            group = {"coveredResources": [TPU_RESOURCE], "flavors": []}
            groups.append(group)
        group.setdefault("flavors", []).append(_new_flavor_in(group, slice_, num_slices))
        return updated
    group, flavor = located
    entry = next((r for r in flavor.get("resources") or [] if r.get("name") == TPU_RESOURCE), None)
    if entry is None:
        raise InputError(
            f"ClusterQueue {CLUSTER_QUEUE} has flavor {name} in a resource group that does not "
            f"cover {TPU_RESOURCE} (it covers {', '.join(group.get('coveredResources', []))})",
            fix=f"kubectl edit clusterqueue {CLUSTER_QUEUE}: move flavor {name} to the resource "
            f"group covering {TPU_RESOURCE}",
        )
    if quantity(entry.get("nominalQuota")) == quota:
        return None
    entry["nominalQuota"] = quota
    return updated


def configmap_patch(
    cluster: str, slice_: Slice, num_slices: int, current_data: Mapping[str, str] | None
) -> dict[str, Any] | None:
    """The merge-patch body that sets the slice's host count in the xpk resources map.

    None when ``current_data`` (the map's ``data``) already has it. ``cluster`` names the map.
    """
    del cluster  # the map's name comes from it; the body does not
    key, value = slice_.configmap_entry(num_slices)
    if current_data is not None and current_data.get(key) == value:
        return None
    return {"data": {key: value}}


# ---- findings --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Finding:
    """One thing wrong with Kueue or xpk configuration, and the command that fixes it."""

    subject: str
    """What is wrong, by kind and name: ``ClusterQueue cluster-queue``."""
    message: str
    """Why it matters, with the numbers."""
    argv: tuple[str, ...]
    """The fixing command, without a shell."""
    manifest: Mapping[str, Any] | None = field(default=None, compare=False)
    """For ``kubectl apply -f -``: the object to send on standard input."""

    @property
    def stdin(self) -> str | None:
        """YAML for the command's standard input, if it takes one."""
        if self.manifest is None:
            return None
        return dump_all([self.manifest])

    @property
    def fix(self) -> str:
        """The fixing command as a person pastes it into a shell."""
        line = shlex.join(self.argv)
        if self.stdin is None:
            return line
        return f"{line} <<'EOF'\n{self.stdin}EOF"


def _apply(subject: str, message: str, manifest: Mapping[str, Any]) -> Finding:
    return Finding(subject, message, ("kubectl", "apply", "-f", "-"), manifest)


def _flavor_finding(
    current: Mapping[str, Any] | None, slice_: Slice, num_slices: int
) -> Finding | None:
    repaired = resource_flavor_repair(current, slice_, num_slices)
    if repaired is None:
        return None
    name = slice_.kueue_flavor(num_slices)
    subject = f"ResourceFlavor {name}"
    if current is None:
        why = f"does not exist: Kueue cannot admit {num_slices} × {slice_.device_type}"
    else:
        labels = (current.get("spec") or {}).get("nodeLabels") or {}
        shown = ", ".join(f"{k}={labels.get(k, '<unset>')}" for k in _node_labels(slice_))
        wanted = ", ".join(f"{k}={v}" for k, v in _node_labels(slice_).items())
        why = f"selects nodes with {shown}, but {slice_.device_type} nodes have {wanted}"
    return _apply(subject, f"{subject} {why}", repaired)


def _queue_message(current: Mapping[str, Any] | None, slice_: Slice, num_slices: int) -> str:
    name, quota = slice_.kueue_flavor(num_slices), slice_.kueue_quota(num_slices)
    arithmetic = f"{quota} = {slice_.chips} chips × {num_slices} slice(s)"
    if current is None:
        return f"ClusterQueue {CLUSTER_QUEUE} does not exist (workloads are submitted through it)"
    groups = (current.get("spec") or {}).get("resourceGroups") or []
    located = _find_flavor(groups, name)
    if located is None:
        return f"ClusterQueue {CLUSTER_QUEUE} has no flavor {name}: it needs {TPU_RESOURCE} {arithmetic}"
    entry = next(r for r in located[1]["resources"] if r.get("name") == TPU_RESOURCE)
    return (
        f"ClusterQueue {CLUSTER_QUEUE} gives flavor {name} {TPU_RESOURCE} quota "
        f"{entry.get('nominalQuota')}, but it needs {arithmetic}"
    )


def _configmap_finding(
    cluster: str, slice_: Slice, num_slices: int, data: Mapping[str, str] | None
) -> Finding | None:
    patch = configmap_patch(cluster, slice_, num_slices, data)
    if patch is None:
        return None
    name = configmap_name(cluster)
    key, value = slice_.configmap_entry(num_slices)
    arithmetic = f"{value} = {slice_.hosts} hosts × {num_slices} slice(s)"
    subject = f"ConfigMap {name}"
    if data is None:
        argv = ("kubectl", "create", "configmap", name, "-n", CONFIGMAP_NAMESPACE)
        message = (
            f"{subject} does not exist in namespace {CONFIGMAP_NAMESPACE}: xpk reads {key} from it"
        )
        return Finding(
            subject, f"{message} ({arithmetic})", (*argv, f"--from-literal={key}={value}")
        )
    had = f"has {key}: {data[key]!r}" if key in data else f"has no {key}"
    body = json.dumps(patch, separators=(",", ":"))
    argv = ("kubectl", "patch", "configmap", name, "-n", CONFIGMAP_NAMESPACE)
    message = f"{subject} {had}, but xpk needs {key}: {value!r} ({arithmetic})"
    return Finding(subject, message, (*argv, "--type", "merge", "-p", body))


def kueue_findings(
    cluster: str,
    slice_: Slice,
    num_slices: int,
    *,
    flavor: Mapping[str, Any] | None,
    cluster_queue: Mapping[str, Any] | None,
    configmap_data: Mapping[str, str] | None,
    local_queue_exists: bool = True,
    xpk_configmap: bool = True,
    local_queue_name: str = LOCAL_QUEUE,
) -> list[Finding]:
    """What keeps Kueue from admitting ``num_slices`` × ``slice_`` on ``cluster``, with fixes.

    The arguments are the objects as read from the cluster (None when one does not exist):
    the ResourceFlavor, the ClusterQueue ``cluster-queue``, whether the LocalQueue
    ``local_queue_name`` exists, and the ``data`` of the ``<cluster>-resources-configmap``
    (judged only with ``xpk_configmap``: xpk reads it, gcluster does not). An empty list means
    all is in order.
    """
    findings: list[Finding] = []
    flavor_finding = _flavor_finding(flavor, slice_, num_slices)
    if flavor_finding is not None:
        findings.append(flavor_finding)
    queue = cluster_queue_repair(cluster_queue, slice_, num_slices)
    if queue is not None:
        message = _queue_message(cluster_queue, slice_, num_slices)
        findings.append(_apply(f"ClusterQueue {CLUSTER_QUEUE}", message, queue))
    if not local_queue_exists:
        who = "xpk submits" if local_queue_name == LOCAL_QUEUE else "the recipe's --queue submits"
        findings.append(
            _apply(
                f"LocalQueue {local_queue_name}",
                f"LocalQueue {local_queue_name} does not exist in namespace "
                f"{CONFIGMAP_NAMESPACE}: {who} workloads to it, and it feeds {CLUSTER_QUEUE}",
                local_queue(name=local_queue_name),
            )
        )
    configmap = (
        _configmap_finding(cluster, slice_, num_slices, configmap_data) if xpk_configmap else None
    )
    if configmap is not None:
        findings.append(configmap)
    return findings
