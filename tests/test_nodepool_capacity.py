"""Pure provisioning decisions: the gcloud fallback command, pool names, reservation verdicts."""

from __future__ import annotations

import shlex

import pytest

from conftest import GOLDEN, check_golden
from tpu_trainer.launchers.gke.capacity import Survey, Verdict, judge, order
from tpu_trainer.launchers.gke.nodepool import (
    NodePoolRequest,
    gcloud_create_argv,
    machine_types,
    pool_matches,
    run_of_tool_pool,
    tool_pool_name,
    xpk_pool_names,
)
from tpu_trainer.plan.slices import Slice

pytestmark = pytest.mark.unit


def _request(device: str, machine_type: str = "tpu7x-ultranet-4t") -> NodePoolRequest:
    s = Slice.parse(device)
    return NodePoolRequest(
        name=tool_pool_name("a1b2c3d4", s),
        cluster="demo-cluster",
        project="demo-project",
        region="us-central1",
        zone="us-central1-ai1a",
        reservation="demo-reservation-a",
        slice=s,
        node_version="1.34.1-gke.1829001",
        machine_type=machine_type,
    )


def test_gcloud_fallback_for_tpu7x_multi_host_matches_golden(update_golden: bool) -> None:
    argv = gcloud_create_argv(_request("tpu7x-4x4x8"))
    check_golden(
        GOLDEN / "gcloud_fallback_tpu7x-4x4x8.txt",
        " \\\n  ".join(shlex.quote(a) for a in argv) + "\n",
        update_golden,
    )


def test_gcloud_fallback_for_tpu7x_has_the_seed_flags_and_none_of_the_forbidden() -> None:
    argv = gcloud_create_argv(_request("tpu7x-4x4x8"))
    assert argv[:6] == [
        "gcloud",
        "beta",
        "container",
        "node-pools",
        "create",
        "tpt-a1b2c3d4-tpu7x-256",
    ]
    assert "--placement-policy=tpu7x-256-4x4x8-placement-policy" in argv
    assert "--num-nodes=32" in argv
    assert "--location=us-central1" in argv and "--node-locations=us-central1-ai1a" in argv
    assert "--node-version=1.34.1-gke.1829001" in argv
    assert "--machine-type=tpu7x-ultranet-4t" in argv
    for forbidden in (
        "--placement-type",
        "--tpu-topology",
        "--no-enable-autoupgrade",
        "--zone",
        "--region",
    ):
        assert not any(a.startswith(forbidden) for a in argv), forbidden


def test_gcloud_fallback_for_v6e_multi_host_uses_tpu_topology() -> None:
    argv = gcloud_create_argv(_request("v6e-4x4", "ct6e-standard-4t"))
    assert "--tpu-topology=4x4" in argv
    assert not any(a.startswith("--placement-policy") for a in argv)


def test_gcloud_fallback_single_host_takes_no_topology_or_policy() -> None:
    argv = gcloud_create_argv(_request("tpu7x-2x2x1", "tpu7x-standard-4t"))
    assert "--num-nodes=1" in argv
    assert not any(a.startswith(("--placement", "--tpu-topology")) for a in argv)


def test_xpk_pool_names_take_first_free_index() -> None:
    assert xpk_pool_names("c", ["default-pool"], 1) == ["c-np-0"]
    assert xpk_pool_names("c", ["c-np-0", "default-pool"], 2) == ["c-np-0", "c-np-1"]


def test_tool_pool_names_are_short_and_map_back_to_their_run() -> None:
    name = tool_pool_name("0123abcd-rest", Slice.parse("tpu7x-8x8x16"))
    assert name == "tpt-0123abcd-tpu7x-2048"
    assert len(name) <= 40
    assert run_of_tool_pool(name) == "0123abcd"
    assert run_of_tool_pool("demo-cluster-np-0") is None


def test_a_multi_slice_run_names_one_pool_per_slice_all_mapping_back_to_it() -> None:
    s = Slice.parse("tpu7x-8x8x16")
    names = [tool_pool_name("0123abcd-rest", s, i, 2) for i in range(2)]
    assert names == ["tpt-0123abcd-tpu7x-2048-0", "tpt-0123abcd-tpu7x-2048-1"]
    assert all(len(n) <= 40 and run_of_tool_pool(n) == "0123abcd" for n in names)


def test_pool_matching_needs_machine_type_hosts_and_policy() -> None:
    s = Slice.parse("tpu7x-4x4x8")
    allowed = machine_types(s, None)
    assert pool_matches("tpu7x-standard-4t", 32, None, s.workload_policy, s, allowed)
    assert pool_matches("tpu7x-ultranet-4t", 32, None, s.workload_policy, s, allowed)
    assert not pool_matches("tpu7x-standard-4t", 16, None, s.workload_policy, s, allowed)
    assert not pool_matches("tpu7x-standard-4t", 32, None, "other-policy", s, allowed)
    assert not pool_matches("e2-standard-8", 32, None, s.workload_policy, s, allowed)
    assert machine_types(s, "tpu7x-ultranet-4t")[0] == "tpu7x-ultranet-4t"


@pytest.mark.parametrize(
    ("survey", "verdict"),
    [
        (Survey("r", "us-central1-ai1a", "READY", 40), Verdict.TRY),
        (Survey("r", "us-central1-ai1a", "READY", None), Verdict.TRY),
        (Survey("r", "us-central1-ai1a", "READY", 40, health="DEGRADED"), Verdict.DEGRADED),
        (Survey("r", "us-central1-ai1a", "READY", 40, health="HEALTHY"), Verdict.TRY),
        (Survey("r", "us-central1-ai1a", "READY", 31), Verdict.TOO_SMALL),
        (Survey("r", "europe-west4-b", "READY", 40), Verdict.OTHER_REGION),
        (Survey("r", None, None, None, found=False), Verdict.NOT_FOUND),
    ],
)
def test_reservation_verdicts(survey: Survey, verdict: Verdict) -> None:
    assert judge(survey, needed_hosts=32, region="us-central1") is verdict


def test_order_keeps_priority() -> None:
    surveys = [Survey("a", "us-central1-a", "READY", 0), Survey("b", "us-central1-b", "READY", 99)]
    assert [(c.survey.name, c.usable) for c in order(surveys, 32, "us-central1")] == [
        ("a", False),
        ("b", True),
    ]
