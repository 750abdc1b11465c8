"""A rehearsal's way out: an HTTPS proxy on 127.0.0.1 that keeps Google's hosts on this machine.

Everything a rehearsal starts gets ``HTTPS_PROXY`` pointing here (``NO_PROXY`` for 127.0.0.1,
where the emulators listen). A ``CONNECT`` to a container registry Google runs (``gcr.io`` and
its regional hosts, Artifact Registry's ``*-docker.pkg.dev``) is answered here, over TLS with a
certificate of the rehearsal's own CA, by the emulated registry (``registry.py``): xpk checks
the workload's image there (``gcloud container images describe``) before it submits. Any other
Google host (``*.googleapis.com``, ``*.google.com``, ``*.gke.goog``, ...) is refused (403), so
a call the simulation does not answer fails here instead of reaching Google; other hosts (a
package index the tool installs xpk from) are tunnelled through unchanged.

The CA and the registry hosts' certificate are made once per rehearsal folder (``egress/``);
gcloud trusts the CA through ``CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE`` and ``REQUESTS_CA_BUNDLE``.
"""

from __future__ import annotations

import datetime
import os
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.infra.files import atomic_write, file_lock

REGISTRY_HOSTS = ("gcr.io", "*.gcr.io", "*.pkg.dev")
"""The hosts the registry emulation answers for (the certificate's names)."""
GOOGLE_SUFFIXES = (
    "googleapis.com",
    "google.com",
    "gcr.io",
    "pkg.dev",
    "gke.goog",
    "googleusercontent.com",
    "google.internal",
)
"""Hosts that are Google's: answered by the simulation or refused, never reached."""
_VALID = datetime.timedelta(days=365)


def is_registry(host: str) -> bool:
    return host == "gcr.io" or host.endswith(".gcr.io") or host.endswith("-docker.pkg.dev")


def is_google(host: str) -> bool:
    return any(host == s or host.endswith("." + s) for s in GOOGLE_SUFFIXES)


@dataclass(frozen=True, slots=True)
class EgressPki:
    """The rehearsal's CA and the registry hosts' certificate, as files in ``folder``."""

    folder: Path

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.crt"

    @property
    def cert_file(self) -> Path:
        return self.folder / "registry.crt"

    @property
    def key_file(self) -> Path:
        return self.folder / "registry.key"

    def server_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert_file, self.key_file)
        context.set_alpn_protocols(["http/1.1"])
        return context


def egress_pki(folder: Path) -> EgressPki:
    """The certificates in ``folder``, made once (under a lock) when missing."""
    pki = EgressPki(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder / ".lock"):
        if not all(p.exists() for p in (pki.ca_file, pki.cert_file, pki.key_file)):
            ca, cert, key = _certificates()
            atomic_write(pki.ca_file, ca.decode(), sync=False)
            atomic_write(pki.cert_file, cert.decode(), sync=False)
            atomic_write(pki.key_file, key.decode(), mode=0o600, sync=False)
    return pki


def _certificates() -> tuple[bytes, bytes, bytes]:
    """(CA PEM, certificate PEM for :data:`REGISTRY_HOSTS`, its key PEM); ECDSA P-256, with
    the key identifiers a strict verifier (Python 3.13's default) asks for."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = name("rehearsal egress CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
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
        .subject_name(name(REGISTRY_HOSTS[0]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + _VALID)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(h) for h in REGISTRY_HOSTS]), critical=False
        )
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


Serve = Callable[[ssl.SSLSocket, str], None]
"""Answers the HTTPS requests of one tunnelled connection to a registry host."""


def _relay(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    pair = {a: b, b: a}
    while True:
        ready, _, _ = select.select(list(pair), [], [], 300)
        if not ready:
            return
        for sock in ready:
            data = sock.recv(65536)
            if not data:
                return
            pair[sock].sendall(data)


@dataclass
class EgressProxy:
    """The proxy: ``start()`` gives its URL (for ``HTTPS_PROXY``)."""

    pki: EgressPki
    serve_registry: Serve
    _server: socketserver.ThreadingTCPServer | None = None

    def start(self) -> str:
        tls = self.pki.server_context()
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy._connect(self.connection, self.rfile, tls)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        return f"http://127.0.0.1:{server.server_address[1]}"

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def _connect(self, conn: socket.socket, rfile: object, tls: ssl.SSLContext) -> None:
        read = rfile.readline  # type: ignore[attr-defined]
        words = read(8192).decode("latin-1").split()
        while read(8192) not in (b"\r\n", b"\n", b""):
            pass  # the request's headers
        if len(words) < 2 or words[0] != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        host, _, port = words[1].rpartition(":")
        if is_registry(host):
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with tls.wrap_socket(conn, server_side=True) as secure:
                self.serve_registry(secure, host)
            return
        if is_google(host):
            conn.sendall(
                b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"
            )  # not simulated: never reached from a rehearsal
            return
        with socket.create_connection((host, int(port or 443)), timeout=30) as upstream:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            _relay(conn, upstream)


def _system_cas(env: Mapping[str, str]) -> Path | None:
    """The CA bundle HTTPS clients trust here (what the environment names, else Python's)."""
    named = [env.get(k, "") for k in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")]
    default = ssl.get_default_verify_paths().cafile or ""
    return next((Path(p) for p in (*named, default) if p and Path(p).is_file()), None)


def egress_env(
    workdir: Path, serve_registry: Serve, env: Mapping[str, str] | None = None
) -> dict[str, str]:
    """Start the proxy for a rehearsal (its certificates under ``workdir/egress``, made once)
    and return what points HTTPS clients at it and makes them trust its CA: gcloud's
    ``core/custom_ca_certs_file`` and ``REQUESTS_CA_BUNDLE`` (which gcloud's HTTP library
    prefers to it) name a bundle of the CAs trusted here and the rehearsal's."""
    pki = egress_pki(workdir / "egress")
    url = EgressProxy(pki, serve_registry).start()
    system = _system_cas(os.environ if env is None else env)
    bundle = pki.folder / "ca-bundle.pem"
    text = (system.read_text(encoding="utf-8") + "\n" if system else "") + pki.ca_file.read_text()
    atomic_write(bundle, text, sync=False)
    local = "127.0.0.1,localhost"
    return {
        "HTTPS_PROXY": url,
        "https_proxy": url,
        "NO_PROXY": local,
        "no_proxy": local,
        "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": str(bundle),
        "REQUESTS_CA_BUNDLE": str(bundle),
    }
