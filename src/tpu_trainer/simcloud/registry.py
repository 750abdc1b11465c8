"""The container registry's side of what xpk asks before a submit: the Docker Registry HTTP API
v2 as Container Registry (``gcr.io``) and Artifact Registry (``*-docker.pkg.dev``) answer it.

xpk runs ``gcloud container images describe IMAGE`` for an image in either; gcloud pings
``/v2/`` (a ``Bearer`` challenge naming the token endpoint), exchanges the account's access
token for a registry token at ``/v2/token`` (Basic auth: user ``_token`` as gcloud sends it, or
``oauth2accesstoken`` as docker's credential helper does, and the access token) and reads
the manifest of the tag. Every image exists (one schema 2 manifest: a config and a layer), but
those the scenario lists in ``behaviours.missing_images``: their manifest is the registry's 404
``MANIFEST_UNKNOWN``, and xpk stops with its "Failed to validate your docker image". Reached
through the rehearsal's egress proxy (``egress.py``); nothing is pulled, so no blob is served.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import ssl
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tpu_trainer.fakecloud.state import read_state

MANIFEST_V2 = "application/vnd.docker.distribution.manifest.v2+json"
_MANIFEST = re.compile(r"^/v2/(?P<repo>.+)/manifests/(?P<ref>[^/]+)$")
_TOKEN_PREFIX = "simulated-registry-token-"  # noqa: S105 (accepted by this emulation only)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def manifest(repository: str) -> bytes:
    """The image's manifest, the same bytes (so the same digest) every time."""
    seed = repository.encode()
    body = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_V2,
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 1469,
            "digest": _digest(b"config:" + seed),
        },
        "layers": [
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": 29124657,
                "digest": _digest(b"layer:" + seed),
            }
        ],
    }
    return json.dumps(body, indent=3).encode()


def _errors(code: str, message: str) -> bytes:
    return json.dumps({"errors": [{"code": code, "message": message}]}).encode()


def _missing(state_path: Path) -> set[str]:
    behaviours = read_state(state_path).get("behaviours") or {}
    return {str(image) for image in behaviours.get("missing_images") or ()}


def registry_server(state_path: Path) -> Any:
    """What the egress proxy calls with each TLS connection to a registry host."""

    def serve(conn: ssl.SSLSocket, host: str) -> None:
        _Handler(conn, (host, 443), _Context(state_path, host))  # type: ignore[arg-type]

    return serve


class _Context:
    def __init__(self, state_path: Path, host: str) -> None:
        self.state_path = state_path
        self.host = host


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 120
    server: Any  # the _Context the connection came in on

    def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 (quiet)
        return

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _send(self, code: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(code)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _answer(self, *, head: bool) -> None:
        ctx: _Context = self.server
        url = urlsplit(self.path)
        auth = self.headers.get("Authorization", "")
        challenge = {
            "WWW-Authenticate": f'Bearer realm="https://{ctx.host}/v2/token",service="{ctx.host}"',
            "Content-Type": "application/json",
        }
        if url.path == "/v2/token":
            self._token(url.query, auth, head)
            return
        if not auth.startswith("Bearer " + _TOKEN_PREFIX):
            unauthorized = _errors("UNAUTHORIZED", "Unauthorized access.")
            self._send(401, unauthorized, challenge, head)
            return
        found = _MANIFEST.match(url.path)
        if url.path == "/v2/" or found is None:
            self._send(200 if url.path == "/v2/" else 404, b"{}", {}, head)
            return
        repo, ref = found.group("repo"), found.group("ref")
        image = f"{ctx.host}/{repo}"
        if image in _missing(ctx.state_path) or f"{image}:{ref}" in _missing(ctx.state_path):
            text = f'Failed to fetch "{ref}" from request "{url.path}".'
            self._send(
                404, _errors("MANIFEST_UNKNOWN", text), {"Content-Type": "application/json"}, head
            )
            return
        data = manifest(repo)
        headers = {"Content-Type": MANIFEST_V2, "Docker-Content-Digest": _digest(data)}
        self._send(200, data, headers, head)

    def _token(self, query: str, auth: str, head: bool) -> None:
        """A registry token for the account's access token (Basic ``_token:TOKEN``)."""
        user, secret = "", ""
        if auth.startswith("Basic "):
            user, _, secret = base64.b64decode(auth[6:]).decode(errors="replace").partition(":")
        if user not in ("_token", "oauth2accesstoken") or not secret:
            self._send(401, _errors("UNAUTHORIZED", "Not authorized."), {}, head)
            return
        scope = (parse_qs(query).get("scope") or [""])[0]
        token = _TOKEN_PREFIX + hashlib.sha256(scope.encode()).hexdigest()[:24]
        body = json.dumps({"expires_in": 43200, "token": token, "access_token": token}).encode()
        self._send(200, body, {"Content-Type": "application/json"}, head)
