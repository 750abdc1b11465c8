"""Discovery as kubectl 1.32 reads it: ``/version``, ``/api``, ``/api/v1``, ``/apis`` and
``/apis/<group>/<version>``. Aggregated discovery (``as=APIGroupDiscoveryList``) is not
offered: the answers are plain JSON, so kubectl falls back to these legacy documents."""

from __future__ import annotations

from typing import Any

from tpu_trainer.simcloud.kube.resources import Resource, groups, registry

Obj = dict[str, Any]
VERSION: Obj = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4-gke.1106006",
    "gitCommit": "0b5d8a4f1c2e3d4b5a6978695a4b3c2d1e0f9a8b",
    "gitTreeState": "clean",
    "buildDate": "2026-10-01T00:00:00Z",
    "goVersion": "go1.23.6 X:boringcrypto",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> Obj:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _entry(r: Resource) -> list[Obj]:
    main: Obj = {
        "name": r.plural,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": list(r.verbs),
    }
    if r.short_names:
        main["shortNames"] = list(r.short_names)
    if r.categories:
        main["categories"] = list(r.categories)
    if r.group:
        main["storageVersionHash"] = ""
    out = [main]
    if r.status_subresource:
        out.append(
            {
                "name": f"{r.plural}/status",
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }
        )
    if r.plural == "pods" and not r.group:
        out.append(
            {
                "name": "pods/log",
                "singularName": "",
                "namespaced": True,
                "kind": "Pod",
                "verbs": ["get"],
            }
        )
    return out


def resource_list(group: str, version: str) -> Obj | None:
    """The APIResourceList of one group version, or None when it is not served."""
    found = [r for r in registry() if (r.group, r.version) == (group, version)]
    if not found:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for r in found for entry in _entry(r)],
    }


def group_list() -> Obj:
    out = []
    for group, versions in groups().items():
        listed = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        out.append({"name": group, "versions": listed, "preferredVersion": listed[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": out}


def group(name: str) -> Obj | None:
    for entry in group_list()["groups"]:
        if entry["name"] == name:
            return {"kind": "APIGroup", "apiVersion": "v1", **entry}
    return None
