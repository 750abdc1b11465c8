"""The pre-training checklist as a pure function of what the cloud said."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from conftest import CONFIG, RECIPES, plan_for
from tpu_trainer.config.load import read_config
from tpu_trainer.infra.gcloud import Cluster, NodePool
from tpu_trainer.launchers.gke.kueue import cluster_queue, local_queue, resource_flavor
from tpu_trainer.launchers.gke.preflight import Observed, checks, multislice_checks
from tpu_trainer.plan.plan import Level

pytestmark = pytest.mark.unit


def _pool(zone: str = "us-central1-ai1a", status: str = "RUNNING") -> NodePool:
    return NodePool(
        "demo-cluster-np-0",
        status,
        "tpu7x-standard-4t",
        64,
        (zone,),
        None,
        "tpu7x-512-4x8x8-placement-policy",
        {},
        "1.34",
    )


def _cluster(datapath: str = "ADVANCED_DATAPATH", multi: bool = True) -> Cluster:
    return Cluster("demo-cluster", "us-central1", "RUNNING", "1.34", datapath, multi, {})


def _ready(plan_slices: int = 1, **over: Any) -> Observed:
    plan = plan_for(RECIPES["storage"], num_slices=plan_slices)
    s = plan.slice
    key, value = s.configmap_entry(plan_slices)
    base: dict[str, Any] = {
        "cluster": _cluster(),
        "pools": [_pool()],
        "policy_exists": True,
        "flavor": resource_flavor(s, plan_slices),
        "cluster_queue": cluster_queue(s, plan_slices),
        "configmap": {"data": {key: value}},
        "local_queue": local_queue(),
    }
    base.update(over)
    return Observed(**base)


def _by_name(observed: Observed, slices: int = 1) -> dict[str, Any]:
    plan = plan_for(RECIPES["storage"], num_slices=slices)
    return {c.name: c for c in checks(plan, read_config(CONFIG), observed)}


def test_preflight_all_six_pass_on_a_ready_cluster() -> None:
    results = _by_name(_ready())
    assert set(results) == {
        "placement-policy",
        "kueue-resourceflavor",
        "kueue-clusterqueue",
        "kueue-localqueue",
        "xpk-configmap",
        "node-pool",
        "submit-zone",
    }
    assert {c.status for c in results.values()} == {Level.PASS}


def test_preflight_each_missing_piece_fails_with_its_fix() -> None:
    results = _by_name(
        _ready(
            policy_exists=False, flavor=None, cluster_queue=None, configmap={"data": {}}, pools=[]
        )
    )
    assert results["placement-policy"].status is Level.FAIL
    assert (
        "resource-policies create workload-policy tpu7x-512-4x8x8-placement-policy"
        in results["placement-policy"].fix
    )
    assert results["kueue-resourceflavor"].status is Level.FAIL
    assert "kubectl apply -f -" in results["kueue-resourceflavor"].fix
    assert results["kueue-clusterqueue"].status is Level.FAIL
    assert results["xpk-configmap"].status is Level.FAIL
    assert '"tpu7x-512":"64"' in results["xpk-configmap"].fix
    assert results["node-pool"].status is Level.FAIL


def test_preflight_zone_mismatch_is_caught() -> None:
    results = _by_name(_ready(pools=[_pool(zone="us-central1-c")]))
    assert results["submit-zone"].status is Level.FAIL
    assert "--zone us-central1-c" in results["submit-zone"].fix


def test_preflight_multislice_reports_a_cluster_that_must_be_recreated() -> None:
    plan = plan_for(RECIPES["storage"], num_slices=2)
    results = {c.name: c for c in multislice_checks(plan, _cluster("LEGACY_DATAPATH", False))}
    assert results["multislice-dataplane-v2"].status is Level.FAIL
    assert "recreate the cluster" in results["multislice-dataplane-v2"].fix
    assert results["multislice-multi-networking"].status is Level.FAIL
    assert results["multislice-grpc-interfaces"].status is Level.FAIL
    assert results["multislice-num-slices"].status is Level.PASS


def test_preflight_multislice_dcn_product_must_match_slices() -> None:
    plan = plan_for(RECIPES["storage"], num_slices=2, overrides=(("dcn_data_parallelism", "3"),))
    results = {c.name: c for c in multislice_checks(plan, _cluster())}
    assert results["multislice-dcn"].status is Level.FAIL
    assert "dcn_data_parallelism=2" in results["multislice-dcn"].fix


def test_two_slices_need_two_running_pools() -> None:
    second = replace(_pool(), name="demo-cluster-np-1")
    one = _by_name(_ready(2), slices=2)["node-pool"]
    assert one.status is Level.FAIL
    assert "1 of 2 RUNNING node pools" in one.message
    assert "xpk cluster adapt" not in one.fix
    assert "--num-slices 2" in one.fix and "node-pools create demo-cluster-np-1" in one.fix
    two = _by_name(_ready(2, pools=[_pool(), second]), slices=2)["node-pool"]
    assert two.status is Level.PASS


def test_unset_dcn_parallelism_spreads_over_the_slices() -> None:
    plan = plan_for(RECIPES["storage"], num_slices=2)
    results = {c.name: c for c in multislice_checks(plan, _cluster())}
    assert results["multislice-dcn"].status is Level.PASS
