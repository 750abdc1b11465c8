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

import os
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from tpu_trainer.infra.files import atomic_write
from tpu_trainer.simcloud.certs import ServerCerts, Subject, server_certs

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


def is_registry(host: str) -> bool:
    return host == "gcr.io" or host.endswith(".gcr.io") or host.endswith("-docker.pkg.dev")


def is_google(host: str) -> bool:
    return any(host == s or host.endswith("." + s) for s in GOOGLE_SUFFIXES)


EgressPki = ServerCerts
"""The rehearsal's CA and the registry hosts' certificate, as files."""


def egress_pki(folder: Path) -> EgressPki:
    """The certificates in ``folder``, made once (under a lock) when missing."""
    subject = Subject(
        ca="rehearsal egress CA",
        server=REGISTRY_HOSTS[0],
        names=[x509.DNSName(h) for h in REGISTRY_HOSTS],
    )
    return server_certs(folder, "registry", subject)


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
