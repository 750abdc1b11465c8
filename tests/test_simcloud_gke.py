"""The emulated GKE API behind the real gcloud: routing, schemas, node-pool states, errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tpu_trainer.fakecloud.gke_text import EXHAUSTED
from tpu_trainer.fakecloud.state import advance, transaction
from tpu_trainer.simcloud.discovery import load_api
from tpu_trainer.simcloud.local import LocalCloud, serve
from tpu_trainer.simcloud.schema import problems
from tpu_trainer.simcloud.state_gke import PoolPlan, StateGke

pytestmark = pytest.mark.e2e

SCENARIO = {
    "project": "p",
    "region": "us-central1",
    "cluster": {"name": "c"},
    "reservations": [
        {"name": "gone", "zone": "us-central1-a", "host_count": 8, "capacity": "exhausted"}
    ],
}
STOCKOUT = EXHAUSTED.format(where="projects/p/zones/us-central1-a/reservations/gone")
POOL = ["--cluster=c", "--region=us-central1"]
CREATE = ["beta", "container", "node-pools", "create"]


def _gke(state: Path) -> list[StateGke]:
    return [StateGke(state, scripted={"slow1": PoolPlan(create_seconds=600)})]


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCloud]:
    with serve(SCENARIO, tmp_path_factory.mktemp("gke"), _gke) as cloud:
        yield cloud
    assert cloud.emulator.invalid() == []


def test_a_pool_is_created_listed_and_deleted_through_the_real_gcloud(cloud: LocalCloud) -> None:
    made = cloud.gcloud(
        *CREATE, "np1", *POOL,
        "--machine-type=ct5p-hightpu-4t", "--num-nodes=2", "--tpu-topology=2x2x2",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    listed = cloud.gcloud("container", "node-pools", "list", *POOL, "--format=value(name,status)")
    assert listed.stdout.split() == ["np1", "RUNNING"]
    gone = cloud.gcloud("container", "node-pools", "delete", "np1", *POOL, "--quiet")
    assert gone.returncode == 0, gone.stderr
    missing = cloud.gcloud("container", "node-pools", "describe", "np1", *POOL, "--format=json")
    assert missing.returncode == 1
    assert "ResponseError: code=404, message=Not found:" in missing.stderr
    ids = {e.method_id for e in cloud.emulator.exchanges}
    assert "container.projects.locations.clusters.nodePools.create" in ids
    assert "container.projects.locations.operations.get" in ids


def test_a_name_in_use_is_gkes_409_and_a_stockout_fails_in_the_operation(
    cloud: LocalCloud,
) -> None:
    args = [*POOL, "--machine-type=ct5p-hightpu-4t", "--num-nodes=2"]
    assert cloud.gcloud(*CREATE, "np2", *args).returncode == 0
    again = cloud.gcloud(*CREATE, "np2", *args)
    assert again.returncode == 1
    assert "ResponseError: code=409, message=Already exists:" in again.stderr
    short = cloud.gcloud(
        *CREATE, "short1", *args, "--reservation-affinity=specific", "--reservation=gone"
    )
    assert short.returncode == 1
    assert "CanonicalCodeValueValuesEnum(RESOURCE_EXHAUSTED, 9)" in short.stderr
    assert "nodepoolConditions: []" in short.stderr
    assert short.stderr.rstrip().endswith("finished with error: " + STOCKOUT)


def test_a_pool_still_being_created_cannot_be_deleted_until_its_create_is_done(
    cloud: LocalCloud,
) -> None:
    args = [*POOL, "--machine-type=ct5p-hightpu-4t", "--num-nodes=2", "--async"]
    assert cloud.gcloud(*CREATE, "slow1", *args).returncode == 0
    state = cloud.gcloud(
        "container", "node-pools", "describe", "slow1", *POOL, "--format=value(status)"
    )
    assert state.stdout.strip() == "PROVISIONING"
    refused = cloud.gcloud("container", "node-pools", "delete", "slow1", *POOL, "--quiet")
    assert refused.returncode == 1
    assert "is currently creating node pool slow1" in refused.stderr
    with transaction(cloud.state) as live:
        advance(live, 601)  # the scenario's clock runs past the create's 600 s
    gone = cloud.gcloud("container", "node-pools", "delete", "slow1", *POOL, "--quiet")
    assert gone.returncode == 0, gone.stderr


def test_a_missing_cluster_gets_gclouds_second_line(cloud: LocalCloud) -> None:
    r = cloud.gcloud("container", "clusters", "describe", "nope", "--region=us-central1")
    assert r.returncode == 1
    assert "No cluster named 'nope' in p." in r.stderr


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"name": "np", "initialNodeCount": 2}, []),
        ({"name": "np", "status": "DEGRADED"}, ["NodePool.status: 'DEGRADED' is not one of"]),
        ({"name": "np", "nodeCount": 2}, ["NodePool: unknown field 'nodeCount'"]),
        ({"name": 3}, ["NodePool.name: expected a string, got 3"]),
        ({"config": {"diskSizeGb": "100"}}, ["NodePool.config.diskSizeGb: expected an integer"]),
    ],
)
def test_schema_problems_follow_the_discovery_document(
    body: dict[str, object], expected: list[str]
) -> None:
    found = problems(load_api("container.v1beta1"), "NodePool", body)
    assert len(found) == len(expected)
    for line, prefix in zip(found, expected, strict=True):
        assert line.startswith(prefix), line


def test_unknown_paths_are_404_and_bad_bodies_are_400(tmp_path: Path) -> None:
    with serve(SCENARIO, tmp_path) as cloud:
        base = cloud.emulator.base_url
        with pytest.raises(urllib.error.HTTPError) as e404:
            urllib.request.urlopen(f"{base}/v1beta1/projects/p/nothing")  # noqa: S310
        assert e404.value.code == 404
        req = urllib.request.Request(  # noqa: S310
            f"{base}/v1beta1/projects/p/locations/us-central1/clusters/c/nodePools",
            data=json.dumps({"nodePool": {"name": "x", "nodeCount": 1}}).encode(),
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as e400:
            urllib.request.urlopen(req)  # noqa: S310
        assert e400.value.code == 400
        error = json.loads(e400.value.read())["error"]
        assert error["status"] == "INVALID_ARGUMENT"
        assert "unknown field 'nodeCount'" in error["message"]
        assert [e.request_problems for e in cloud.emulator.invalid()] == [
            ("CreateNodePoolRequest.nodePool: unknown field 'nodeCount'",)
        ]
