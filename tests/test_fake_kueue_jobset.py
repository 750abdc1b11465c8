"""The fake cluster's Kueue and JobSet objects carry the real controllers' conditions (Kueue
v0.19.2's reasons and flavor-assigner messages, JobSet v0.12.0's condition reasons and
messages), Kueue objects are stored and served as v1beta2, and the tool's readers
(``scheduling.kueue_reason``, ``jobset.jobset_ending``) read them as they would a real cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tpu_trainer.fakecloud import k8s
from tpu_trainer.fakecloud.crd import validate
from tpu_trainer.fakecloud.initial import initial_state
from tpu_trainer.fakecloud.kueue_admission import blocker
from tpu_trainer.fakecloud.kueue_workloads import JOB_UID_LABEL, kueue_workload_json
from tpu_trainer.fakecloud.scenario import load_scenario
from tpu_trainer.fakecloud.state import State, new_pool
from tpu_trainer.fakecloud.workloads import jobset_json, new_workload
from tpu_trainer.launchers.gke.jobset import jobset_ending, suspended_message
from tpu_trainer.launchers.gke.scheduling import kueue_reason, workload_of
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit

SCENARIO = Path(__file__).resolve().parent / "fixtures" / "scenarios" / "kueue_quota.yaml"
SLICE = Slice.parse("tpu7x-4x4x4")
NAME = "demo-run"
UNUSED = (
    "couldn't assign flavors to pod set slice-job: insufficient unused quota for "
    "google.com/tpu in flavor 1xtpu7x-128, 32 more needed"
)


def _state(**workloads: Any) -> tuple[State, dict[str, Any]]:
    state = initial_state(load_scenario(SCENARIO))
    state["workload_defaults"] = {**state["workload_defaults"], **workloads}
    wl = new_workload(
        state, NAME, SLICE, num_slices=1, zone="us-central1-c", image="i", command="c",
        parallel_flag=False,
    )  # fmt: skip
    state["workloads"][NAME] = wl
    return state, wl


def _admit(state: State) -> None:
    state["kueue_in_use"] = {}
    state["node_pools"]["np"] = new_pool(
        "np", machine_type=SLICE.machine_type, node_count=SLICE.hosts, zone="us-central1-c",
        status="RUNNING", version="v", placement_policy=SLICE.workload_policy,
    )  # fmt: skip


def test_kueue_objects_are_stored_and_served_as_v1beta2_keeping_what_was_applied() -> None:
    state: State = {"k8s": {}, "seq": 1}
    queue = k8s.cluster_queue({"1xtpu7x-128": 64})
    queue["spec"]["cohort"] = "tpus"
    assert queue["apiVersion"] == "kueue.x-k8s.io/v1beta1"  # what xpk's templates write
    assert k8s.deprecated(queue)
    k8s.put(state, queue, applied=True)
    stored = k8s.get(state, k8s.KINDS[1], k8s.CLUSTER_QUEUE)
    assert stored is not None
    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert stored["spec"]["cohortName"] == "tpus" and "cohort" not in stored["spec"]
    applied = stored["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
    assert '"apiVersion":"kueue.x-k8s.io/v1beta1"' in applied
    assert validate(stored, strict=False) == []
    assert k8s.DEPRECATED_WARNING == "Warning: This version is deprecated. Use v1beta2 instead."


def test_a_workload_held_for_quota_has_kueues_pending_condition_and_message() -> None:
    state, wl = _state()
    obj = kueue_workload_json(state, wl)
    assert obj["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    [cond] = obj["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("QuotaReserved", "False", "Pending")
    assert cond["message"] == UNUSED
    jobset = jobset_json(state, wl)
    assert obj["metadata"]["labels"][JOB_UID_LABEL] == jobset["metadata"]["uid"]
    assert workload_of(NAME, [obj]) is obj
    assert kueue_reason(obj) == UNUSED
    [suspended] = jobset["status"]["conditions"]
    assert (suspended["type"], suspended["reason"]) == ("Suspended", "SuspendedJobs")
    assert suspended_message(jobset) == "jobset is suspended"
    assert jobset["spec"]["suspend"] is True
    assert jobset_ending(jobset) is None


@pytest.mark.parametrize(
    ("change", "reason", "message"),
    [
        (
            lambda s: s["k8s"].pop(k8s.key(k8s.KINDS[2], k8s.LOCAL_QUEUE, "default")),
            "Inadmissible",
            "LocalQueue multislice-queue is terminating or missing",
        ),
        (
            lambda s: s["k8s"].pop(k8s.key(k8s.KINDS[1], k8s.CLUSTER_QUEUE, "")),
            "Inadmissible",
            "ClusterQueue cluster-queue is terminating or missing",
        ),
        (
            lambda s: s["k8s"].pop(k8s.key(k8s.KINDS[0], "1xtpu7x-128", "")),
            "Pending",
            "ClusterQueue cluster-queue is inactive",
        ),
        (
            lambda s: k8s.put(s, k8s.cluster_queue({"1xtpu7x-128": 32})),
            "Pending",
            "couldn't assign flavors to pod set slice-job: insufficient quota for google.com/tpu "
            "in flavor 1xtpu7x-128, previously considered podsets requests (0) + current podset "
            "request (64) > maximum capacity (32)",
        ),
        (
            lambda s: (
                k8s.put(s, k8s.resource_flavor("1xtpu7x-256", "tpu7x", "4x4x8")),
                k8s.put(s, k8s.cluster_queue({"1xtpu7x-256": 128})),
            ),
            "Pending",
            "couldn't assign flavors to pod set slice-job: flavor 1xtpu7x-256 doesn't match "
            "node affinity",
        ),
    ],
)
def test_kueues_reasons_for_other_misconfigurations(change: Any, reason: str, message: str) -> None:
    state, wl = _state()
    change(state)
    assert blocker(state, wl) == (reason, message)


def test_an_admitted_workload_and_its_resumed_jobset() -> None:
    state, wl = _state()
    _admit(state)
    obj = kueue_workload_json(state, wl)
    kinds = [(c["type"], c["status"], c["reason"]) for c in obj["status"]["conditions"]]
    assert kinds == [("QuotaReserved", "True", "QuotaReserved"), ("Admitted", "True", "Admitted")]
    assert (
        obj["status"]["conditions"][0]["message"] == "Quota reserved in ClusterQueue cluster-queue"
    )
    assert kueue_reason(obj) is None
    jobset = jobset_json(state, wl)
    [resumed] = jobset["status"]["conditions"]
    assert (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False",
        "ResumeJobs",
        "jobset is resumed",
    )
    assert suspended_message(jobset) is None


def _ended(exit_code: int) -> dict[str, Any]:
    state, wl = _state(exit_code=exit_code, pending_polls=0, running_polls=0)
    _admit(state)
    return jobset_json(state, wl)


def test_a_completed_jobset_says_all_jobs_completed() -> None:
    jobset = _ended(0)
    assert jobset["status"]["terminalState"] == "Completed"
    ending = jobset_ending(jobset)
    assert ending is not None and ending.succeeded
    assert (ending.reason, ending.message, ending.restarts) == (
        "AllJobsCompleted",
        "jobset completed successfully",
        0,
    )


@pytest.mark.parametrize(
    ("code", "reason", "message"),
    [
        (1, "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action"),
        (137, "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"),
    ],
)
def test_a_failed_jobset_says_why_by_xpks_failure_policy(
    code: int, reason: str, message: str
) -> None:
    jobset = _ended(code)
    assert jobset["status"]["terminalState"] == "Failed"
    ending = jobset_ending(jobset)
    assert ending is not None and not ending.succeeded
    assert ending.reason == reason
    assert ending.message == f"{message} (first failed job: {NAME}-slice-job-0)"
    assert ending.describe(NAME) == (
        f"JobSet {NAME} failed ({reason}): {message} (first failed job: {NAME}-slice-job-0); "
        "restarts: 0"
    )


def test_the_reader_takes_failed_jobs_and_restarts_as_jobset_writes_them() -> None:
    jobset = {
        "status": {
            "restarts": 2,
            "conditions": [
                {"type": "Suspended", "status": "False", "reason": "ResumeJobs"},
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "FailedJobs",
                    "message": "jobset failed due to one or more job failures "
                    "(first failed job: w-slice-job-1)",
                },
            ],
        }
    }
    ending = jobset_ending(jobset)
    assert ending is not None
    assert ending.describe("w") == (
        "JobSet w failed (FailedJobs): jobset failed due to one or more job failures "
        "(first failed job: w-slice-job-1); restarts: 2"
    )
    not_yet = {"status": {"conditions": [{"type": "Completed", "status": "False"}]}}
    assert jobset_ending(not_yet) is None and jobset_ending(None) is None
