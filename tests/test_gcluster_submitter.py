"""gcluster as the second GKE submitter, piece by piece: the flag model's other sub-commands,
the gcluster stand-in of the simulated cloud (it parses with that model and acts on the shared
workload model), teardown cancelling with the tool that submitted, and the workload policy
gcluster may make for itself recorded like everything the run makes."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.fakecloud import gcluster as fake_gcluster
from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.initial import initial_state
from tpu_trainer.fakecloud.kueue_admission import blocker
from tpu_trainer.fakecloud.kueue_workloads import kueue_workload_json
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.fakecloud.state import STATE_ENV, read_state, write_state
from tpu_trainer.fakecloud.workloads import jobset_json, pods
from tpu_trainer.infra.gcluster_flags import check_gcluster_command, load_model
from tpu_trainer.infra.runner import CommandResult
from tpu_trainer.infra.xpk import Xpk
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke.submitter import (
    GCLUSTER,
    SUBMITTER_KEY,
    GclusterSubmitter,
    OwnPolicy,
    Target,
    WaitOutcome,
    XpkSubmitter,
    gcluster_cancel_argv,
)
from tpu_trainer.launchers.gke.teardown import Teardown
from tpu_trainer.store.db import ResourceState, RunStore

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "tests" / "fixtures" / "scenarios" / "failover.yaml"
POLICY = "tpu7x-128-4x4x4-placement-policy"
NAME = "demo-gemmoe-1124-1233"
TARGET = Target(workload=NAME, cluster="demo-cluster", project="demo-project", zone="us-central1-c")
SUBMIT = [
    "job", "submit", "--skip-prereqs", "--queue=multislice-queue", "--cluster=demo-cluster",
    "--project=demo-project", "--location=us-central1-c", "--priority=medium", "--restarts=0",
    "--compute-type=tpu7x", "--topology=4x4x4",
    f"--node-constraint=cloud.google.com/placement-policy-name={POLICY}", "--num-slices=1",
    "--image=gcr.io/demo-project/maxtext-runner", "--gke-namespace=default", f"--name={NAME}",
    "--command=python3 -m maxtext.trainers.pre_train.train steps=30",
]  # fmt: skip


# ---- the flag model's other sub-commands -------------------------------------------------------
def test_the_model_holds_cancel_list_and_logs_from_the_cobra_sources() -> None:
    model = load_model()
    assert sorted(model.subcommands) == ["cancel", "list", "logs"]
    assert model.subcommands["cancel"].args == 1
    assert model.subcommands["cancel"].flags == {}
    assert model.subcommands["logs"].flags["follow"].short == "f"
    assert "Suspended" in model.subcommands["list"].flags["status"].choices
    assert set(model.flags_of("cancel")) == {"cluster", "location", "project"}


def test_the_cancel_line_teardown_runs_is_one_gcluster_accepts() -> None:
    verdict = check_gcluster_command(gcluster_cancel_argv(TARGET))
    assert verdict.ok, verdict.problems
    assert verdict.command == "cancel"
    assert verdict.positional == (NAME,)
    assert verdict.value("location") == "us-central1-c"


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["gcluster", "job", "cancel", "--cluster=c"], "accepts 1 arg(s), received 0"),
        (["gcluster", "job", "cancel", "a", "b"], "accepts 1 arg(s), received 2"),
        (["gcluster", "job", "cancel", "a", "--zone=z"], "unknown flag: --zone"),
        (["gcluster", "job", "list", "--status=Done"], "allowed values are Pending"),
        (["gcluster", "job", "delete", "a"], 'unknown command "delete" for "gcluster job"'),
    ],
)
def test_bad_sub_command_lines_say_what_gcluster_would_refuse(
    argv: list[str], problem: str
) -> None:
    verdict = check_gcluster_command(argv)
    assert not verdict.ok
    assert any(problem in p for p in verdict.problems), verdict.problems


_GO = """
var CancelJobCmd = &cobra.Command{
\tUse:          "cancel [job-name]",
\tArgs:         cobra.ExactArgs(1),
}
func init() {
\tCancelJobCmd.Flags().BoolVarP(&force, "force", "F", false, "Cancel without asking")
\tCancelJobCmd.Flags().StringVar(&mode, "mode", "", "How to cancel")
\tOtherCmd.Flags().StringVar(&x, "other", "", "Not this command's")
}
func check() error {
\treturn fmt.Errorf("invalid value for --mode: %s. Allowed values are: Fast, Slow", mode)
}
"""


def test_the_builder_reads_a_sub_command_file() -> None:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from build_gcluster_flags import subcommand_of
    finally:
        sys.path.pop(0)
    word, entry = subcommand_of(_GO)
    assert word == "cancel"
    assert entry == {
        "args": 1,
        "flags": {
            "force": {"kind": "bool", "short": "F"},
            "mode": {"kind": "string", "choices": ["Fast", "Slow"]},
        },
    }


# ---- the gcluster stand-in ---------------------------------------------------------------------
@pytest.fixture
def cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "state.json"
    state = initial_state(load_scenario(SCENARIO))
    state["resource_policies"] = {}
    k8s.put(state, k8s.local_queue())  # what the tool's configure stage applies
    write_state(path, state)
    monkeypatch.setenv(STATE_ENV, str(path))
    return path


def _gcluster(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = fake_gcluster.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_submit_makes_gclusters_jobset_and_its_workload_policy(
    cloud: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _gcluster(SUBMIT, capsys)
    assert code == 0, err
    assert "gcluster job submit workflow completed." in out
    assert f"Created workload policy '{POLICY}'" in out
    state = read_state(cloud)
    assert POLICY in state["resource_policies"]
    wl = state["workloads"][NAME]
    assert wl["submitter"] == GCLUSTER
    assert wl["containers"] == ["workload-container-1", "workload-container-2"]
    jobset = jobset_json(state, wl)
    assert jobset["metadata"]["labels"]["gcluster.google.com/workload"] == NAME
    assert jobset["spec"]["replicatedJobs"][0]["name"] == "main-job"
    state["workloads"][NAME]["reads"] = 5  # admitted or not, the pods' names are gcluster's
    names = [p["metadata"]["name"] for p in pods(state, NAME)]
    assert all(n.startswith(f"{NAME}-main-job-0-") for n in names), names


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (["--bogus=1"], "Error: unknown flag: --bogus"),
        ([f"--name={'a' * 29}"], "workload name cannot exceed 28 characters"),
        (["--name=Bad_Name"], "is not a valid name"),
        (["--num-slices=two"], 'invalid argument "two" for "--num-slices" flag'),
    ],
)
def test_a_line_gcluster_would_refuse_fails_and_changes_nothing(
    cloud: Path, capsys: pytest.CaptureFixture[str], change: list[str], problem: str
) -> None:
    before = read_state(cloud)["workloads"]
    code, _, err = _gcluster([*SUBMIT, *change], capsys)
    assert code == 1
    assert problem in err
    assert read_state(cloud)["workloads"] == before


def test_without_its_local_queue_submit_stops_at_gclusters_prompt_on_a_closed_stdin(
    cloud: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """gcluster offers to create a missing LocalQueue only at a yes/no prompt: with no terminal
    (the tool runs it with standard input closed) it ends with EOF and submits nothing."""
    state = read_state(cloud)
    state["k8s"].pop(k8s.key(k8s.KINDS[2], k8s.LOCAL_QUEUE, "default"))
    write_state(cloud, state)
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    code, out, err = _gcluster(SUBMIT, capsys)
    assert code == 1
    assert "LocalQueue 'multislice-queue' does not exist. Do you want gcluster to create" in out
    assert err.endswith(": EOF\n")
    assert read_state(cloud)["workloads"] == {}
    monkeypatch.setattr(sys, "stdin", io.StringIO("n\n"))
    code, _, err = _gcluster(SUBMIT, capsys)
    assert code == 1
    assert "user declined to create default queues" in err


def test_kueue_names_a_gcluster_jobsets_pod_set_main_job(
    cloud: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _gcluster(SUBMIT, capsys)[0] == 0
    state = read_state(cloud)
    wl = state["workloads"][NAME]
    reason, message = blocker(state, wl) or ("", "")
    assert reason == "Inadmissible"  # the failover scenario has no ClusterQueue yet
    k8s.put(state, k8s.resource_flavor("1xv6e-256", "tpu-v6e-slice", "16x16"))
    k8s.put(state, k8s.cluster_queue({"1xv6e-256": 256}))  # a flavor for another slice
    reason, message = blocker(state, wl) or ("", "")
    assert message.startswith("couldn't assign flavors to pod set main-job: ")
    workload = kueue_workload_json(state, wl)
    assert workload["spec"]["podSets"][0]["name"] == "main-job"


@pytest.mark.usefixtures("cloud")
def test_a_second_submit_of_the_name_is_refused_as_gcluster_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _gcluster(SUBMIT, capsys)[0] == 0
    code, _, err = _gcluster(SUBMIT, capsys)
    assert code == 1
    assert f"job with name '{NAME}' already exists in state 'Pending'" in err
    assert f"gcluster job cancel {NAME} --cluster demo-cluster" in err


def test_cancel_deletes_the_job_and_a_missing_one_is_not_found(
    cloud: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _gcluster(SUBMIT, capsys)[0] == 0
    cancel = gcluster_cancel_argv(TARGET)
    code, out, _ = _gcluster(cancel, capsys)
    assert code == 0
    assert f"Cancel operation on Job '{NAME}' completed successfully." in out
    assert read_state(cloud)["workloads"] == {}
    code, _, err = _gcluster(cancel, capsys)
    assert code == 1
    assert f"Error: jobset {NAME} not found in any namespace" in err


def test_a_cluster_gcluster_cannot_reach_fails_the_submit(
    cloud: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [w.replace("--cluster=demo-cluster", "--cluster=other") for w in SUBMIT]
    code, _, err = _gcluster(argv, capsys)
    assert code == 1
    assert "cluster 'other' not found" in err
    assert read_state(cloud)["workloads"] == {}


# ---- teardown and the policy gcluster makes ----------------------------------------------------
class _Runner:
    """Records each command and answers from a table of first words."""

    def __init__(self, answers: dict[str, CommandResult] | None = None) -> None:
        self.calls: list[list[str]] = []
        self.answers = answers or {}

    def run(self, argv: list[str], **_kw: Any) -> CommandResult:
        self.calls.append(list(argv))
        key = " ".join(argv[:3])
        return self.answers.get(key, CommandResult(tuple(argv), 0, "", "", 0.0))


class _Gcloud:
    def __init__(self, *exists: bool) -> None:
        self.answers = list(exists)
        self.asked = 0

    def resource_policy_exists(self, name: str, region: str) -> bool:
        assert (name, region) == (POLICY, "us-central1")
        self.asked += 1
        return self.answers.pop(0)

    def node_pools(self, cluster: str, region: str) -> list[Any]:
        assert (cluster, region) == ("demo-cluster", "us-central1")
        return []


def _store(tmp_path: Path) -> RunStore:
    tmp_path.mkdir(parents=True, exist_ok=True)
    store = RunStore(tmp_path / "runs.db")
    store.create_run(
        "r1", model="m", request="r", launcher=LaunchPath.XPK, device_type="tpu7x-4x4x4",
        precision="bf16", project="demo-project", cluster="demo-cluster", region="us-central1",
        zone=None, plan_json=None,
    )  # fmt: skip
    return store


def test_teardown_cancels_a_gcluster_workload_with_gcluster(tmp_path: Path) -> None:
    store = _store(tmp_path)
    for submitter in (GCLUSTER, None):
        detail = {"zone": "us-central1-c", **({SUBMITTER_KEY: submitter} if submitter else {})}
        rid = store.resource_intent(
            "r1", kind="workload", name=f"w-{submitter}", project="demo-project",
            location="us-central1-c", cluster="demo-cluster", detail=detail,
        )  # fmt: skip
        store.resource_state(rid, ResourceState.CREATED)
    runner = _Runner()
    teardown = Teardown(store, _Gcloud(), Xpk(runner), SilentDisplay())  # type: ignore[arg-type]
    report = teardown.run("r1")
    assert sorted(report.deleted) == ["workload w-None", "workload w-gcluster"]
    assert [
        "gcluster", "job", "cancel", "w-gcluster", "--cluster=demo-cluster",
        "--location=us-central1-c", "--project=demo-project",
    ] in runner.calls  # fmt: skip
    # stored before the submitter was recorded: an xpk workload, deleted as xpk deletes it
    assert ["kubectl", "delete", "jobset", "w-None", "--namespace=default"] in runner.calls


def test_a_job_gcluster_no_longer_finds_is_recorded_as_gone(tmp_path: Path) -> None:
    store = _store(tmp_path)
    rid = store.resource_intent(
        "r1", kind="workload", name=NAME, project="p", location="z", cluster="c",
        detail={SUBMITTER_KEY: GCLUSTER},
    )  # fmt: skip
    store.resource_state(rid, ResourceState.CREATED)
    gone = CommandResult((), 1, "", f"Error: jobset {NAME} not found in any namespace\n", 0.0)
    runner = _Runner({"gcluster job cancel": gone})
    report = Teardown(store, _Gcloud(), Xpk(runner), SilentDisplay()).run("r1")  # type: ignore[arg-type]
    assert report.already_gone == [f"workload {NAME}"]
    assert not report.failed


def test_the_policy_gcluster_makes_for_itself_is_recorded_and_one_already_there_is_not(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path)
    gcluster = GclusterSubmitter(_Runner())  # type: ignore[arg-type]
    made = _Gcloud(False, True)  # missing before the submit, there after it
    own = OwnPolicy(store, made, "r1", "demo-project", "us-central1")  # type: ignore[arg-type]
    rid = own.before_submit(gcluster, POLICY)
    assert rid is not None
    assert [r.state for r in store.resources("r1")] == [ResourceState.MAYBE]
    own.after_submit(rid, POLICY)
    (res,) = store.resources("r1")
    assert (res.kind, res.name, res.state) == ("workload-policy", POLICY, ResourceState.CREATED)
    # held by the run now: not asked again; xpk never makes one of its own
    assert own.before_submit(gcluster, POLICY) is None
    assert made.asked == 2
    xpk = XpkSubmitter(_Runner())  # type: ignore[arg-type]
    assert OwnPolicy(store, _Gcloud(), "r1", "p", "us-central1").before_submit(xpk, POLICY) is None  # type: ignore[arg-type]
    there = _Gcloud(True)
    other = _store(tmp_path / "b")
    assert OwnPolicy(other, there, "r1", "p", "us-central1").before_submit(gcluster, POLICY) is None  # type: ignore[arg-type]
    assert other.resources("r1") == []


def test_both_submitters_wait_on_the_jobsets_own_condition_and_run_nothing_for_it() -> None:
    from tpu_trainer.infra.poll import FakeClock
    from tpu_trainer.launchers.gke.jobset import JobSetEnding

    target = Target(workload="w", cluster="demo-cluster", project="p", zone="us-central1-a")
    for kind in (XpkSubmitter, GclusterSubmitter):
        runner = _Runner()
        reads: list[JobSetEnding | None] = [
            JobSetEnding("Failed", "FailedJobs", "x", 0),
            None,
            None,
        ]
        waiter = kind(runner, poll_seconds=5, clock=FakeClock())  # type: ignore[arg-type]
        assert waiter.wait(target, reads.copy().pop, 60) is WaitOutcome.FAILED
        assert runner.calls == []
        clock = FakeClock()
        never = kind(runner, poll_seconds=5, clock=clock)  # type: ignore[arg-type]
        assert never.wait(target, lambda: None, 60) is WaitOutcome.TIMEOUT
        assert clock.now() >= 60
