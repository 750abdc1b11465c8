"""What plays a pod's port for ``kubectl port-forward``: a listener on 127.0.0.1.

Nothing runs inside the emulated pods, so a port that answers is one a test or a rehearsal
serves on this machine: named with :func:`serve_port` (``state["kube_api"]["ports"]``,
``"<namespace>/<pod>/<port>"`` → the local port), or, for a Ray head pod's dashboard port,
the local Ray dashboard the KubeRay controller's settings name
(:func:`raycluster.dashboard_port_of`). Any other port refuses, with the kubelet's words.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from tpu_trainer.fakecloud.state import State, read_state, transaction
from tpu_trainer.simcloud.kube import raycluster, store
from tpu_trainer.simcloud.kube.portforward import Backend, refused
from tpu_trainer.simcloud.kube.resources import CORE
from tpu_trainer.simcloud.kube.status import KubeError

PODS = next(r for r in CORE if r.plural == "pods")


def serve_port(state_path: Path, namespace: str, pod: str, port: int, local_port: int) -> None:
    """Let the local listener on 127.0.0.1:``local_port`` play ``pod``'s ``port``."""
    with transaction(state_path) as state:
        ports = store.section(state).setdefault("ports", {})
        ports[f"{namespace}/{pod}/{port}"] = local_port


def sandbox_id(pod: dict[str, object]) -> str:
    """The pod's sandbox id (what the kubelet names in its port-forward errors)."""
    meta = pod.get("metadata")
    uid = str(meta.get("uid", "")) if isinstance(meta, dict) else ""
    return hashlib.sha256(uid.encode()).hexdigest()


def _local_port(state: State, namespace: str, pod: dict[str, object], port: int) -> int | None:
    meta = pod.get("metadata")
    name = str(meta.get("name", "")) if isinstance(meta, dict) else ""
    named = store.section(state).get("ports", {}).get(f"{namespace}/{name}/{port}")
    if named is not None:
        return int(named)
    return raycluster.dashboard_port_of(state, pod, port)


def backend(state_path: Path, namespace: str, pod_name: str) -> Backend:
    """The pod's ports as :mod:`portforward` reaches them. Raises the API server's NotFound
    for a pod that does not exist (before anything is upgraded)."""
    store.get(read_state(state_path), PODS, namespace, pod_name)

    def find(port: int) -> int | str:
        state = read_state(state_path)
        try:
            pod = store.get(state, PODS, namespace, pod_name)
        except KubeError:
            return refused(port, "")
        local = _local_port(state, namespace, pod, port)
        return local if local is not None else refused(port, sandbox_id(pod))

    return find
