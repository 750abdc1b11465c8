"""A kubeconfig for tests of the Kubernetes API emulator alone.

A rehearsal's kubeconfig is not written here: ``gcloud container clusters get-credentials``
writes it, from the emulated GKE cluster's ``endpoint`` and CA, with the ``exec`` user that
runs ``gke-gcloud-auth-plugin`` (``simcloud.rehearsal``). The tests that start a server without
the Google emulator point kubectl at it with this one: the server's URL, its CA when it serves
HTTPS, and a user with the bearer token it checks.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from tpu_trainer.infra.files import atomic_write
from tpu_trainer.simcloud.gcloud_env import TOKEN


def context_name(project: str, location: str, cluster: str) -> str:
    """``gke_<project>_<location>_<cluster>``, the context name get-credentials writes."""
    return f"gke_{project}_{location}_{cluster}"


def kubeconfig(
    base_url: str,
    context: str,
    namespace: str = "default",
    *,
    ca_data: str | None = None,
    token: str = TOKEN,
) -> dict[str, object]:
    cluster: dict[str, str] = {"server": base_url}
    if ca_data is not None:
        cluster["certificate-authority-data"] = ca_data
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": namespace},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: Path,
    base_url: str,
    context: str,
    namespace: str = "default",
    *,
    ca_data: str | None = None,
    token: str = TOKEN,
) -> Path:
    """Write the kubeconfig (mode 0600, like kubectl's own) and return its path."""
    config = kubeconfig(base_url, context, namespace, ca_data=ca_data, token=token)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, yaml.safe_dump(config, sort_keys=False), mode=0o600, sync=False)
    return path
