"""A kubeconfig that points kubectl at the emulated API server.

Its user is a static bearer token, not the ``exec`` user ``gcloud container clusters
get-credentials`` writes (``gke-gcloud-auth-plugin``): over plain HTTP kubectl sends no
credentials at all, so it would never run the plugin; and the plugin asks gcloud for its
token, about a second of gcloud per kubectl call, some thirty per GKE rehearsal. The server
checks none. A rehearsal writes it at ``kube/config`` in its folder each time a process starts
the server (``simcloud.rehearsal.kube_env``): the port is new each time.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tpu_trainer.infra.files import atomic_write

TOKEN = "simulated-cluster-token"  # noqa: S105 - not a secret: the emulator checks none
"""The static bearer token the kubeconfig's user sends (the emulator checks none)."""


def context_name(project: str, location: str, cluster: str) -> str:
    """``gke_<project>_<location>_<cluster>``, the context name get-credentials writes."""
    return f"gke_{project}_{location}_{cluster}"


def kubeconfig(base_url: str, context: str, namespace: str = "default") -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": base_url}}],
        "users": [{"name": context, "user": {"token": TOKEN}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: Path, base_url: str, context: str, namespace: str = "default") -> Path:
    """Write the kubeconfig (mode 0600, like kubectl's own) and return its path."""
    text = yaml.safe_dump(kubeconfig(base_url, context, namespace), sort_keys=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, text, mode=0o600, sync=False)
    return path
