"""Ray's Jobs REST API (the dashboard, port 8265): submit, status, logs, stop.

Ask ``GET /api/jobs/<id>`` for a job's fate: ``ray job status`` and ``ray job logs --follow``
exit 0 even for a FAILED job. Clusters with token authentication (Ray's default for new local
clusters, KubeRay's ``authOptions.mode: token``) want ``Authorization: Bearer <token>``; the
token stays in memory (never in a file, a log, the store or a ``repr``).

The streaming log endpoint (``/logs/tail``) is a WebSocket; :class:`LogCursor` instead turns
repeated ``GET /logs`` answers into the lines that are new since the last one.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from tpu_trainer.errors import TpuTrainerError

TOKEN_ENV = "RAY_AUTH_TOKEN"  # noqa: S105 (the variable's name, not a token)
_HTTP_UNAUTHORIZED = 401
_HTTP_FORBIDDEN = 403
_HTTP_NOT_FOUND = 404


class JobStatus(StrEnum):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def terminal(self) -> bool:
        return self in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED)


class RayJobsError(TpuTrainerError):
    """The Ray dashboard could not be reached, refused us, or answered something unexpected."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobInfo:
    """What ``GET /api/jobs/<id>`` says about a job."""

    submission_id: str
    status: JobStatus
    message: str = ""
    error_type: str | None = None
    driver_exit_code: int | None = None
    start_time: float | None = None
    """Seconds since the epoch (Ray answers milliseconds)."""
    end_time: float | None = None


def parse_job(data: Mapping[str, Any]) -> JobInfo:
    """A job's details as the dashboard answers them (pure)."""
    try:
        status = JobStatus(str(data.get("status")))
    except ValueError:
        raise RayJobsError(
            f"the Ray dashboard answered an unknown job status {data.get('status')!r}",
            fix="check that the cluster runs Ray 2.x",
        ) from None

    def seconds(key: str) -> float | None:
        value = data.get(key)
        return float(value) / 1000 if isinstance(value, int | float) and value else None

    code = data.get("driver_exit_code")
    return JobInfo(
        submission_id=str(data.get("submission_id") or data.get("job_id") or ""),
        status=status,
        message=str(data.get("message") or ""),
        error_type=str(data["error_type"]) if data.get("error_type") else None,
        driver_exit_code=int(code) if isinstance(code, int) else None,
        start_time=seconds("start_time"),
        end_time=seconds("end_time"),
    )


def submit_body(
    entrypoint: str,
    submission_id: str,
    env_vars: Mapping[str, str],
    metadata: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The body of ``POST /api/jobs/`` (pure)."""
    body: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submission_id": submission_id,
        "runtime_env": {"env_vars": dict(env_vars)},
    }
    if metadata:
        body["metadata"] = dict(metadata)
    return body


@dataclass
class LogCursor:
    """Turns successive full logs of one job into the complete lines not seen yet."""

    offset: int = 0
    _partial: str = ""

    def new_lines(self, logs: str) -> list[str]:
        if len(logs) < self.offset:  # the log was cut or replaced: read it again from the start
            self.offset, self._partial = 0, ""
        text = self._partial + logs[self.offset :]
        self.offset = len(logs)
        lines = text.split("\n")
        self._partial = lines.pop()
        return [line.rstrip("\r") for line in lines]

    def rest(self) -> list[str]:
        """The last line when the log ended without a newline."""
        tail, self._partial = self._partial, ""
        return [tail] if tail else []


@dataclass(frozen=True)
class RayJobsClient:
    """The Jobs API of one Ray cluster, through ``urllib``."""

    address: str
    """``http://127.0.0.1:8265``."""
    token: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    hint: str = ""
    """What to check when the dashboard does not answer (how this client reached the head)."""

    def version(self) -> dict[str, Any]:
        """``GET /api/version``: the cluster's Ray version (and a check that the token works)."""
        found: dict[str, Any] = self._json("GET", "/api/version")
        return found

    def submit(self, body: Mapping[str, Any]) -> str:
        """Submit a job (see :func:`submit_body`); returns its submission id."""
        answer = self._json("POST", "/api/jobs/", body)
        return str(answer.get("submission_id") or answer.get("job_id") or "")

    def status(self, submission_id: str) -> JobInfo:
        return parse_job(self._json("GET", f"/api/jobs/{submission_id}"))

    def logs(self, submission_id: str) -> str:
        """The job's whole log so far."""
        return str(self._json("GET", f"/api/jobs/{submission_id}/logs").get("logs") or "")

    def stop(self, submission_id: str) -> bool:
        """Ask Ray to stop the job; True when it was still running."""
        return bool(self._json("POST", f"/api/jobs/{submission_id}/stop").get("stopped"))

    # ---- transport -----------------------------------------------------------------------------
    def _json(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> Any:
        url = self.address.rstrip("/") + path
        if not url.startswith(("http://", "https://")):
            raise RayJobsError(
                f"{self.address} is not an http(s) address",
                fix="give the dashboard's address, such as http://127.0.0.1:8265",
            )
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        # http(s) only (checked above): no file:// or other schemes
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                text = response.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as e:
            raise self._http_error(method, path, e) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            raise RayJobsError(
                f"nothing answers at {self.address} ({reason}): is the Ray head up?",
                fix=self.hint
                or "check that the head is running and that its dashboard port is reachable "
                "(on GKE: `kubectl port-forward svc/<cluster>-head-svc 8265:8265`)",
            ) from None
        try:
            return json.loads(text) if text.strip() else {}
        except json.JSONDecodeError:
            raise RayJobsError(
                f"{method} {path} answered something that is not JSON: {text[:200]!r}",
                fix="check that the address is the Ray dashboard (port 8265), not the GCS port",
            ) from None

    def _http_error(self, method: str, path: str, e: urllib.error.HTTPError) -> RayJobsError:
        detail = e.read().decode("utf-8", errors="replace").strip()[:300]
        if e.code in (_HTTP_UNAUTHORIZED, _HTTP_FORBIDDEN):
            what = "has no token" if not self.token else "rejected the token"
            return RayJobsError(
                f"the Ray dashboard at {self.address} {what} (HTTP {e.code}: {detail})",
                fix=f"set {TOKEN_ENV} to the cluster's token: on KubeRay `kubectl get secret "
                "<cluster> -o jsonpath={.data.auth_token} | base64 -d`, on a local head "
                "`ray get-auth-token`",
            )
        if e.code == _HTTP_NOT_FOUND:
            return RayJobsError(
                f"{method} {path}: not found at {self.address} ({detail})",
                fix="check the submission id with `ray job list`, and that this is the job's cluster",
            )
        return RayJobsError(
            f"{method} {path} failed with HTTP {e.code}: {detail}",
            fix="see the Ray dashboard's log (dashboard.log on the head)",
        )
