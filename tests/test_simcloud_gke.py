"""The emulated GKE API behind the real gcloud: routing, schemas, node-pool states, errors."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import pytest

from tpu_trainer.simcloud.discovery import load_api
from tpu_trainer.simcloud.gcloud_env import gcloud_env, require_gcloud
from tpu_trainer.simcloud.gke import CreateFailure, Gke, PoolPlan
from tpu_trainer.simcloud.schema import problems
from tpu_trainer.simcloud.server import Emulator

pytestmark = pytest.mark.e2e

STOCKOUT = (
    "The zone 'projects/p/zones/us-central1-a' does not have enough resources available to "
    "fulfill the request.  Try a different zone, or try again later."
)


class Clock:
    def __init__(self) -> None:
        self.now = 1_790_000_000.0

    def __call__(self) -> float:
        return self.now


def _decide(_cluster: str, pool: dict[str, object]) -> PoolPlan:
    if str(pool["name"]).startswith("short"):
        return PoolPlan(create_seconds=0, failure=CreateFailure("RESOURCE_EXHAUSTED", STOCKOUT))
    if str(pool["name"]).startswith("slow"):
        return PoolPlan(create_seconds=600)
    return PoolPlan()


Cloud = tuple[Emulator, Clock, dict[str, str]]


@pytest.fixture(scope="module")
def cloud(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cloud]:
    require_gcloud()
    clock = Clock()
    gke = Gke(clock=clock, decide=_decide)
    gke.add_cluster("p", "us-central1", "c")
    with Emulator([gke]) as emulator:
        env = {**os.environ, **gcloud_env(emulator.base_url, tmp_path_factory.mktemp("gcloud"))}
        yield emulator, clock, env
    assert emulator.invalid() == []


def gcloud(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["gcloud", *argv, "--project=p"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


POOL = ["--cluster=c", "--region=us-central1"]


def test_a_pool_is_created_listed_and_deleted_through_the_real_gcloud(cloud: Cloud) -> None:
    emulator, _, env = cloud
    made = gcloud(
        env, "beta", "container", "node-pools", "create", "np1", *POOL,
        "--machine-type=ct5p-hightpu-4t", "--num-nodes=2", "--tpu-topology=2x2x2",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    listed = gcloud(env, "container", "node-pools", "list", *POOL, "--format=value(name,status)")
    assert listed.stdout.split() == ["np1", "RUNNING"]
    gone = gcloud(env, "container", "node-pools", "delete", "np1", *POOL, "--quiet")
    assert gone.returncode == 0, gone.stderr
    missing = gcloud(env, "container", "node-pools", "describe", "np1", *POOL, "--format=json")
    assert missing.returncode == 1
    assert "ResponseError: code=404, message=Not found:" in missing.stderr
    ids = {e.method_id for e in emulator.exchanges}
    assert "container.projects.locations.clusters.nodePools.create" in ids
    assert "container.projects.locations.operations.get" in ids


def test_a_name_in_use_is_gkes_409_and_a_stockout_fails_in_the_operation(cloud: Cloud) -> None:
    _, _, env = cloud
    args = [*POOL, "--machine-type=ct5p-hightpu-4t", "--num-nodes=2"]
    assert gcloud(env, "beta", "container", "node-pools", "create", "np2", *args).returncode == 0
    again = gcloud(env, "beta", "container", "node-pools", "create", "np2", *args)
    assert again.returncode == 1
    assert "ResponseError: code=409, message=Already exists:" in again.stderr
    short = gcloud(env, "beta", "container", "node-pools", "create", "short1", *args)
    assert short.returncode == 1
    assert "CanonicalCodeValueValuesEnum(RESOURCE_EXHAUSTED, 9)" in short.stderr
    assert "nodepoolConditions: []" in short.stderr
    assert short.stderr.rstrip().endswith("finished with error: " + STOCKOUT)


def test_a_pool_still_being_created_cannot_be_deleted_until_its_create_is_done(
    cloud: Cloud,
) -> None:
    _, clock, env = cloud
    args = [*POOL, "--machine-type=ct5p-hightpu-4t", "--num-nodes=2", "--async"]
    assert gcloud(env, "beta", "container", "node-pools", "create", "slow1", *args).returncode == 0
    state = gcloud(
        env, "container", "node-pools", "describe", "slow1", *POOL, "--format=value(status)"
    )
    assert state.stdout.strip() == "PROVISIONING"
    refused = gcloud(env, "container", "node-pools", "delete", "slow1", *POOL, "--quiet")
    assert refused.returncode == 1
    assert "is currently creating node pool slow1" in refused.stderr
    clock.now += 601
    assert (
        gcloud(env, "container", "node-pools", "delete", "slow1", *POOL, "--quiet").returncode == 0
    )


def test_a_missing_cluster_gets_gclouds_second_line(cloud: Cloud) -> None:
    _, _, env = cloud
    r = gcloud(env, "container", "clusters", "describe", "nope", "--region=us-central1")
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


def test_unknown_paths_are_404_and_bad_bodies_are_400() -> None:
    import json
    import urllib.error
    import urllib.request

    gke = Gke(clock=Clock())
    gke.add_cluster("p", "us-central1", "c")
    with Emulator([gke]) as emulator:
        base = emulator.base_url
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
        assert [e.request_problems for e in emulator.invalid()] == [
            ("CreateNodePoolRequest.nodePool: unknown field 'nodeCount'",)
        ]
