"""The server side of ``kubectl port-forward``: a SPDY/3.1 session (``portforward.k8s.io``)
whose streams come in pairs, as the kubelet serves them.

For each local connection kubectl opens an error stream and a data stream, both with the
headers ``streamtype`` (``error`` | ``data``), ``port`` and ``requestid``; each stream gets a
SYN_REPLY (a stream without a valid port or stream type is reset). When both streams of a
request are there, the pod's port is reached (:data:`Backend`: here a listener on 127.0.0.1
that plays the pod's port) and bytes are copied both ways: kubectl's FIN on the data stream
closes the write side towards the pod; when the pod's side ends, the data and error streams
are closed (FIN). A port nothing listens on gets the kubelet's error on the error stream
(``error forwarding port 8265 to pod ...``), then both streams are closed. PINGs are echoed;
a GOAWAY or the end of the connection closes every forwarded socket.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from tpu_trainer.simcloud.kube import spdy

PROTOCOL = "portforward.k8s.io"
CHUNK = 32 * 1024

Backend = Callable[[int], "int | str"]
"""A pod port → the local port (on 127.0.0.1) that serves it, or the kubelet's error text."""


class Transport(Protocol):
    """A byte stream to kubectl: the upgraded HTTP connection (SPDY) or a WebSocket tunnel."""

    def read(self) -> bytes:
        """The next bytes from kubectl; ``b""`` when the connection has ended."""
        ...

    def write(self, data: bytes) -> None: ...

    def close(self) -> None: ...


@dataclass
class _Pair:
    request_id: str
    port: int
    error: int = 0
    data: int = 0
    sock: socket.socket | None = None
    reset: bool = False
    pending: list[bytes] = field(default_factory=list)
    half_closed: bool = False


@dataclass
class PortForwardSession:
    """One upgraded connection of ``kubectl port-forward`` to one pod."""

    transport: Transport
    backend: Backend
    on_activity: Callable[[], bool] = lambda: True
    """Called on each frame; False stops the session (the server is shutting down)."""
    _reader: spdy.FrameReader = field(default_factory=spdy.FrameReader)
    _writer: spdy.FrameWriter = field(default_factory=spdy.FrameWriter)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _pairs: dict[str, _Pair] = field(default_factory=dict)
    _by_stream: dict[int, _Pair] = field(default_factory=dict)

    def send(self, frame: spdy.Frame) -> bool:
        """Write one frame (False: kubectl's side is gone)."""
        with self._lock:
            try:
                self.transport.write(self._writer.write(frame))
            except OSError:
                return False
        return True

    def run(self) -> None:
        """Serve frames until kubectl closes the connection (or says GOAWAY)."""
        try:
            while self.on_activity():
                data = self.transport.read()
                if not data:
                    break
                if not all(self._handle(frame) for frame in self._reader.feed(data)):
                    break
        except (OSError, spdy.SpdyError):
            pass
        finally:
            for pair in list(self._pairs.values()):
                _close(pair.sock)
            self.transport.close()

    # ---- frames from kubectl ---------------------------------------------------------------
    def _handle(self, frame: spdy.Frame) -> bool:
        if isinstance(frame, spdy.SynStream):
            self._open(frame)
        elif isinstance(frame, spdy.Data):
            self._data(frame)
        elif isinstance(frame, spdy.RstStream):
            pair = self._by_stream.get(frame.stream_id)
            if pair is not None and frame.stream_id == pair.data:
                pair.reset = True
                _close(pair.sock)
        elif isinstance(frame, spdy.Ping):
            self.send(frame)
        elif isinstance(frame, spdy.GoAway):
            return False
        return True

    def _open(self, frame: spdy.SynStream) -> None:
        def one(name: str) -> str:
            return (frame.headers.get(name) or [""])[0]

        kind, port_text = one("streamtype"), one("port")
        if kind not in ("error", "data") or not port_text.isdigit() or int(port_text) < 1:
            self.send(spdy.RstStream(frame.stream_id, spdy.CANCEL))
            return
        request = one("requestid") or str(frame.stream_id - (2 if kind == "data" else 0))
        pair = self._pairs.setdefault(request, _Pair(request, int(port_text)))
        setattr(pair, kind, frame.stream_id)
        self._by_stream[frame.stream_id] = pair
        self.send(spdy.SynReply(frame.stream_id))
        if pair.error and pair.data:
            self._connect(pair)

    def _data(self, frame: spdy.Data) -> None:
        pair = self._by_stream.get(frame.stream_id)
        if pair is None or frame.stream_id != pair.data:
            return  # the error stream carries nothing from kubectl
        try:
            if frame.data:
                if pair.sock is None:
                    pair.pending.append(frame.data)
                else:
                    pair.sock.sendall(frame.data)
            if frame.fin:
                pair.half_closed = True
                if pair.sock is not None:
                    pair.sock.shutdown(socket.SHUT_WR)
        except OSError:
            _close(pair.sock)

    # ---- the pod's side ----------------------------------------------------------------------
    def _connect(self, pair: _Pair) -> None:
        found = self.backend(pair.port)
        sock: socket.socket | None = None
        if isinstance(found, int):
            try:
                sock = socket.create_connection(("127.0.0.1", found), timeout=10)
                sock.settimeout(None)
            except OSError:
                sock = None
        if sock is None:
            message = found if isinstance(found, str) else refused(pair.port, "")
            self.send(spdy.Data(pair.error, message.encode()))
            self._finish(pair)
            return
        pair.sock = sock
        for chunk in pair.pending:
            sock.sendall(chunk)
        pair.pending.clear()
        if pair.half_closed:
            sock.shutdown(socket.SHUT_WR)
        threading.Thread(target=self._pump, args=(pair,), daemon=True).start()

    def _pump(self, pair: _Pair) -> None:
        """The pod's bytes to kubectl, then the end of both streams."""
        sock = pair.sock
        assert sock is not None  # noqa: S101 - set before the pump starts
        try:
            while not pair.reset:
                chunk = sock.recv(CHUNK)
                if not chunk or not self.send(spdy.Data(pair.data, chunk)):
                    break
        except OSError:
            pass
        finally:
            _close(sock)
            self._finish(pair)

    def _finish(self, pair: _Pair) -> None:
        if not pair.reset:
            self.send(spdy.Data(pair.data, b"", fin=True))
        self.send(spdy.Data(pair.error, b"", fin=True))
        self._pairs.pop(pair.request_id, None)


def refused(port: int, sandbox: str) -> str:
    """What the kubelet writes on the error stream when nothing listens on the pod's port."""
    return (
        f"error forwarding port {port} to pod {sandbox}, uid : failed to execute portforward in "
        f'network namespace "/var/run/netns/cni-{sandbox[:8]}": failed to connect to '
        f'localhost:{port} inside namespace "{sandbox}", IPv4: dial tcp4 127.0.0.1:{port}: '
        f"connect: connection refused IPv6 dial tcp6 [::1]:{port}: connect: connection refused "
    )


def _close(sock: socket.socket | None) -> None:
    """Shut the socket down (waking a thread blocked reading it), then close it."""
    if sock is None:
        return
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
