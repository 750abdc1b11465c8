"""Certificates a rehearsal makes for the HTTPS servers it runs on this machine: a CA of its
own and one server certificate that CA signed, kept as files in a folder of the rehearsal.

The Kubernetes API emulator (``kube/pki.py``: the cluster's CA, as GKE publishes it, and the
API server's certificate for 127.0.0.1) and the egress proxy's registry hosts (``egress.py``)
each have a folder. Files are made on first use, under a lock, and kept, so every process of
one rehearsal serves the same certificate. Keys are ECDSA P-256 (a millisecond to make); the
certificates carry the key identifiers a strict verifier (Python 3.13's default) asks for.
"""

from __future__ import annotations

import base64
import datetime
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tpu_trainer.infra.files import atomic_write, file_lock

_VALID = datetime.timedelta(days=365)
_SKEW = datetime.timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class ServerCerts:
    """A CA and the certificate and key of the server it signed, as files in ``folder``
    (``ca.crt``, ``<server>.crt``, ``<server>.key``)."""

    folder: Path
    server: str

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def cert_file(self) -> Path:
        return self.folder / f"{self.server}.crt"

    @property
    def key_file(self) -> Path:
        return self.folder / f"{self.server}.key"

    @property
    def ca_data(self) -> str:
        """The CA as GKE publishes a cluster's: base64 of its PEM."""
        return base64.b64encode(self.ca_file.read_bytes()).decode()

    def server_context(self) -> ssl.SSLContext:
        """TLS for the server's side (HTTP/1.1 only: clients fall back to it)."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


@dataclass(frozen=True, slots=True)
class Subject:
    """What the certificates say: the CA's common name, the server's, and the server's names
    (``x509.DNSName``/``x509.IPAddress``) a client checks."""

    ca: str
    server: str
    names: Sequence[x509.GeneralName]


def server_certs(folder: Path, server: str, subject: Subject) -> ServerCerts:
    """The certificates in ``folder``, made (once, under a lock) if they are not there."""
    certs = ServerCerts(folder, server)
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / ".lock"):
        if not all(p.exists() for p in (certs.ca_file, certs.cert_file, certs.key_file)):
            ca, cert, key = _certificates(subject)
            atomic_write(certs.key_file, key.decode(), mode=0o600, sync=False)
            atomic_write(certs.cert_file, cert.decode(), sync=False)
            atomic_write(certs.ca_file, ca.decode(), sync=False)
    return certs


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificates(subject: Subject) -> tuple[bytes, bytes, bytes]:
    """(CA PEM, server certificate PEM, server key PEM)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = _name(subject.ca)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(subject.server))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _SKEW)
        .not_valid_after(now + _VALID)
        .add_extension(x509.SubjectAlternativeName(list(subject.names)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ca.public_bytes(pem), cert.public_bytes(pem), key_pem
