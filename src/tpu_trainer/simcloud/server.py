"""One HTTP server on 127.0.0.1 that answers for the emulated Google Cloud APIs.

Each service (GKE, Compute, Cloud TPU) sits under its own URL prefix, the base gcloud is given
through ``CLOUDSDK_API_ENDPOINT_OVERRIDES_<API>``. A request is routed through the service's
discovery documents; its body is checked against the method's request schema (a bad one gets
the service's 400) and every answer against the response schema (a bad one is the emulator's
own bug: a 500, recorded). Errors carry Google's JSON error body, so gcloud prints its own text.

The server runs in daemon threads of the process that started it and stops by itself after
``idle_seconds`` without a request.
"""

from __future__ import annotations

import json
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

from tpu_trainer.simcloud.discovery import ApiMethod, DiscoveryApi, JsonObject
from tpu_trainer.simcloud.schema import problems

_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
}
_REASONS = {
    400: "badRequest",
    403: "forbidden",
    404: "notFound",
    409: "alreadyExists",
    429: "rateLimitExceeded",
    500: "backendError",
    501: "notImplemented",
}


# google.rpc.Code numbers, as long-running operations carry them in ``error.code``.
RPC_CODES = {
    "INVALID_ARGUMENT": 3,
    "NOT_FOUND": 5,
    "ALREADY_EXISTS": 6,
    "PERMISSION_DENIED": 7,
    "RESOURCE_EXHAUSTED": 8,
    "FAILED_PRECONDITION": 9,
    "INTERNAL": 13,
    "UNAVAILABLE": 14,
}


def operation_id(now: float, seq: int, digits: str = "") -> str:
    """``operation-<milliseconds since the epoch>-<seq>``: how GKE, Compute and Cloud TPU name
    operations (``digits``: the number's format, e.g. ``04d``, ``013x``)."""
    return f"operation-{int(now * 1000)}-{seq:{digits}}"


def utc_timestamp(value: float) -> str:
    """RFC 3339 in UTC with microseconds, as GKE and Cloud TPU write times."""
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ApiError(Exception):
    """An answer the service gives as an error: HTTP code, canonical status, message."""

    def __init__(self, code: int, message: str, *, status: str = "", reason: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or _STATUS_NAMES.get(code, "UNKNOWN")
        self.reason = reason or _REASONS.get(code, "unknown")

    def body(self) -> JsonObject:
        return {
            "error": {
                "code": self.code,
                "message": self.message,
                "status": self.status,
                "errors": [{"message": self.message, "domain": "global", "reason": self.reason}],
            }
        }


H = TypeVar("H")


def handler_for(handlers: Mapping[str, H], method_id: str, prefix: str = "") -> H:
    """The handler of the method ``method_id`` (keyed without ``prefix``), or the 501 of a
    method the service does not emulate."""
    handler = handlers.get(method_id.removeprefix(prefix))
    if handler is None:
        raise ApiError(501, f"Method {method_id} is not emulated.")
    return handler


@dataclass(frozen=True)
class Call:
    """One routed request, as a service handler sees it."""

    api: DiscoveryApi
    method: ApiMethod
    params: dict[str, str]
    query: dict[str, list[str]]
    body: JsonObject | None

    def arg(self, name: str, default: str = "") -> str:
        values = self.query.get(name)
        return values[0] if values else default


class Service(Protocol):
    """One emulated API: its URL prefix, its documents and the methods it implements."""

    @property
    def prefix(self) -> str: ...

    @property
    def apis(self) -> Sequence[DiscoveryApi]: ...

    def handle(self, call: Call) -> JsonObject: ...


@dataclass(frozen=True)
class Exchange:
    """What the emulator saw and answered, with what the schemas said about both."""

    http_method: str
    path: str
    method_id: str
    status: int
    request_problems: tuple[str, ...]
    response_problems: tuple[str, ...]


class _LoopbackServer(ThreadingHTTPServer):
    """A client that goes away before its answer is written (a gcloud or kubectl stopped by
    Ctrl-C, a follow that was cancelled) is a normal end of its connection, not an error to
    print: real servers say nothing of it either."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _TlsServer(_LoopbackServer):
    """HTTPS: each connection's TLS handshake is made in its own request thread, so a slow
    or silent client never holds up the others."""

    tls: ssl.SSLContext

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            conn = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client that gave up or does not trust the certificate
        try:
            super().finish_request(conn, client_address)
        finally:
            conn.close()


def serve_on_loopback(
    answer: Callable[[BaseHTTPRequestHandler], None],
    protocol_version: str = "HTTP/1.0",
    *,
    tls: ssl.SSLContext | None = None,
) -> ThreadingHTTPServer:
    """An HTTP server on 127.0.0.1 (a free port) that hands every GET, POST, PUT, PATCH and
    DELETE to ``answer``, serving from daemon threads; stopped with ``shutdown()``. With
    ``tls``, HTTPS with that server context."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer(self)

        def do_POST(self) -> None:
            answer(self)

        def do_PUT(self) -> None:
            answer(self)

        def do_PATCH(self) -> None:
            answer(self)

        def do_DELETE(self) -> None:
            answer(self)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 (quiet)
            return

    Handler.protocol_version = protocol_version
    server: ThreadingHTTPServer
    if tls is None:
        server = _LoopbackServer(("127.0.0.1", 0), Handler)
    else:
        server = _TlsServer(("127.0.0.1", 0), Handler)
        server.tls = tls
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class Emulator:
    """The server: ``start()`` gives the base URL; ``exchanges`` is every request answered."""

    services: Sequence[Service]
    idle_seconds: float = 900.0
    exchanges: list[Exchange] = field(default_factory=list)
    on_exchange: Callable[[Exchange], None] | None = None
    """Called with every exchange as it is answered (e.g. to keep the invalid ones on disk)."""
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _last: float = field(default_factory=time.monotonic)

    def start(self) -> str:
        self._server = serve_on_loopback(self._answer)
        threading.Thread(target=self._stop_when_idle, daemon=True).start()
        return self.base_url

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the emulator is not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()

    def __enter__(self) -> Emulator:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def invalid(self) -> list[Exchange]:
        """Exchanges whose request or response broke the discovery documents."""
        with self._lock:
            return [e for e in self.exchanges if e.request_problems or e.response_problems]

    # ------------------------------------------------------------------------------------
    def _stop_when_idle(self) -> None:
        while self._server is not None:
            time.sleep(min(5.0, self.idle_seconds))
            if time.monotonic() - self._last > self.idle_seconds:
                self.stop()

    def _answer(self, h: BaseHTTPRequestHandler) -> None:
        self._last = time.monotonic()
        url = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        status, body, exchange = self._dispatch(h.command, url.path, parse_qs(url.query), raw)
        with self._lock:
            self.exchanges.append(exchange)
        if self.on_exchange is not None:
            self.on_exchange(exchange)
        data = json.dumps(body).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json; charset=UTF-8")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    def _dispatch(
        self, verb: str, path: str, query: dict[str, list[str]], raw: bytes
    ) -> tuple[int, JsonObject, Exchange]:
        for service in self.services:
            if not path.startswith(service.prefix):
                continue
            rest = path[len(service.prefix) :]
            for api in service.apis:
                routed = api.route(verb, rest)
                if routed is None:
                    continue
                method, params = routed
                return self._call(service, Call(api, method, params, query, None), raw, verb, path)
        err = ApiError(404, f"The requested URL {path} was not found on this server.")
        return 404, err.body(), Exchange(verb, path, "", 404, (), ())

    def _call(
        self, service: Service, call: Call, raw: bytes, verb: str, path: str
    ) -> tuple[int, JsonObject, Exchange]:
        method = call.method
        req_problems: list[str] = []
        body: JsonObject | None = None
        if raw:
            try:
                parsed = json.loads(raw)
            except json.JSONDecodeError:
                parsed = None
                req_problems.append("request: body is not JSON")
            if isinstance(parsed, dict):
                body = parsed
                if method.request:
                    req_problems.extend(problems(call.api, method.request, body))
            elif parsed is not None:
                req_problems.append("request: body is not a JSON object")
        if req_problems:
            err = ApiError(400, "Invalid JSON payload received. " + "; ".join(req_problems))
            return 400, err.body(), Exchange(verb, path, method.id, 400, tuple(req_problems), ())
        try:
            answer = service.handle(Call(call.api, method, call.params, call.query, body))
        except ApiError as e:
            return e.code, e.body(), Exchange(verb, path, method.id, e.code, (), ())
        resp_problems = problems(call.api, method.response, answer) if method.response else []
        if resp_problems:
            err = ApiError(500, "emulator answer breaks the discovery document")
            exchange = Exchange(verb, path, method.id, 500, (), tuple(resp_problems))
            return 500, err.body(), exchange
        return int(HTTPStatus.OK), answer, Exchange(verb, path, method.id, 200, (), ())
