"""The Ray Jobs client and the job follower against a fake dashboard on 127.0.0.1."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.fakecloud.ray_dashboard import FakeRayDashboard, JobScript
from tpu_trainer.infra.ray_jobs import (
    JobStatus,
    LogCursor,
    RayJobsClient,
    RayJobsError,
    parse_job,
    submit_body,
)
from tpu_trainer.launchers.ray.follow import (
    Deadlines,
    FollowedJob,
    JobEnd,
    JobLogs,
    RayJobFollower,
    Waiting,
)

pytestmark = pytest.mark.unit

TOKEN = "a-test-token-0123456789"
WAITING = Waiting(
    shape="1 x v6e-4x4 (4 hosts x 4 chips each)", fix="add a node pool with --tpu-topology=4x4"
)
FAST = Deadlines(start_s=30.0, finish_s=20.0, poll_s=0.01)


@pytest.fixture
def dashboard(request: pytest.FixtureRequest) -> Iterator[FakeRayDashboard]:
    script = getattr(request, "param", JobScript())
    with FakeRayDashboard(TOKEN, script) as dash:
        yield dash


def _follow(
    dash: FakeRayDashboard, tmp_path: Path, deadlines: Deadlines = FAST
) -> tuple[FollowedJob, SilentDisplay]:
    client = RayJobsClient(dash.url, TOKEN)
    job = client.submit(submit_body("python /tpu-trainer/train_entry.py", "tpu-trainer-x", {}))
    display = SilentDisplay()
    seen: list[str] = []
    with JobLogs(tmp_path / "job.log", tmp_path / "worker0.log", seen.append) as logs:
        followed = RayJobFollower(client, job, display, logs, WAITING, deadlines).run()
    return followed, display


def test_submit_sends_the_entrypoint_env_and_id_with_the_token(
    dashboard: FakeRayDashboard,
) -> None:
    client = RayJobsClient(dashboard.url, TOKEN)
    body = submit_body("python /x.py", "tpu-trainer-1", {"RAY_DEDUP_LOGS": "0"}, {"run": "1"})
    assert client.submit(body) == "tpu-trainer-1"
    job = dashboard.jobs["tpu-trainer-1"]
    assert job.entrypoint == "python /x.py"
    assert job.runtime_env == {"env_vars": {"RAY_DEDUP_LOGS": "0"}}
    assert all(authorized for *_, authorized in dashboard.calls)
    assert TOKEN not in repr(client)


@pytest.mark.parametrize(
    "dashboard",
    [
        JobScript(
            statuses=("PENDING", "RUNNING", "FAILED"),
            chunks=("", "(RayTrainWorker pid=5) Traceback...\n", "ValueError: boom\n"),
            message="Job entrypoint command failed with exit code 1",
            driver_exit_code=1,
        )
    ],
    indirect=True,
)
def test_a_failed_job_is_reported_failed_with_its_exit_code(
    dashboard: FakeRayDashboard, tmp_path: Path
) -> None:
    followed, _ = _follow(dashboard, tmp_path)
    assert followed.end is JobEnd.FAILED and not followed.ok
    assert followed.info is not None and followed.info.status is JobStatus.FAILED
    assert "exit code 1" in followed.message
    assert "ValueError: boom" in (tmp_path / "job.log").read_text()
    assert not any(path.endswith("/stop") for _, path, _ in dashboard.calls)


@pytest.mark.parametrize("dashboard", [JobScript(statuses=("PENDING",))], indirect=True)
def test_a_job_stuck_pending_is_stopped_at_the_deadline_with_the_shape_and_the_fix(
    dashboard: FakeRayDashboard, tmp_path: Path
) -> None:
    followed, display = _follow(
        dashboard, tmp_path, Deadlines(start_s=0.3, finish_s=20.0, poll_s=0.02)
    )
    assert followed.end is JobEnd.NOT_STARTED
    assert "1 x v6e-4x4 (4 hosts x 4 chips each)" in followed.message
    assert "--tpu-topology=4x4" in followed.message
    assert ("POST", "/api/jobs/tpu-trainer-x/stop", True) in dashboard.calls
    assert dashboard.jobs["tpu-trainer-x"].status == "STOPPED"
    assert any("stopping job tpu-trainer-x" in m for m in display.messages)


@pytest.mark.parametrize(
    "dashboard",
    [
        JobScript(
            statuses=("RUNNING",),
            chunks=(
                "(TrainController pid=9) Requesting resources: {'TPU': 4} * 4\n",
                "(JaxTrainer pid=812) Failed to reserve TPU head for slice with shape: v6e-16,"
                " retrying in 10s\n",
            ),
        )
    ],
    indirect=True,
)
def test_a_running_job_whose_slice_never_comes_is_stopped_with_rays_last_word(
    dashboard: FakeRayDashboard, tmp_path: Path
) -> None:
    followed, _ = _follow(dashboard, tmp_path, Deadlines(start_s=0.3, finish_s=20.0, poll_s=0.02))
    assert followed.end is JobEnd.NOT_STARTED
    assert "Failed to reserve TPU head for slice with shape: v6e-16" in followed.message


@pytest.mark.parametrize(
    "dashboard",
    [
        JobScript(
            statuses=("RUNNING",),
            chunks=(
                "(TrainController pid=9) Started training worker group of size 1: \n",
                "(RayTrainWorker pid=5) RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: Ran out "
                "of memory on HBM, the total memory required for HLO temporaries (151.15G) "
                "exceeds available HBM (94.74G)\n",
            ),
        )
    ],
    indirect=True,
)
def test_a_fatal_error_in_the_log_stops_the_job_at_once(
    dashboard: FakeRayDashboard, tmp_path: Path
) -> None:
    followed, _ = _follow(dashboard, tmp_path)
    assert followed.end is JobEnd.FATAL
    assert followed.fatal and "fix:" in followed.message
    assert dashboard.jobs["tpu-trainer-x"].status == "STOPPED"


def test_a_wrong_or_missing_token_says_how_to_get_the_right_one(
    dashboard: FakeRayDashboard,
) -> None:
    with pytest.raises(RayJobsError) as raised:
        RayJobsClient(dashboard.url, "wrong").status("x")
    assert "rejected the token" in raised.value.message and "401" in raised.value.message
    assert "kubectl get secret" in raised.value.fix
    with pytest.raises(RayJobsError, match="has no token"):
        RayJobsClient(dashboard.url).version()


def test_an_unknown_job_is_named(dashboard: FakeRayDashboard) -> None:
    with pytest.raises(RayJobsError, match="not found"):
        RayJobsClient(dashboard.url, TOKEN).status("nope")


def test_nothing_listening_asks_whether_the_head_is_up() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = RayJobsClient(f"http://127.0.0.1:{port}", TOKEN, timeout_s=5, hint="check the tunnel")
    with pytest.raises(RayJobsError) as raised:
        client.version()
    assert "is the Ray head up?" in raised.value.message
    assert raised.value.fix == "check the tunnel"
    with pytest.raises(RayJobsError, match="not an http"):
        RayJobsClient("file:///etc/passwd").version()


def test_the_log_cursor_returns_whole_new_lines_only() -> None:
    cursor = LogCursor()
    assert cursor.new_lines("a\nb") == ["a"]
    assert cursor.new_lines("a\nbc\nd\n") == ["bc", "d"]
    assert cursor.new_lines("a\nbc\nd\n") == []
    assert cursor.new_lines("a\nbc\nd\ne") == []
    assert cursor.rest() == ["e"]
    assert cursor.new_lines("x\n") == ["x"]  # a shorter log: read again from the start


def test_job_details_are_parsed_with_times_in_seconds() -> None:
    info = parse_job(
        {
            "submission_id": "s",
            "status": "SUCCEEDED",
            "start_time": 1_795_000_000_000,
            "end_time": 1_795_000_100_000,
            "driver_exit_code": 0,
        }
    )
    assert info.status.terminal and info.end_time == 1_795_000_100.0
    with pytest.raises(RayJobsError, match="unknown job status"):
        parse_job({"status": "EXPLODED"})
