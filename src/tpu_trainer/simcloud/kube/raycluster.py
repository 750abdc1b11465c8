"""KubeRay v1.7's RayCluster controller, run by the emulated API server before it answers each
request (as a controller would have caught up by then).

For each RayCluster it makes what ``raycluster_objects`` describes (the token Secret, the
head Service, the head pod and ``replicas`` × ``numOfHosts`` worker pods per group, clamped
to ``minReplicas``/``maxReplicas``), places pods on the cluster's nodes (``scheduler``), and
writes the status KubeRay writes (``raycluster_status``) when it changed.

Nothing runs in the pods. A placed pod is Running and ready; the head, when the settings say
its image never comes (:func:`configure_ray` ``head_ready=False``), waits in
``ImagePullBackOff``. The head's dashboard port is played by a local Ray dashboard when the
settings name its port (``dashboard_port``); the Secret's token is the settings' ``token``
(the one that dashboard checks), else a random one as KubeRay makes.
"""

from __future__ import annotations

import base64
import copy
import secrets
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.state import State, transaction
from tpu_trainer.simcloud.kube import events, store
from tpu_trainer.simcloud.kube import raycluster_objects as objs
from tpu_trainer.simcloud.kube.nodes import nodes
from tpu_trainer.simcloud.kube.pod_status import bound_status, unschedulable_status
from tpu_trainer.simcloud.kube.raycluster_failed import delete_ended_workers, replaced
from tpu_trainer.simcloud.kube.raycluster_status import desired_workers, status_of
from tpu_trainer.simcloud.kube.resources import CORE, Resource, find
from tpu_trainer.simcloud.kube.scheduler import place
from tpu_trainer.simcloud.kube.status import KubeError

Obj = dict[str, Any]
SETTINGS = "ray"
_PODS = next(r for r in CORE if r.plural == "pods")
_SERVICES = next(r for r in CORE if r.plural == "services")


def rayclusters() -> Resource:
    found = find("ray.io", "v1", "rayclusters")
    if found is None:  # pragma: no cover - the KubeRay CRD ships with the package
        raise LookupError("the KubeRay RayCluster CRD is not vendored")
    return found


def _secrets() -> Resource:
    return next(r for r in CORE if r.plural == "secrets")


def configure_ray(
    path: Path,
    *,
    dashboard_port: int | None = None,
    token: str | None = None,
    head_ready: bool = True,
    replace_ended_workers: bool = False,
) -> None:
    """How the cluster's Ray heads behave: the local port their dashboard is served on, the
    token the operator's Secret holds (the one that dashboard checks), whether they get ready;
    and whether the operator deletes and makes again a worker pod that ended (``Failed``), as
    KubeRay does (``raycluster_failed``), or leaves it for a reader to see until the cluster
    is deleted (the default)."""
    with transaction(Path(path)) as state:
        store.section(state)[SETTINGS] = {
            "dashboard_port": dashboard_port,
            "token": token,
            "head_ready": head_ready,
            "replace_ended_workers": replace_ended_workers,
        }


def settings(state: State) -> Obj:
    return {"dashboard_port": None, "token": None, "head_ready": True,
            "replace_ended_workers": False,
            **(store.section(state).get(SETTINGS) or {})}  # fmt: skip


def dashboard_port_of(state: State, pod: Obj, port: int) -> int | None:
    """The local port that plays ``port`` of ``pod`` when it is a Ray head's dashboard port."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(objs.NODE_TYPE_LABEL) != "head" or not labels.get(objs.CLUSTER_LABEL):
        return None
    ray = ((pod.get("spec") or {}).get("containers") or [{}])[0]
    named = [
        int(p["containerPort"]) for p in ray.get("ports") or [] if p.get("name") == "dashboard"
    ]
    if port != (named[0] if named else objs.DASHBOARD_PORT):
        return None
    local = settings(state)["dashboard_port"]
    return int(local) if local is not None else None


# ---- reconcile -----------------------------------------------------------------------------
def reconcile(state: State) -> None:
    """Bring every RayCluster's objects and status up to date (cheap when there is none)."""
    resource = rayclusters()
    for cluster in store.kept_objects(state, resource):
        _reconcile(state, resource, copy.deepcopy(cluster))


def _ensure(state: State, resource: Resource, obj: Obj) -> bool:
    """Create ``obj`` unless it exists; whether it was created."""
    meta = obj["metadata"]
    try:
        store.stored(state, resource, meta["namespace"], meta["name"])
    except KubeError:
        store.create(state, resource, meta["namespace"], obj)
        return True
    return False


def _reconcile(state: State, resource: Resource, cluster: Obj) -> None:
    ns = cluster["metadata"]["namespace"]
    if objs.token_auth(cluster) and not (cluster["spec"].get("authOptions") or {}).get(
        "secretName"
    ):
        token = settings(state)["token"] or base64.b64encode(secrets.token_bytes(32)).decode()
        secret = objs.auth_secret(cluster, str(token))
        secret["data"] = {"auth_token": base64.b64encode(str(token).encode()).decode()}
        del secret["stringData"]  # what the API server keeps of stringData
        _ensure(state, _secrets(), secret)
    service = objs.head_service(cluster)
    if _ensure(state, _SERVICES, service):
        where = f"{ns}/{service['metadata']['name']}"
        events.record(state, cluster, "Normal", "CreatedService", f"Created service {where}",
                      "raycluster-controller")  # fmt: skip
    pods = _owned_pods(state, cluster)
    if settings(state)["replace_ended_workers"] and delete_ended_workers(state, cluster, pods):
        _write_status(state, resource, cluster, _owned_pods(state, cluster))
        return  # KubeRay requeues: the new pods come on the next reconcile
    for new in _missing_pods(state, cluster, pods):
        made = store.create(state, _PODS, ns, new)
        node_type = (
            "head" if made["metadata"]["labels"][objs.NODE_TYPE_LABEL] == "head" else "worker"
        )
        events.record(
            state, cluster, "Normal", f"Created{node_type.title()}Pod",
            f"Created {node_type} Pod {ns}/{made['metadata']['name']}", "raycluster-controller",
        )  # fmt: skip
    _schedule(state, cluster)
    _write_status(state, resource, cluster, _owned_pods(state, cluster))


def _owned_pods(state: State, cluster: Obj) -> list[Obj]:
    uid = cluster["metadata"].get("uid")
    return [
        p
        for p in store.kept_objects(state, _PODS)
        if any(ref.get("uid") == uid for ref in p["metadata"].get("ownerReferences") or ())
    ]


def _missing_pods(state: State, cluster: Obj, pods: list[Obj]) -> list[Obj]:
    uid = str(cluster["metadata"].get("uid"))
    spec = cluster["spec"]
    out: list[Obj] = []
    if not any(p["metadata"]["labels"].get(objs.NODE_TYPE_LABEL) == "head" for p in pods):
        name = objs.head_pod_name(cluster, f"{uid}/head/{len(pods)}")
        out.append(objs.pod(cluster, spec["headGroupSpec"], "head", name, {}))
    for group in spec.get("workerGroupSpecs") or []:
        have = [
            p for p in pods if p["metadata"]["labels"].get(objs.GROUP_LABEL) == group["groupName"]
        ]
        hosts = int(group.get("numOfHosts", 1))
        replicas = (desired_workers(group) - len(have)) // hosts
        first = len(have) // hosts
        group_name = str(group["groupName"])
        again = replaced(state, cluster, group_name)
        for r in range(first, first + max(replicas, 0)):
            seed = f"{uid}/{group_name}/{r}" + (f"/{again}" if again else "")
            replica = f"{group_name}-{objs.suffix(seed)}"
            for h in range(hosts):
                labels = {"ray.io/worker-group-replica-index": str(r)}
                if hosts > 1:
                    labels["ray.io/worker-group-replica-name"] = replica
                    labels["ray.io/replica-host-index"] = str(h)
                name = objs.worker_pod_name(cluster, group, f"{replica}/{h}")
                out.append(objs.pod(cluster, group, "worker", name, labels))
    return out


def _schedule(state: State, cluster: Obj) -> None:
    """Place the cluster's pods not on a node yet; say why for those no node takes."""
    head_ready = bool(settings(state)["head_ready"])
    created = store.now(state)
    for pod in _owned_pods(state, cluster):
        if pod["spec"].get("nodeName"):
            continue
        all_pods = store.kept_objects(state, _PODS)
        node, why = place(pod, nodes(state, created), all_pods)
        new = copy.deepcopy(pod)
        if node:
            new["spec"]["nodeName"] = node
            head = pod["metadata"]["labels"].get(objs.NODE_TYPE_LABEL) == "head"
            ready = head_ready or not head
            new["status"] = bound_status(new, created, ready=ready, seed=len(all_pods))
        else:
            said = ((pod.get("status") or {}).get("conditions") or [{}])[0].get("message")
            if said == why:
                continue  # the scheduler says nothing new
            new["status"] = unschedulable_status(why, created)
            events.record(state, pod, "Warning", "FailedScheduling", why, "default-scheduler")
        if new != pod:
            meta = pod["metadata"]
            store.replace(state, _PODS, meta["namespace"], meta["name"], new)


def _write_status(state: State, resource: Resource, cluster: Obj, pods: list[Obj]) -> None:
    """Write the status KubeRay would, when it changed (``lastUpdateTime`` moves only then)."""
    old = cluster.get("status") or {}
    status = status_of(cluster, pods, store.now(state))
    if status == {k: v for k, v in old.items() if k != "lastUpdateTime"}:
        return
    status["lastUpdateTime"] = store.now(state)
    meta = cluster["metadata"]
    new = {**cluster, "status": status}
    store.replace(state, resource, meta["namespace"], meta["name"], new, status=True)
