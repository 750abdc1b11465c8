"""An emulated Kubernetes API server on 127.0.0.1 that the real ``kubectl`` works against.

``start(state_path)`` serves the cluster in the rehearsal's state file from daemon threads of
this process and returns its base URL. Given the cluster's certificates (``pki``) it serves
HTTPS with them, as GKE's control plane does, and given a ``token`` it answers only requests
that carry it (``Authorization: Bearer``; else 401 Unauthorized). A rehearsal's kubeconfig is
written by ``gcloud container clusters get-credentials`` (``simcloud.rehearsal``); tests of the
server alone write one with ``kubeconfig.write_kubeconfig``. The server stops by itself after
``idle_seconds`` without a request (a log being followed or a port being forwarded counts as activity), or with
``stop()``. ``pods/<pod>/portforward`` is upgraded to a streaming
connection (``tunnel``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.fakecloud.crd import validate
from tpu_trainer.simcloud.kube import discovery, pod_ports, tunnel
from tpu_trainer.simcloud.kube.api import Answer, KubeApi, parse_target
from tpu_trainer.simcloud.kube.logs import log_lines
from tpu_trainer.simcloud.kube.openapi import openapi_v3
from tpu_trainer.simcloud.kube.pki import ServerPki
from tpu_trainer.simcloud.kube.resources import registry
from tpu_trainer.simcloud.kube.status import KubeError, path_not_found, unauthorized
from tpu_trainer.simcloud.kube.watch import watch_events
from tpu_trainer.simcloud.server import serve_on_loopback

Obj = dict[str, Any]


def _warning_header(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'


@dataclass
class KubeServer:
    """The server over one state file; ``requests`` counts what it answered (method, path, code)."""

    state_path: Path
    idle_seconds: float = 900.0
    pki: ServerPki | None = None
    """HTTPS with these certificates (None: plain HTTP)."""
    token: str | None = None
    """The bearer token every request must carry (None: none is asked for)."""
    requests: list[tuple[str, str, int]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _last: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopping: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> str:
        """Serve from daemon threads; returns the base URL (``https://127.0.0.1:<port>``, or
        ``http://`` without certificates)."""
        threading.Thread(target=_warm, daemon=True).start()  # not in kubectl's first request
        tls = self.pki.server_context() if self.pki is not None else None
        self._server = serve_on_loopback(self._answer, protocol_version="HTTP/1.1", tls=tls)
        threading.Thread(target=self._stop_when_idle, daemon=True).start()
        return self.base_url

    @property
    def endpoint(self) -> str:
        """``127.0.0.1:<port>``: where it listens (GKE's cluster ``endpoint``)."""
        if self._server is None:
            raise RuntimeError("the Kubernetes API emulator is not started")
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    @property
    def base_url(self) -> str:
        return f"{'https' if self.pki is not None else 'http'}://{self.endpoint}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def stop(self) -> None:
        """Stop serving and close the socket (``running`` is False only once it is closed)."""
        with self._stopping:
            server = self._server
            if server is not None:
                server.shutdown()
                server.server_close()
                self._server = None

    def __enter__(self) -> KubeServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------
    def _streaming(self) -> bool:
        """Whether a log or watch stream should go on; a stream being served is activity."""
        self._last = time.monotonic()
        return self.running

    def _stop_when_idle(self) -> None:
        while self._server is not None:
            time.sleep(min(1.0, self.idle_seconds))
            if time.monotonic() - self._last > self.idle_seconds:
                self.stop()

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        self._last = time.monotonic()
        if self.token is not None and h.headers.get("Authorization") != f"Bearer {self.token}":
            length = int(h.headers.get("Content-Length") or 0)
            h.rfile.read(length)
            self._send(h, Answer(401, unauthorized().body()))
            return
        url = urlsplit(h.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in h.headers.items()}
        parts = [p for p in url.path.split("/") if p]
        try:
            if _is_portforward(parts):
                backend = pod_ports.backend(self.state_path, parts[3], parts[5])
                transport = tunnel.upgrade(h)
                with self._lock:
                    self.requests.append((h.command, h.path, 101))
                tunnel.serve(h, transport, backend, self._streaming)
                return
            if _is_log(parts) and h.command == "GET":
                lines = log_lines(self.state_path, parts[3], parts[5], query, self._streaming)
                self._stream(h, lines, "text/plain")
                return
            if query.get("watch") in ("true", "1") and h.command == "GET":
                target = parse_target(parts[1:]) if parts[:1] in (["api"], ["apis"]) else None
                if target is not None and not target.name:
                    as_table = "as=Table" in headers.get("accept", "")
                    events = watch_events(self.state_path, target, query, as_table, self._streaming)
                    self._stream(h, events, "application/json")
                    return
            answer = self._dispatch(h.command, parts, query, raw, headers)
        except KubeError as e:
            answer = Answer(e.code, e.body())
        self._send(h, answer)

    def _dispatch(
        self,
        verb: str,
        parts: list[str],
        query: dict[str, str],
        raw: bytes,
        headers: dict[str, str],
    ) -> Answer:
        if verb == "GET":
            fixed = self._fixed(parts)
            if fixed is not None:
                return Answer(200, fixed)
        if parts and parts[0] in ("api", "apis"):
            target = parse_target(parts[1:])
            if target is not None:
                return KubeApi(self.state_path).handle(verb, target, query, raw, headers)
        raise path_not_found()

    def _fixed(self, parts: list[str]) -> Obj | None:
        """Discovery and OpenAPI documents (None: not one of them)."""
        path = "/".join(parts)
        if path == "version":
            return discovery.VERSION
        if path == "api":
            return discovery.api_versions(self.endpoint)
        if path == "apis":
            return discovery.group_list()
        if parts[:1] == ["openapi"] and len(parts) >= 2 and parts[1] == "v3":
            return openapi_v3(parts[2:])
        if path == "api/v1":
            return discovery.resource_list("", "v1")
        if len(parts) == 2 and parts[0] == "apis":
            return discovery.group(parts[1])
        if len(parts) == 3 and parts[0] == "apis":
            return discovery.resource_list(parts[1], parts[2])
        return None

    def _send(self, h: BaseHTTPRequestHandler, answer: Answer) -> None:
        with self._lock:
            self.requests.append((h.command, h.path, answer.code))
        if answer.lost:  # made, but the client never hears so: the connection just ends
            h.close_connection = True
            return
        data = json.dumps(answer.body).encode()
        h.send_response(answer.code)
        h.send_header("Content-Type", "application/json")
        h.send_header("Cache-Control", "no-cache, private")
        for text in answer.warnings:
            h.send_header("Warning", _warning_header(text))
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _stream(self, h: BaseHTTPRequestHandler, lines: Iterator[str], content_type: str) -> None:
        with self._lock:
            self.requests.append((h.command, h.path, 200))
        h.send_response(200)
        h.send_header("Content-Type", content_type)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        try:
            for line in lines:
                self._last = time.monotonic()
                data = (line.rstrip("\n") + "\n").encode()
                h.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True


def _pod_subresource(parts: list[str], name: str) -> bool:
    return (
        len(parts) == 7
        and parts[:3] == ["api", "v1", "namespaces"]
        and parts[4] == "pods"
        and parts[6] == name
    )


def _warm() -> None:
    """Read the CRD files and make the JobSet's validators now, beside whatever the process
    does next: seconds of CPU a first request would otherwise wait for (the JobSet's CRD alone
    is 800 kB of YAML, parsed again for admission)."""
    try:
        for resource in registry():
            if resource.group == "jobset.x-k8s.io":
                body = {"apiVersion": resource.api_version, "kind": resource.kind, "metadata": {}}
                for strict in (False, True):
                    validate(body, strict=strict)
    except (TpuTrainerError, OSError):  # the request that needs them says what is wrong
        return


def _is_log(parts: list[str]) -> bool:
    return _pod_subresource(parts, "log")


def _is_portforward(parts: list[str]) -> bool:
    return _pod_subresource(parts, "portforward")


def start(
    state_path: Path,
    *,
    idle_seconds: float = 900.0,
    pki: ServerPki | None = None,
    token: str | None = None,
) -> KubeServer:
    """Serve the cluster in ``state_path`` until ``idle_seconds`` pass without a request (with
    ``pki``: HTTPS; with ``token``: only requests bearing it); returns the running server."""
    server = KubeServer(Path(state_path), idle_seconds, pki, token)
    server.start()
    return server
