"""``/api/v1/namespaces/<ns>/pods/<pod>/portforward``: the request upgraded to a streaming
connection, in either of the two ways kubectl asks for one.

kubectl 1.32 (its ``PortForwardWebsockets`` gate on, as by default) first asks for a
WebSocket (``GET``, ``Sec-WebSocket-Protocol: SPDY/3.1+portforward.k8s.io``) and tunnels SPDY
through its binary messages; when that upgrade fails it falls back to a plain SPDY/3.1 upgrade
(``POST``, ``Upgrade: SPDY/3.1``, ``X-Stream-Protocol-Version: portforward.k8s.io``; also what
``KUBECTL_PORT_FORWARD_WEBSOCKETS=false`` asks for). Both are served, as a real API server of
that version serves them; the SPDY session is :mod:`portforward`'s either way. The WebSocket
framing is wsproto's.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from io import BufferedIOBase

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.utilities import generate_accept_token

from tpu_trainer.simcloud.kube.portforward import (
    CHUNK,
    PROTOCOL,
    Backend,
    PortForwardSession,
    Transport,
)
from tpu_trainer.simcloud.kube.status import KubeError

TUNNEL_PROTOCOL = f"SPDY/3.1+{PROTOCOL}"
"""The WebSocket subprotocol of SPDY tunnelled through WebSockets (KEP-4006)."""
SPDY_UPGRADE = "SPDY/3.1"


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


class SocketTransport:
    """The upgraded HTTP connection itself (plain SPDY)."""

    def __init__(self, rfile: BufferedIOBase, sock: socket.socket) -> None:
        self._rfile, self._sock = rfile, sock

    def read(self) -> bytes:
        try:
            return bytes(self._rfile.read1(CHUNK))
        except OSError:
            return b""

    def write(self, data: bytes) -> None:
        self._sock.sendall(data)

    def close(self) -> None:
        _shut(self._sock)


class WebSocketTransport:
    """SPDY's bytes carried in WebSocket binary messages (read as one stream of bytes)."""

    def __init__(self, rfile: BufferedIOBase, sock: socket.socket) -> None:
        self._rfile, self._sock = rfile, sock
        self._ws = Connection(ConnectionType.SERVER)
        self._lock = threading.Lock()
        self._ended = False

    def _send(self, event: CloseConnection | BytesMessage | object) -> None:
        with self._lock:
            if self._ws.state is not ConnectionState.OPEN and not isinstance(
                event, CloseConnection
            ):
                raise ConnectionResetError("the WebSocket is closed")
            self._sock.sendall(self._ws.send(event))  # type: ignore[arg-type]

    def read(self) -> bytes:
        while not self._ended:
            try:
                raw = bytes(self._rfile.read1(CHUNK))
            except OSError:
                raw = b""
            self._ws.receive_data(raw or None)
            self._ended = not raw
            out = bytearray()
            for event in self._ws.events():
                if isinstance(event, BytesMessage):
                    out += event.data
                elif isinstance(event, Ping):
                    self._send(event.response())
                elif isinstance(event, CloseConnection | TextMessage):
                    self._ended = True
                    if isinstance(event, CloseConnection) and (
                        self._ws.state is ConnectionState.REMOTE_CLOSING
                    ):
                        self._send(event.response())
            if out:
                return bytes(out)
        return b""

    def write(self, data: bytes) -> None:
        self._send(BytesMessage(data=data))

    def close(self) -> None:
        try:
            if self._ws.state is ConnectionState.OPEN:
                self._send(CloseConnection(code=1000))
        except OSError:
            pass
        _shut(self._sock)


def _protocols(h: BaseHTTPRequestHandler, header: str) -> list[str]:
    return [p.strip() for v in h.headers.get_all(header) or [] for p in v.split(",") if p.strip()]


def upgrade(h: BaseHTTPRequestHandler) -> Transport:
    """Answer ``101 Switching Protocols`` for the way kubectl asked, or raise the error the API
    server answers (nothing is written then)."""
    upgrade_to = (h.headers.get("Upgrade") or "").strip().lower()
    if upgrade_to == "websocket" and h.command == "GET":
        if TUNNEL_PROTOCOL not in _protocols(h, "Sec-WebSocket-Protocol"):
            raise KubeError(
                400,
                "BadRequest",
                f"unable to upgrade: no supported WebSocket subprotocol (want {TUNNEL_PROTOCOL})",
            )
        h.send_response(101, "Switching Protocols")
        h.send_header("Upgrade", "websocket")
        h.send_header("Connection", "Upgrade")
        key = (h.headers.get("Sec-WebSocket-Key") or "").encode()
        h.send_header("Sec-WebSocket-Accept", generate_accept_token(key).decode())
        h.send_header("Sec-WebSocket-Protocol", TUNNEL_PROTOCOL)
        h.end_headers()
        return WebSocketTransport(h.rfile, h.connection)
    if upgrade_to == SPDY_UPGRADE.lower() and h.command == "POST":
        wanted = _protocols(h, "X-Stream-Protocol-Version")
        if wanted and PROTOCOL not in wanted:
            raise KubeError(
                403,
                "Forbidden",
                f"unable to upgrade: unable to negotiate protocol: client supports {wanted}, "
                f"server accepts [{PROTOCOL}]",
            )
        h.send_response(101, "Switching Protocols")
        h.send_header("Connection", "Upgrade")
        h.send_header("Upgrade", SPDY_UPGRADE)
        h.send_header("X-Stream-Protocol-Version", PROTOCOL)
        h.end_headers()
        return SocketTransport(h.rfile, h.connection)
    raise KubeError(400, "BadRequest", "Upgrade request required")


def serve(
    h: BaseHTTPRequestHandler, transport: Transport, backend: Backend, alive: Callable[[], bool]
) -> None:
    """Serve the port-forward session on the upgraded connection until kubectl ends it."""
    h.wfile.flush()
    PortForwardSession(transport, backend, alive).run()
    h.close_connection = True
