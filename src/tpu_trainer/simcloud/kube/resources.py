"""The kinds the emulated Kubernetes API server serves: core ones, and the vendored CRDs' kinds.

A :class:`Resource` is one (group, version, plural) the server answers for, with what
discovery says about it (kind, scope, short names, verbs) and, for a custom resource, its
``openAPIV3Schema``, printer columns and the deprecation warning of a deprecated version, all
read from the CRD files shipped in ``tpu_trainer/catalog/crds`` (``fakecloud.crd.CRD_FILES``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from tpu_trainer.fakecloud.crd import CRD_FILES, crd_dir

ALL_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
READ_VERBS = ("get", "list", "watch")


@dataclass(frozen=True)
class Resource:
    """One resource of one served API version."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    schema: Mapping[str, Any] | None = None
    """The CRD version's ``openAPIV3Schema``; None for a core kind."""
    columns: tuple[Mapping[str, Any], ...] = ()
    """``additionalPrinterColumns`` of a CRD version."""
    warning: str = ""
    """The deprecation warning a request to this version is answered with."""
    storage: bool = True
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def group_resource(self) -> str:
        """``jobsets.jobset.x-k8s.io`` or ``pods``, as error messages name a resource."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _core(
    plural: str,
    kind: str,
    namespaced: bool,
    *short: str,
    verbs: tuple[str, ...] = ALL_VERBS,
    categories: tuple[str, ...] = (),
) -> Resource:
    return Resource(
        "",
        "v1",
        plural,
        kind,
        namespaced,
        short,
        verbs,
        categories=categories,
        status_subresource=True,
    )


CORE: tuple[Resource, ...] = (
    _core("namespaces", "Namespace", False, "ns"),
    _core("nodes", "Node", False, "no", verbs=READ_VERBS),
    _core("pods", "Pod", True, "po", categories=("all",)),
    _core("configmaps", "ConfigMap", True, "cm"),
    _core("events", "Event", True, "ev"),
    _core("services", "Service", True, "svc", categories=("all",)),
    _core("secrets", "Secret", True),
)
"""Core ``v1`` kinds; nodes are read-only (they are the state's node pools)."""

_RBAC = "rbac.authorization.k8s.io"
BUILTIN: tuple[Resource, ...] = (
    Resource("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",)),
    Resource("apps", "v1", "deployments", "Deployment", True, ("deploy",), categories=("all",)),
    Resource(_RBAC, "v1", "roles", "Role", True),
    Resource(_RBAC, "v1", "rolebindings", "RoleBinding", True),
    Resource(_RBAC, "v1", "clusterroles", "ClusterRole", False),
    Resource(_RBAC, "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
)
"""Built-in kinds xpk 1.16 reads or writes besides those: its Python client makes a
ServiceAccount and RBAC objects before a workload; ``cluster adapt`` reads the JobSet and Kueue
controllers' Deployments (``addons.py``) and applies its PriorityClasses."""


@functools.cache
def _crd_documents() -> tuple[Mapping[str, Any], ...]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    folder = crd_dir()
    docs = []
    for relative in dict.fromkeys(CRD_FILES.values()):
        text = (folder / relative).read_text(encoding="utf-8")
        docs.append(yaml.load(text, Loader=loader))  # noqa: S506 - a safe loader either way
    return tuple(docs)


def _crd_resources(doc: Mapping[str, Any]) -> list[Resource]:
    spec = doc["spec"]
    names = spec["names"]
    out = []
    for version in spec["versions"]:
        if not version.get("served", True):
            continue
        warning = ""
        if version.get("deprecated"):
            warning = version.get("deprecationWarning") or (
                f"{spec['group']}/{version['name']} {names['kind']} is deprecated"
            )
        out.append(
            Resource(
                spec["group"],
                version["name"],
                names["plural"],
                names["kind"],
                spec["scope"] == "Namespaced",
                tuple(names.get("shortNames") or ()),
                schema=version["schema"]["openAPIV3Schema"],
                columns=tuple(version.get("additionalPrinterColumns") or ()),
                warning=warning,
                storage=bool(version.get("storage")),
                categories=tuple(names.get("categories") or ()),
                status_subresource="status" in (version.get("subresources") or {}),
            )
        )
    return out


@functools.cache
def registry() -> tuple[Resource, ...]:
    """Every served resource: core v1 first, then each CRD's served versions in file order."""
    out = [*CORE, *BUILTIN]
    for doc in _crd_documents():
        out.extend(_crd_resources(doc))
    return tuple(out)


def groups() -> dict[str, list[str]]:
    """API group → its served versions, the preferred (storage) version first."""
    found: dict[str, list[str]] = {}
    for r in registry():
        if not r.group:
            continue
        versions = found.setdefault(r.group, [])
        if r.version not in versions:
            versions.insert(0, r.version) if r.storage else versions.append(r.version)
    return found


def find(group: str, version: str, plural: str) -> Resource | None:
    for r in registry():
        if (r.group, r.version, r.plural) == (group, version, plural):
            return r
    return None


def storage_of(resource: Resource) -> Resource:
    """The storage version of the same kind (objects are kept in it, whatever version wrote)."""
    for r in registry():
        if r.group == resource.group and r.plural == resource.plural and r.storage:
            return r
    return resource
