"""The simulated cluster's certificates: a CA made for one rehearsal, and the API server's
certificate it signed for 127.0.0.1 (where the Kubernetes API emulator listens).

As on GKE, the CA is what the cluster publishes (``masterAuth.clusterCaCertificate``, base64 of
the PEM) and what ``gcloud container clusters get-credentials`` writes into the kubeconfig as
``certificate-authority-data``; kubectl then checks the server's certificate against it. The
files live in the rehearsal folder (``kube/pki``), made on first use and kept
(``simcloud/certs.py``).
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from cryptography import x509

from tpu_trainer.simcloud.certs import ServerCerts, Subject, server_certs

LOOPBACK = "127.0.0.1"
ServerPki = ServerCerts
"""One cluster's CA and its API server's certificate and key, as files."""


def server_pki(folder: Path, cluster: str) -> ServerPki:
    """The cluster's certificates in ``folder``, made (once) if they are not there."""
    subject = Subject(
        ca=f"{cluster} cluster CA",
        server="kube-apiserver",
        names=[x509.IPAddress(ipaddress.ip_address(LOOPBACK))],
    )
    return server_certs(folder, "apiserver", subject)
