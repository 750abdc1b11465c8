"""What KubeRay v1.7's RayCluster controller makes for a cluster, built as it builds them
(``ray-operator/controllers/ray``: ``common/pod.go``, ``common/service.go``, the auth Secret
of ``raycluster_controller.go``), every object owned by the RayCluster (a controller
``ownerReference``: deleting the cluster deletes them).

- head pod: ``generateName: <cluster>-head-``; worker pods: ``<cluster>-<group>-worker-``
  (names up to 50 characters before the suffix);
- labels: ``ray.io/is-ray-node: yes``, ``ray.io/cluster``, ``ray.io/node-type`` (``head`` |
  ``worker``), ``ray.io/group`` (``headgroup`` | the group's name), ``ray.io/identifier``,
  ``app.kubernetes.io/name: kuberay``, ``app.kubernetes.io/created-by: kuberay-operator``, with
  the pod template's own; workers also ``ray.io/worker-group-replica-index`` and, in a
  multi-host group, ``ray.io/worker-group-replica-name`` (``<group>-<5 characters>``, one
  per replica) and ``ray.io/replica-host-index`` (the ``RayMultiHostIndexing`` gate, on in
  v1.7);
- the Ray container (the first): the ``metrics`` port 8080 added when missing, its command
  replaced by ``/bin/bash -c -- "ulimit ...; ray start ..."``, KubeRay's environment, and
  with ``authOptions.mode: token`` ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN`` from the
  Secret; ``/dev/shm`` as a memory ``emptyDir``;
- the head Service ``<cluster>-head-svc`` (or ``headService.name``): headless, selecting the
  head pod, one port per port of the head's Ray container (``metrics`` 8080 added);
- with token auth and no ``secretName``: the Secret named after the cluster, ``auth_token``
  a random token (base64 of 32 bytes), labelled ``ray.io/cluster``.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

Obj = dict[str, Any]
KUBERAY_VERSION = "v1.7.0"
CLUSTER_LABEL = "ray.io/cluster"
NODE_TYPE_LABEL = "ray.io/node-type"
GROUP_LABEL = "ray.io/group"
HEAD_GROUP = "headgroup"
DASHBOARD_PORT = 8265
METRICS_PORT = 8080
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters the API server's ``generateName`` (and KubeRay's replica names) draw from."""
_RESERVED = (NODE_TYPE_LABEL, GROUP_LABEL, CLUSTER_LABEL)


def suffix(seed: str, length: int = 5) -> str:
    """``length`` characters of the API server's alphabet, the same for the same ``seed``."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:length])


def owner(cluster: Obj) -> Obj:
    meta = cluster["metadata"]
    return {
        "apiVersion": cluster.get("apiVersion", "ray.io/v1"),
        "kind": "RayCluster",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def token_auth(cluster: Obj) -> bool:
    auth = (cluster.get("spec") or {}).get("authOptions") or {}
    return auth.get("mode") == "token" and not auth.get("enableK8sTokenAuth")


def secret_name(cluster: Obj) -> str:
    """The Secret holding the cluster's token: ``authOptions.secretName``, else the cluster's
    name as KubeRay clips it (its last 50 characters)."""
    auth = (cluster.get("spec") or {}).get("authOptions") or {}
    return str(auth.get("secretName") or cluster["metadata"]["name"][-50:])


def auth_secret(cluster: Obj, token: str) -> Obj:
    meta = cluster["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(cluster),
            "namespace": meta["namespace"],
            "labels": {CLUSTER_LABEL: meta["name"]},
            "ownerReferences": [owner(cluster)],
        },
        "type": "Opaque",
        "stringData": {"auth_token": token},
    }


def _ray_ports(cluster: Obj) -> dict[str, int]:
    """The head's Ray container ports by name (unnamed: ``<port>-port``), metrics added."""
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    ports = {
        str(p.get("name") or f"{p['containerPort']}-port"): int(p["containerPort"])
        for p in head.get("ports") or []
    }
    if not ports:
        ports = {"client": 10001, "gcs-server": 6379, "dashboard": DASHBOARD_PORT, "serve": 8000}
    ports.setdefault("metrics", METRICS_PORT)
    return ports


def endpoints(cluster: Obj) -> dict[str, str]:
    """``status.endpoints``: the head Service's ports by name."""
    return {name: str(port) for name, port in sorted(_ray_ports(cluster).items())}


def service_name(cluster: Obj) -> str:
    custom = (cluster["spec"]["headGroupSpec"].get("headService") or {}).get("metadata") or {}
    return str(custom.get("name") or f"{cluster['metadata']['name']}-head-svc")


def _identity(cluster: Obj, node_type: str) -> dict[str, str]:
    name = cluster["metadata"]["name"]
    return {
        CLUSTER_LABEL: name,
        NODE_TYPE_LABEL: node_type,
        "ray.io/identifier": f"{name}-{node_type}"[:63],
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
    }


def head_service(cluster: Obj) -> Obj:
    meta = cluster["metadata"]
    selector = _identity(cluster, "head")
    ports = [
        {"name": n, "port": p, "targetPort": p, "protocol": "TCP", "appProtocol": "tcp"}
        for n, p in sorted(_ray_ports(cluster).items())
    ]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(cluster),
            "namespace": meta["namespace"],
            "labels": dict(selector),
            "ownerReferences": [owner(cluster)],
        },
        "spec": {
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "type": "ClusterIP",
            "selector": selector,
            "ports": ports,
            "publishNotReadyAddresses": True,
            "sessionAffinity": "None",
        },
    }


def _env(cluster: Obj, node_type: str, start: str) -> list[Obj]:
    def field(path: str) -> Obj:
        return {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}

    env: list[Obj] = [
        {"name": "RAY_CLUSTER_NAME", "valueFrom": field(f"metadata.labels['{CLUSTER_LABEL}']")},
        {"name": "RAY_CLOUD_INSTANCE_ID", "valueFrom": field("metadata.name")},
        {"name": "RAY_NODE_TYPE_NAME", "valueFrom": field(f"metadata.labels['{GROUP_LABEL}']")},
        {"name": "KUBERAY_GEN_RAY_START_CMD", "value": start},
        {"name": "RAY_USAGE_STATS_KUBERAY_IN_USE", "value": "1"},
        {
            "name": "RAY_USAGE_STATS_EXTRA_TAGS",
            "value": f"kuberay_version={KUBERAY_VERSION};kuberay_crd=RayCluster",
        },
    ]
    fqdn = f"{service_name(cluster)}.{cluster['metadata']['namespace']}.svc.cluster.local"
    if node_type == "head":
        env += [{"name": "RAY_ADDRESS", "value": "127.0.0.1:6379"}]
    else:
        env += [{"name": "FQ_RAY_IP", "value": fqdn}, {"name": "RAY_IP", "value": fqdn}]
    if token_auth(cluster):
        ref = {"secretKeyRef": {"name": secret_name(cluster), "key": "auth_token"}}
        env += [
            {"name": "RAY_AUTH_MODE", "value": "token"},
            {"name": "RAY_AUTH_TOKEN", "valueFrom": ref},
        ]
    return env


def _start_command(cluster: Obj, node_type: str, params: dict[str, Any]) -> str:
    fqdn = f"{service_name(cluster)}.{cluster['metadata']['namespace']}.svc.cluster.local"
    given = {str(k): str(v) for k, v in (params or {}).items()}
    base = {"block": "true", "dashboard-agent-listen-port": "52365", "metrics-export-port": "8080"}
    if node_type == "head":
        base["dashboard-host"] = "0.0.0.0"  # noqa: S104 - the pod's flag, nothing binds here
    else:
        base["address"] = f"{fqdn}:6379"
    merged = {**base, **given}
    flags = "".join(
        f" --{k} " if v == "true" and k == "block" else f" --{k}={v} "
        for k, v in sorted(merged.items())
    )
    return ("ray start --head " if node_type == "head" else "ray start ") + flags.strip()


def pod(
    cluster: Obj,
    group: Obj,
    node_type: str,
    name: str,
    extra_labels: dict[str, str],
) -> Obj:
    """A head (``node_type`` ``head``) or worker pod of ``group`` named ``name``."""
    template = copy.deepcopy(group["template"])
    spec = template.get("spec") or {}
    group_name = HEAD_GROUP if node_type == "head" else str(group["groupName"])
    own = dict((template.get("metadata") or {}).get("labels") or {})
    labels = {"ray.io/is-ray-node": "yes", **_identity(cluster, node_type), GROUP_LABEL: group_name}
    labels.update({k: v for k, v in own.items() if k not in _RESERVED})
    labels.update(extra_labels)
    ray = spec["containers"][0]
    ports = ray.setdefault("ports", [])
    if not any(p.get("name") == "metrics" for p in ports):
        ports.append({"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"})
    for p in ports:
        p.setdefault("protocol", "TCP")
    start = _start_command(cluster, node_type, group.get("rayStartParams") or {})
    ray["command"] = ["/bin/bash", "-c", "--"]
    ray["args"] = [f"ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {start}"]
    ray["env"] = [*(ray.get("env") or []), *_env(cluster, node_type, start)]
    shm = {"name": "shared-mem", "mountPath": "/dev/shm"}  # noqa: S108 - in the pod
    ray.setdefault("volumeMounts", []).append(shm)
    spec.setdefault("volumes", []).append({"name": "shared-mem", "emptyDir": {"medium": "Memory"}})
    meta = cluster["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": name[:-5],
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
            "ownerReferences": [owner(cluster)],
        },
        "spec": spec,
    }


def head_pod_name(cluster: Obj, seed: str) -> str:
    return f"{cluster['metadata']['name'][:50]}-head-{suffix(seed)}"


def worker_pod_name(cluster: Obj, group: Obj, seed: str) -> str:
    prefix = f"{cluster['metadata']['name']}-{group['groupName']}"[:50]
    return f"{prefix}-worker-{suffix(seed)}"
