"""Conversion between a custom resource's served versions, as the projects' conversion webhooks
do it, for the fields that differ: Kueue's ClusterQueue ``spec.cohort`` (v1beta1) is
``spec.cohortName`` (v1beta2), and v1beta1's ``spec.admissionChecks`` (names) is
``spec.admissionChecksStrategy.admissionChecks`` (``{name}`` entries). Every other field is
the same in both versions of the shipped CRDs; objects are stored in the storage version."""

from __future__ import annotations

import copy
from typing import Any

from tpu_trainer.simcloud.kube.resources import Resource, storage_of

Obj = dict[str, Any]
_RENAMED = {("kueue.x-k8s.io", "ClusterQueue", "v1beta1"): {"cohort": "cohortName"}}
"""(group, kind, old version) → {old spec field: storage version's name}."""


_CQ_V1BETA1 = ("kueue.x-k8s.io", "ClusterQueue", "v1beta1")


def _convert(obj: Obj, version: str, resource: Resource, *, to_storage: bool) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    for old, new in _RENAMED.get((resource.group, resource.kind, version), {}).items():
        source, target = (old, new) if to_storage else (new, old)
        if source in spec:
            spec[target] = spec.pop(source)
    if to_storage and (resource.group, resource.kind, version) == _CQ_V1BETA1:
        names = spec.pop("admissionChecks", None)
        if names:
            strategy = spec.setdefault("admissionChecksStrategy", {})
            strategy["admissionChecks"] = [{"name": n} for n in names]


def to_storage(resource: Resource, obj: Obj) -> Obj:
    """``obj`` written in ``resource``'s version, as stored (in the storage version)."""
    storage = storage_of(resource)
    out = copy.deepcopy(obj)
    if storage.version != resource.version:
        _convert(out, resource.version, resource, to_storage=True)
    out["apiVersion"] = storage.api_version
    return out


def served(resource: Resource, stored: Obj) -> Obj:
    """A stored object in the version ``resource`` serves."""
    out = copy.deepcopy(stored)
    if storage_of(resource).version != resource.version:
        _convert(out, resource.version, resource, to_storage=False)
    out["apiVersion"] = resource.api_version
    return out
