"""The real kubectl against the emulated Kubernetes API server sees the scenario's workloads:
a JobSet applied through the API becomes a workload of the model, Kueue's Workload holds it
with Kueue's message while quota is short, a ClusterQueue applied through the API gives the
quota, its pods go Pending, Running, then Completed, ``kubectl logs -f`` streams worker 0's
scenario log to its end, and ``kubectl delete jobset`` takes workload and pods away."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_simkube_kubectl import Cluster, jobset
from tpu_trainer.fakecloud import crd
from tpu_trainer.fakecloud.initial import init_state
from tpu_trainer.fakecloud.scenario import load_scenario, parse_scenario
from tpu_trainer.fakecloud.state import read_state, transaction
from tpu_trainer.fakecloud.workloads import jobset_uid, log_of, new_workload
from tpu_trainer.launchers.gke import kueue
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

QUOTA_SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "kueue_quota.yaml"
SCENARIO = {
    "project": "demo-project",
    "region": "us-central1",
    "cluster": {"name": "demo-cluster"},
    "node_pools": [
        {
            "name": "tpu-pool",
            "machine_type": "ct6e-standard-4t",
            "node_count": 2,
            "zone": "us-central1-a",
            "tpu_topology": "2x4",
        },
    ],
    "kueue": {"resource_flavors": ["1xv6e-8"], "cluster_queue": {"flavors": {"1xv6e-8": 4}}},
    "workloads": {"pending_polls": 1, "running_polls": 1, "exit_code": 0},
}
JOB_UID = "kueue.x-k8s.io/job-uid"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"


class Kube(Cluster):
    def run(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.kubectl(*args, stdin=stdin)

    def json(self, *args: str) -> Any:
        done = self.kubectl(*args, "-o", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[Kube]:
    state = init_state(parse_scenario(SCENARIO), tmp_path / "state.json")
    with KubeServer(state, idle_seconds=120) as server:
        yield Kube(tmp_path, server)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def _valid(*objs: dict[str, Any]) -> None:
    for obj in objs:
        assert crd.validate(obj) == [], obj["metadata"]["name"]


def test_a_jobset_runs_through_kueue_to_completion_and_is_deleted(kube: Kube) -> None:
    sent = jobset("train-run")
    rules = [{"action": "FailJobSet", "onJobFailureReasons": ["PodFailurePolicy"]}]  # as xpk's
    sent["spec"]["failurePolicy"]["rules"] = rules
    made = kube.run("apply", "-f", "-", stdin=json.dumps(sent))
    assert made.stdout.strip() == "jobset.jobset.x-k8s.io/train-run created", made.stderr
    held = kube.json("get", "jobset", "train-run")
    _valid(held)
    assert held["metadata"]["uid"] == jobset_uid("train-run")
    assert held["spec"]["suspend"] is True
    assert held["spec"]["failurePolicy"]["rules"][0]["name"] == "failurePolicyRule0"  # webhook
    assert _condition(held, "Suspended")["reason"] == "SuspendedJobs"
    waiting = kube.json("get", "workloads", "-l", f"{JOB_UID}={jobset_uid('train-run')}")
    assert len(waiting["items"]) == 1
    _valid(*waiting["items"])
    reserved = _condition(waiting["items"][0], "QuotaReserved")
    assert (reserved["status"], reserved["message"]) == (
        "False",
        "couldn't assign flavors to pod set slice-job: insufficient quota for google.com/tpu "
        "in flavor 1xv6e-8, previously considered podsets requests (0) + current podset "
        "request (8) > maximum capacity (4)",
    )
    none = kube.run("get", "pods", "-l", f"{JOBSET_NAME}=train-run")
    assert none.stderr.strip() == "No resources found in default namespace."

    queue = kueue.cluster_queue(Slice.parse("v6e-8"), 1)  # the scenario's queue, 8 chips
    raised = kube.run("apply", "-f", "-", stdin=json.dumps(queue))
    assert raised.stdout.strip() == "clusterqueue.kueue.x-k8s.io/cluster-queue configured"
    phases = []
    for _ in range(2):
        pods = kube.json("get", "pods", "-l", f"{JOBSET_NAME}=train-run")["items"]
        phases.append([p["status"]["phase"] for p in pods])
    assert phases == [["Pending", "Pending"], ["Running", "Running"]]
    names = [p["metadata"]["name"] for p in pods]
    assert all(n.startswith("train-run-slice-job-0-") for n in names)
    assert [c["name"] for c in pods[0]["spec"]["containers"]] == ["jax-tpu"]
    admitted = kube.json("get", "workloads", "-l", f"{JOB_UID}={jobset_uid('train-run')}")
    assert _condition(admitted["items"][0], "Admitted")["status"] == "True"

    follow = kube.run("logs", names[0], "--container=jax-tpu", "--follow")
    assert follow.returncode == 0, follow.stderr
    wl = read_state(kube.server.state_path)["workloads"]["train-run"]
    assert follow.stdout == log_of(wl, 0, 0, "jax-tpu")
    assert "completed step" in follow.stdout
    tail = kube.run("logs", names[1], "--container=jax-tpu", "--tail=1")
    assert tail.stdout == log_of(wl, 0, 1, "jax-tpu").splitlines(keepends=True)[-1]

    table = kube.run("get", "jobsets")
    header, row = table.stdout.splitlines()
    assert header.split()[:2] == ["NAME", "TERMINALSTATE"]
    assert row.split()[:5] == ["train-run", "Completed", "0", "True", "false"]
    queued = kube.run("get", "workloads").stdout.splitlines()
    assert queued[0].split()[:5] == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED"]
    assert queued[1].split()[1:4] == ["multislice-queue", "cluster-queue", "True"]
    done = kube.json("get", "jobset", "train-run")
    _valid(done)
    completed = _condition(done, "Completed")
    assert (completed["status"], completed["reason"]) == ("True", "AllJobsCompleted")

    gone = kube.run("delete", "jobset", "train-run")
    assert gone.stdout.strip() == 'jobset.jobset.x-k8s.io "train-run" deleted', gone.stderr
    assert read_state(kube.server.state_path)["workloads"] == {}
    assert kube.json("get", "pods")["items"] == []
    assert kube.json("get", "workloads")["items"] == []
    assert kube.run("get", "jobset", "train-run").returncode == 1


def test_kueues_message_for_a_workload_xpk_created_and_the_scenarios_objects(
    tmp_path: Path,
) -> None:
    state = init_state(load_scenario(QUOTA_SCENARIO), tmp_path / "state.json")
    with transaction(state) as s:
        s["workloads"]["demo-run"] = new_workload(
            s, "demo-run", Slice.parse("tpu7x-4x4x4"), num_slices=1, zone="us-central1-c",
            image="img", command="true", parallel_flag=False,
        )  # fmt: skip
    with KubeServer(state, idle_seconds=120) as server:
        kube = Kube(tmp_path, server)
        found = kube.json("get", "workloads", f"--selector={JOB_UID}={jobset_uid('demo-run')}")
        _valid(*found["items"])
        assert _condition(found["items"][0], "QuotaReserved")["message"] == (
            "couldn't assign flavors to pod set slice-job: insufficient unused quota for "
            "google.com/tpu in flavor 1xtpu7x-128, 32 more needed"
        )
        held = kube.json("get", "jobset", "demo-run")
        _valid(held)
        assert held["status"]["conditions"][0]["reason"] == "SuspendedJobs"
        assert kube.run("logs", "demo-run-slice-job-0-0-x", "-c", "jax-tpu").returncode == 1
        flavors = kube.json("get", "resourceflavors")["items"]
        assert [f["metadata"]["name"] for f in flavors] == ["1xtpu7x-128"]
        configmap = kube.json("get", "configmap", "demo-cluster-resources-configmap")
        assert configmap["data"] == {"tpu7x-128": "16"}
        queue = kube.json("get", "clusterqueue", "cluster-queue")
        quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
        assert quota["nominalQuota"] == 64


def test_a_hung_worker_0_is_followed_silently_until_its_jobset_is_deleted(tmp_path: Path) -> None:
    scenario = {
        **SCENARIO,
        "kueue": {"resource_flavors": ["1xv6e-8"], "cluster_queue": {"flavors": {"1xv6e-8": 8}}},
        "workloads": {"pending_polls": 0, "hang_after_step": 1},
    }
    state = init_state(parse_scenario(scenario), tmp_path / "state.json")
    with KubeServer(state, idle_seconds=120) as server:
        kube = Kube(tmp_path, server)
        assert kube.run("apply", "-f", "-", stdin=json.dumps(jobset("hung"))).returncode == 0
        pods = kube.json("get", "pods", "-l", f"{JOBSET_NAME}=hung")["items"]
        assert {p["status"]["phase"] for p in pods} == {"Running"}
        follow = kube.follow("logs", "-f", pods[0]["metadata"]["name"], "-c", "jax-tpu")
        try:
            assert follow.stdout is not None
            lines: list[str] = []
            while not lines or "completed step: 1," not in lines[-1]:
                lines.append(follow.stdout.readline())
                assert lines[-1], "the log ended before step 1's line"
            with pytest.raises(subprocess.TimeoutExpired):
                follow.wait(timeout=1.0)  # silent and still open, as a hung host is
            assert kube.run("delete", "jobset", "hung").returncode == 0
            rest, _ = follow.communicate(timeout=30)
        finally:
            follow.kill()
        assert rest == ""
        assert follow.returncode == 0
