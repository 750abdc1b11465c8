"""What a GKE cluster made ready for xpk holds besides its nodes: the JobSet and Kueue
controllers, each a Deployment in its own namespace, at the versions of the CRDs the emulator
serves (``fakecloud.crd.CRD_FILES``: JobSet v0.12.0, Kueue v0.19.2).

xpk 1.16 reads them before it changes anything: ``cluster adapt`` lists the images of the
Deployments in ``jobset-system`` and reads ``kueue-controller-manager``'s in ``kueue-system``;
an older version than its own (JobSet v0.10.1, Kueue v0.17.1), or none, makes it install its
release manifests from github.com. Like the nodes and the built-in namespaces they are not
stored: every read computes them, and they cannot be changed or deleted.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from tpu_trainer.fakecloud.crd import CRD_FILES
from tpu_trainer.simcloud.kube.resources import Resource

Obj = dict[str, Any]
_UID_SPACE = uuid.UUID("0b6f3f2e-8a51-4c2b-9f7c-2d1e4a5b6c70")


def _version(group: str) -> str:
    """``v0.12.0`` from the folder of the group's vendored CRD files."""
    for (crd_group, _kind), relative in CRD_FILES.items():
        if crd_group == group:
            found = re.search(r"-(v\d+\.\d+\.\d+)/", relative)
            if found:
                return found.group(1)
    raise LookupError(f"no vendored CRD for {group}")


def controllers() -> tuple[tuple[str, str, str], ...]:
    """(namespace, deployment, image) of each controller the cluster runs."""
    return (
        (
            "jobset-system",
            "jobset-controller-manager",
            f"registry.k8s.io/jobset/jobset:{_version('jobset.x-k8s.io')}",
        ),
        (
            "kueue-system",
            "kueue-controller-manager",
            f"registry.k8s.io/kueue/kueue:{_version('kueue.x-k8s.io')}",
        ),
    )


NAMESPACES = tuple(namespace for namespace, _, _ in controllers())
"""The namespaces the controllers live in (they always exist, like the built-in ones)."""


def _deployment(namespace: str, name: str, image: str, created: str) -> Obj:
    labels = {"control-plane": "controller-manager"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": str(uuid.uuid5(_UID_SPACE, f"{namespace}/{name}")),
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": created,
            "labels": dict(labels),
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"containers": [{"name": "manager", "image": image}]},
            },
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "updatedReplicas": 1,
        },
    }


def addon_objects(resource: Resource, created: str) -> list[Obj]:
    """The controllers' Deployments when ``resource`` is ``deployments.apps``; else none."""
    if (resource.group, resource.plural) != ("apps", "deployments"):
        return []
    return [_deployment(ns, name, image, created) for ns, name, image in controllers()]
