"""The simulated cluster's certificates: a CA made for one rehearsal, and the API server's
certificate it signed for 127.0.0.1 (where the Kubernetes API emulator listens).

As on GKE, the CA is what the cluster publishes (``masterAuth.clusterCaCertificate``, base64 of
the PEM) and what ``gcloud container clusters get-credentials`` writes into the kubeconfig as
``certificate-authority-data``; kubectl then checks the server's certificate against it. The
files live in the rehearsal folder (``kube/pki``), made on first use and kept, so every process
of one rehearsal serves the same certificate. Keys are ECDSA P-256 (a millisecond to make).
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tpu_trainer.infra.files import atomic_write, file_lock

LOOPBACK = "127.0.0.1"
_VALID = datetime.timedelta(days=365)
_SKEW = datetime.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class ServerPki:
    """One cluster's CA and its API server's certificate and key, as files."""

    folder: Path

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def cert_file(self) -> Path:
        return self.folder / "apiserver.crt"

    @property
    def key_file(self) -> Path:
        return self.folder / "apiserver.key"

    @property
    def ca_data(self) -> str:
        """The CA as GKE publishes it: base64 of its PEM."""
        return base64.b64encode(self.ca_file.read_bytes()).decode()

    def server_context(self) -> ssl.SSLContext:
        """TLS for the API server's side (HTTP/1.1 only, as kubectl falls back to it)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificates(cluster: str) -> tuple[bytes, bytes, bytes]:
    """(CA PEM, server certificate PEM, server key PEM), the server's for 127.0.0.1."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(f"{cluster} cluster CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    server = (
        x509.CertificateBuilder()
        .subject_name(_name("kube-apiserver"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + _VALID)
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ca.public_bytes(pem), server.public_bytes(pem), _key_pem(key)


def server_pki(folder: Path, cluster: str) -> ServerPki:
    """The certificates in ``folder``, made (once, under a lock) if they are not there."""
    pki = ServerPki(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / ".lock"):
        if not (pki.ca_file.exists() and pki.cert_file.exists() and pki.key_file.exists()):
            ca, cert, key = _certificates(cluster)
            atomic_write(pki.key_file, key, mode=0o600, sync=False)
            atomic_write(pki.cert_file, cert, sync=False)
            atomic_write(pki.ca_file, ca, sync=False)
    return pki
