"""A real Ray head for tests: Ray 2.60 from the Ray runtime, on loopback only, token auth on.

``ray start --head --block`` runs in its own session; every Ray process it starts (GCS, raylet,
dashboard, workers) stays in that process group, which :func:`local_ray_head` ends by its id
(never ``ray stop``, which would stop every Ray on the machine). The head's addresses are all
127.0.0.1 (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` keeps Ray from choosing the machine's
external address), its ports are free ones, and its files live in a fresh short folder (Ray's
unix sockets limit the path's length).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.runtime.ray_runtime import install_ray, ray_cli

START_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class RayHead:
    url: str
    """The dashboard: ``http://127.0.0.1:<port>``."""
    token: str = field(repr=False)
    python: Path
    """The Ray runtime's interpreter (Ray and MaxText)."""
    ray: Path
    """The Ray runtime's ``ray`` command."""
    folder: Path
    pgid: int


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(url: str, token: str) -> bool:
    request = urllib.request.Request(  # noqa: S310 (a loopback http URL made here)
        f"{url}/api/version", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310
            return bool(json.loads(response.read()).get("ray_version"))
    except (urllib.error.URLError, OSError, ValueError):
        return False


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the head's process group: SIGTERM, a moment's grace, then SIGKILL."""
    for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and group_alive(proc.pid):
            if proc.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.2)
            else:
                time.sleep(0.2)
        if not group_alive(proc.pid):
            break
    if proc.poll() is None:
        proc.wait(timeout=10)


@contextmanager
def local_ray_head(num_cpus: int = 2) -> Iterator[RayHead]:
    """Start a head (installing the Ray runtime on first use), yield it, always stop it."""
    python = install_ray(SubprocessRunner(), lambda _: None)
    ray = ray_cli()
    folder = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))
    token = secrets.token_hex(24)
    dashboard = free_port()
    url = f"http://127.0.0.1:{dashboard}"
    argv = [
        str(ray),
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        "--dashboard-host=127.0.0.1",
        f"--port={free_port()}",
        f"--dashboard-port={dashboard}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--ray-client-server-port={free_port()}",
        f"--num-cpus={num_cpus}",
        "--disable-usage-stats",
        f"--temp-dir={folder / 'ray'}",
    ]
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log = (folder / "head.log").open("wb")
    proc = subprocess.Popen(
        argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _answers(url, token):
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (folder / "head.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the Ray head did not come up:\n{tail}")
            time.sleep(0.5)
        yield RayHead(url, token, python, ray, folder, proc.pid)
    finally:
        _stop(proc)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)
