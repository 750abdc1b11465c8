"""``kubectl port-forward`` through the real kubectl 1.32 against the Kubernetes API emulator:
the WebSocket tunnel kubectl asks for first (SPDY inside, ``SPDY/3.1+portforward.k8s.io``) and
the plain SPDY/3.1 upgrade it falls back to (``KUBECTL_PORT_FORWARD_WEBSOCKETS=false``), each
carrying two connections' bytes both ways to a listener on 127.0.0.1 that plays the pod's port,
and ending them from either side."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from test_simkube_kubectl import SCENARIO, Cluster
from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.simcloud.kube.logs import append_log
from tpu_trainer.simcloud.kube.pod_ports import serve_port
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)")


@dataclass
class Echo:
    """Plays the pod's port: answers each chunk upper-cased; ``bye`` makes it hang up."""

    server: socket.socket = field(default_factory=lambda: socket.create_server(("127.0.0.1", 0)))
    ended: list[bytes] = field(default_factory=list)
    """What each connection had received when the other side closed it."""

    @property
    def port(self) -> int:
        return int(self.server.getsockname()[1])

    def serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        got = b""
        with conn:
            while chunk := conn.recv(65536):
                got += chunk
                conn.sendall(chunk.upper())
                if got.endswith(b"bye"):
                    return
        self.ended.append(got)


@pytest.fixture
def pod(tmp_path: Path) -> Iterator[tuple[Cluster, Echo]]:
    """A running pod ``web`` whose port 8265 the echo listener plays."""
    state = init_state(parse_scenario(SCENARIO), tmp_path / "state.json")
    echo = Echo()
    threading.Thread(target=echo.serve, daemon=True).start()
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"containers": [{"name": "web", "image": "web:1", "ports": [{"containerPort": 8265}]}]},
    }  # fmt: skip
    with KubeServer(state, idle_seconds=120) as server:
        cluster = Cluster(tmp_path, server)
        assert cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest)).returncode == 0
        append_log(state, "default", "web", "web", [], phase="Running")
        serve_port(state, "default", "web", 8265, echo.port)
        yield cluster, echo
    echo.server.close()


def _forward(cluster: Cluster, *args: str) -> tuple[subprocess.Popen[str], int]:
    proc = cluster.follow("port-forward", *args, "--address=127.0.0.1")
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = FORWARDING.search(line)
    if found is None:
        proc.kill()
        _, err = proc.communicate(timeout=30)
        pytest.fail(f"no Forwarding line: {line!r} {err!r}")
    return proc, int(found[1])


def _exchange(port: int, payload: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(payload)
        got = b""
        while len(got) < len(payload):
            chunk = conn.recv(65536)
            if not chunk:
                break
            got += chunk
        return got


@pytest.mark.parametrize("websockets", [True, False], ids=["websocket-tunnel", "spdy-upgrade"])
def test_two_connections_carry_bytes_both_ways_and_close_from_either_side(
    pod: tuple[Cluster, Echo], websockets: bool
) -> None:
    cluster, echo = pod
    if not websockets:
        cluster.env["KUBECTL_PORT_FORWARD_WEBSOCKETS"] = "false"
    proc, port = _forward(cluster, "pod/web", ":8265")
    try:
        big = bytes(range(97, 123)) * 20000  # 520 kB: many frames each way
        assert _exchange(port, big) == big.upper()
        # the local side closes: the pod's side sees the end of what was sent
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"second")
            assert conn.recv(64) == b"SECOND"
        # the pod's side hangs up: the local connection ends
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"bye")
            got = b""
            while chunk := conn.recv(64):
                got += chunk
            assert got == b"BYE"
        assert proc.poll() is None  # still forwarding
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
    assert out.count("Handling connection for") == 3, (out, err)
    assert b"second" in echo.ended and big in echo.ended
    upgraded = [(m, p) for m, p, code in cluster.server.requests if code == 101]
    method = "GET" if websockets else "POST"
    assert upgraded == [(method, "/api/v1/namespaces/default/pods/web/portforward")]


def test_a_port_nothing_listens_on_ends_with_the_kubelets_error(pod: tuple[Cluster, Echo]) -> None:
    cluster, _ = pod
    proc, port = _forward(cluster, "pod/web", ":9999")
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"x")
        assert conn.recv(64) == b""
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert "an error occurred forwarding" in err and "-> 9999: error forwarding port 9999" in err
    assert "connect: connection refused" in err
    assert "error: lost connection to pod" in err  # kubectl 1.32 gives up on the pod
    assert proc.returncode == 1


def test_a_pod_that_is_not_running_is_refused_by_kubectl(pod: tuple[Cluster, Echo]) -> None:
    cluster, _ = pod
    manifest = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "waiting", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "c:1"}]},
    }
    assert cluster.kubectl("apply", "-f", "-", stdin=json.dumps(manifest)).returncode == 0
    refused = cluster.kubectl("port-forward", "pod/waiting", ":80", "--pod-running-timeout=2s")
    assert refused.returncode == 1
    assert "unable to forward port because pod is not running. Current status=Pending" in (
        refused.stderr
    )
    missing = cluster.kubectl("port-forward", "pod/nowhere", ":80")
    assert missing.returncode == 1
    assert 'pods "nowhere" not found' in missing.stderr


def test_kubectl_killed_mid_connection_closes_the_pods_side(pod: tuple[Cluster, Echo]) -> None:
    cluster, echo = pod
    proc, port = _forward(cluster, "pod/web", ":8265")
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        conn.sendall(b"open")
        assert conn.recv(64) == b"OPEN"
        proc.kill()  # no GOAWAY, no FIN: the connection to the API server just ends
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 10
        while not echo.ended and time.monotonic() < deadline:
            time.sleep(0.05)
        assert echo.ended == [b"open"]
    finally:
        conn.close()
