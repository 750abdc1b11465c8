"""A fake Ray dashboard: the Jobs REST API on 127.0.0.1, playing scripted jobs.

Each submitted job follows a :class:`JobScript`: one status per ``GET /api/jobs/<id>`` (the
last one repeats) and a log that grows by one chunk per status poll. ``POST .../stop`` stops a
job that has not ended. The first job plays ``script``, later ones ``later`` in turn (the last
repeats): a run's job submitted again on a RayCluster made again (its Nth job, named
``tpu-trainer-<run>-N``, the Nth script, even for a dashboard started again). :func:`reclaimed_jobs` writes
the two jobs of a slice reclaimed after a step (``workloads.reclaim_after_step``). Token authentication behaves like Ray's: without ``Authorization:
Bearer <token>`` every call gets 401. The server runs in a thread and stops when the ``with``
block ends.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from tpu_trainer.fakecloud import maxtext_log as mlog

RAY_VERSION = "2.60.0"
_TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


@dataclass(frozen=True, slots=True)
class JobScript:
    statuses: Sequence[str] = ("PENDING", "RUNNING", "SUCCEEDED")
    chunks: Sequence[str] = ()
    """Log text added at each status poll (chunk i shows once the status was asked i+1 times;
    every chunk shows once the job has ended)."""
    message: str = ""
    """The job's final message (``Job failed due to an application error...``)."""
    driver_exit_code: int | None = None
    on_end: Callable[[], None] | None = None
    """Called once when the job's status first reads terminal (what the cluster does then)."""


@dataclass
class _Job:
    submission_id: str
    entrypoint: str
    runtime_env: dict[str, Any]
    script: JobScript
    polls: int = 0
    stopped: bool = False
    ended: bool = False

    @property
    def status(self) -> str:
        if self.stopped:
            return "STOPPED"
        statuses = self.script.statuses
        return statuses[min(self.polls, len(statuses) - 1)]

    def logs(self) -> str:
        """After n status polls, the first n chunks (all of them once the job has ended)."""
        if self.status in _TERMINAL:
            return "".join(self.script.chunks)
        return "".join(self.script.chunks[: self.polls])

    def details(self) -> dict[str, Any]:
        ended = self.status in _TERMINAL
        return {
            "type": "SUBMISSION",
            "job_id": None,
            "submission_id": self.submission_id,
            "status": self.status,
            "entrypoint": self.entrypoint,
            "message": (self.script.message if ended else "") or f"Job is {self.status}.",
            "error_type": "JOB_SUPERVISOR_ACTOR_DIED" if self.status == "FAILED" else None,
            "start_time": 1_795_000_000_000,
            "end_time": 1_795_000_100_000 if ended else None,
            "driver_exit_code": self.script.driver_exit_code if ended else None,
            "runtime_env": self.runtime_env,
        }


@dataclass
class FakeRayDashboard:
    """``with FakeRayDashboard(token, JobScript(...)) as dash:`` then use ``dash.url``."""

    token: str | None
    script: JobScript = field(default_factory=JobScript)
    later: Sequence[JobScript] = ()
    """The scripts of the jobs submitted after the first, in turn (the last one repeats)."""
    jobs: dict[str, _Job] = field(default_factory=dict)
    calls: list[tuple[str, str, bool]] = field(default_factory=list)
    """(method, path, authorized) of every request."""
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def port(self) -> int:
        assert self._server is not None  # noqa: S101 (used inside the with block only)
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> FakeRayDashboard:
        dashboard = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # noqa: ARG002 (quiet)
                return

            def do_GET(self) -> None:
                dashboard._serve(self, "GET")

            def do_POST(self) -> None:
                dashboard._serve(self, "POST")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    # ---- requests ---------------------------------------------------------------------------
    def _serve(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        path = handler.path.split("?", 1)[0]
        authorized = self.token is None or handler.headers.get("Authorization") == (
            f"Bearer {self.token}"
        )
        with self._lock:
            self.calls.append((method, path, authorized))
            if not authorized:
                _reply(handler, 401, "Unauthorized: Missing authentication token", text=True)
                return
            length = int(handler.headers.get("Content-Length") or 0)
            body = json.loads(handler.rfile.read(length) or b"{}") if length else {}
            code, answer = self._answer(method, path, body)
        _reply(handler, code, answer)

    def _answer(self, method: str, path: str, body: dict[str, Any]) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        if parts == ["api", "version"]:
            return 200, {"version": "4", "ray_version": RAY_VERSION, "ray_commit": "fake"}
        if parts == ["api", "jobs"] and method == "POST":
            sid = str(body.get("submission_id") or f"raysubmit_{len(self.jobs) + 1}")
            if sid in self.jobs:
                return 400, f"Job with submission_id {sid} already exists."
            runtime_env = dict(body.get("runtime_env") or {})
            scripts = (self.script, *self.later)
            script = scripts[min(_attempt(sid, len(self.jobs)), len(scripts) - 1)]
            self.jobs[sid] = _Job(sid, str(body.get("entrypoint")), runtime_env, script)
            return 200, {"job_id": sid, "submission_id": sid}
        if len(parts) < 3 or parts[:2] != ["api", "jobs"]:
            return 404, "Not Found"
        job = self.jobs.get(parts[2])
        if job is None:
            return 404, f"Job {parts[2]} does not exist"
        rest = parts[3:]
        if method == "GET" and not rest:
            details = job.details()
            job.polls += 1
            if details["status"] in _TERMINAL and not job.ended:
                job.ended = True
                if job.script.on_end is not None:
                    job.script.on_end()
            return 200, details
        if method == "GET" and rest == ["logs"]:
            return 200, {"logs": job.logs()}
        if method == "POST" and rest == ["stop"]:
            was_running = job.status not in _TERMINAL
            job.stopped = job.stopped or was_running
            return 200, {"stopped": was_running}
        return 404, "Not Found"


def _attempt(submission_id: str, submitted: int) -> int:
    """Which script a job plays: its run's Nth job (``tpu-trainer-<run>-N``) the Nth, so a
    dashboard started again for a resumed run plays the job it would have played; else the
    next in turn."""
    found = _NTH.fullmatch(submission_id)
    return int(found.group(1)) - 1 if found else submitted


_NTH = re.compile(r"tpu-trainer-[0-9a-f]+-([0-9]+)")


# ---- a slice reclaimed under a job ----------------------------------------------------------
NODE_DIED = (
    "Job failed due to an application error, last available logs (truncated to 20,000 chars):\n"
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task. "
    "The actor's node was terminated unexpectedly."
)
"""What Ray says of a job whose training workers' node went away."""
_WORKER = "\x1b[36m(RayTrainWorker pid=4411, ip=10.12.3.6)\x1b[0m "
_STARTED = (
    "\x1b[36m(TrainController pid=2210)\x1b[0m Started training worker group of size 1:\n"
    "\x1b[36m(TrainController pid=2210)\x1b[0m - (ip=10.12.3.6, pid=4411) world_rank=0, "
    "local_rank=0, node_rank=0\n"
)


def ray_job_log(maxtext: str, chunks: int = 3) -> tuple[str, ...]:
    """Worker 0's MaxText lines as a Ray Train job prints them, in ``chunks`` parts."""
    lines = [_STARTED, *(_WORKER + line + "\n" for line in maxtext.splitlines())]
    size = max(1, -(-len(lines) // chunks))
    return tuple("".join(lines[i : i + size]) for i in range(0, len(lines), size))


def reclaimed_jobs(
    after_step: int, command: str, on_reclaim: Callable[[], None]
) -> tuple[JobScript, JobScript]:
    """The jobs of a run whose slice is reclaimed after ``after_step`` (``command`` holds its
    ``steps=``, ``checkpoint_period=`` and ``run_name=``): the first logs steps 0..N with a
    durable checkpoint every period, then its workers' node goes (``on_reclaim``: the cluster
    takes the slice back) and Ray fails the job; the next, on a RayCluster made again,
    restores the last durable checkpoint and reaches the last step."""
    first = mlog.reclaimed_log(mlog.DEFAULT_LOG, command, after_step)
    cut = "".join(ln + "\n" for ln in first.splitlines() if "Training stopped" not in ln)
    restored = mlog.durable_before(after_step, command)
    again = mlog.resumed_log(mlog.DEFAULT_LOG, command, restored)
    running = ("PENDING", "RUNNING", "RUNNING", "RUNNING")
    return (
        JobScript(
            statuses=(*running, "FAILED"),
            chunks=ray_job_log(cut),
            message=NODE_DIED,
            driver_exit_code=1,
            on_end=on_reclaim,
        ),
        JobScript(statuses=(*running, "SUCCEEDED"), chunks=ray_job_log(again)),
    )


def _reply(handler: BaseHTTPRequestHandler, code: int, answer: Any, *, text: bool = False) -> None:
    is_text = text or isinstance(answer, str)
    data = (str(answer) if is_text else json.dumps(answer)).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "text/plain" if is_text else "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
