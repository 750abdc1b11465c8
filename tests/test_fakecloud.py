"""The fake cloud: gcloud, kubectl and xpk stand-ins run as programs on PATH, against a state
file made from a scenario. xpk checks go through xpk's own parser (about a second each)."""

from __future__ import annotations

import copy
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from fake_cloud_setup import (
    BASE,
    CLUSTER,
    DOC,
    POLICY,
    PROJECT,
    REGION,
    MakeCloud,
    _create,
    _create_argv,
    _in_use,
    _pools,
    cloud_factory,
)
from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud import (
    load_scenario,
    recorded_calls,
)
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.gcloud_errors import XpkFailure, classify
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import SubprocessRunner


@pytest.fixture
def make_cloud(tmp_path: Path) -> MakeCloud:
    return cloud_factory(tmp_path)


# ---- scenario ---------------------------------------------------------------------------------
@pytest.mark.unit
def test_scenario_errors_name_the_file_and_the_key(tmp_path: Path) -> None:
    bad = copy.deepcopy(BASE)
    bad["reservations"][1]["status"] = "BROKEN"
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: reservations\[1\]\.status: 'BROKEN'"):
        load_scenario(path)
    path.write_text(yaml.safe_dump({**BASE, "behaviour": {}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.yaml: behaviour: unknown key"):
        load_scenario(path)


@pytest.mark.unit
def test_the_documented_example_scenario_loads(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"## Scenario format\n\n```yaml\n(.*?)```", text, re.S)
    assert block is not None
    path = tmp_path / "doc.yaml"
    path.write_text(block.group(1), encoding="utf-8")
    scenario = load_scenario(path)
    assert [r.name for r in scenario.reservations] == ["res-exhausted", "res-degraded", "res-ok"]
    assert scenario.reservations[0].capacity == "exhausted"
    assert (scenario.reservations[1].status, scenario.reservations[1].health) == (
        "READY",
        "DEGRADED",
    )
    assert scenario.reservations[1].degraded_block_count == 1


# ---- gcloud -------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_cluster_describe_has_the_gke_json_shape_and_404_text(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    c = cloud.json(
        "gcloud",
        "container",
        "clusters",
        "describe",
        CLUSTER,
        f"--region={REGION}",
        "--format=json",
        f"--project={PROJECT}",
    )
    assert (c["name"], c["location"], c["status"]) == (CLUSTER, REGION, "RUNNING")
    assert c["currentNodeVersion"] == "1.34.1-gke.1829001"
    assert c["networkConfig"]["datapathProvider"] == "ADVANCED_DATAPATH"
    assert c["networkConfig"]["enableMultiNetworking"] is True
    missing = cloud.run(
        "gcloud",
        "container",
        "clusters",
        "describe",
        "nope",
        f"--region={REGION}",
        "--format=json",
        f"--project={PROJECT}",
    )
    assert missing.returncode == 1
    assert missing.stderr.startswith(
        "ERROR: (gcloud.container.clusters.describe) ResponseError: code=404, message=Not found: "
        f"projects/{PROJECT}/locations/{REGION}/clusters/nope."
    )
    assert f"No cluster named 'nope' in {PROJECT}." in missing.stderr  # gcloud's own hint


@pytest.mark.e2e
def test_the_tools_own_clients_read_the_fake(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    runner = SubprocessRunner(env=cloud.env)
    g = Gcloud(runner, PROJECT)
    cluster = g.cluster(CLUSTER, REGION)
    assert cluster is not None and cluster.datapath == "ADVANCED_DATAPATH"
    assert g.cluster("nope", REGION) is None
    assert [p.name for p in g.node_pools(CLUSTER, REGION)] == ["default-pool"]
    res = g.reservation("res-ok", "us-central1-c")
    assert res is not None and (res.zone, res.free_hosts) == ("us-central1-c", 48)
    listed = g.reservation("res-degraded", None)
    assert listed is not None and (listed.status, listed.health) == ("READY", "DEGRADED")
    raw = cloud.json(
        "gcloud",
        "beta",
        "compute",
        "reservations",
        "list",
        "--filter=name=res-degraded",
        "--format=json",
        f"--project={PROJECT}",
    )
    assert raw[0]["status"] == "READY"
    assert raw[0]["resourceStatus"]["healthInfo"] == {
        "healthStatus": "DEGRADED",
        "degradedBlockCount": 1,
    }
    assert g.resource_policy_exists(POLICY, REGION)
    assert not g.resource_policy_exists("other-policy", REGION)
    assert Kubectl(runner).get("resourceflavor", "1xtpu7x-256") is None


@pytest.mark.e2e
def test_create_appears_in_list_uses_hosts_and_delete_gives_them_back(
    make_cloud: MakeCloud,
) -> None:
    cloud = make_cloud()
    assert _pools(cloud) == {"default-pool": "RUNNING"}
    made = _create(cloud, "np-a", "us-central1-c", "res-ok")
    assert made.returncode == 0, made.stderr
    assert made.stderr.rstrip().endswith(
        f"/v1beta1/projects/{PROJECT}/zones/{REGION}/clusters/{CLUSTER}/nodePools/np-a]."
    )
    assert _pools(cloud) == {"default-pool": "RUNNING", "np-a": "RUNNING"}
    assert _in_use(cloud, "res-ok", "us-central1-c") == 48
    pool = cloud.json(
        "gcloud",
        "container",
        "node-pools",
        "describe",
        "np-a",
        f"--cluster={CLUSTER}",
        f"--region={REGION}",
        "--format=json",
    )
    assert pool["config"]["machineType"] == "tpu7x-standard-4t"
    assert (pool["initialNodeCount"], pool["locations"]) == (32, ["us-central1-c"])
    assert pool["placementPolicy"] == {"policyName": POLICY}
    gone = cloud.run(
        "gcloud",
        "container",
        "node-pools",
        "delete",
        "np-a",
        f"--cluster={CLUSTER}",
        f"--region={REGION}",
        "--quiet",
        f"--project={PROJECT}",
    )
    assert gone.returncode == 0, gone.stderr
    assert _pools(cloud) == {"default-pool": "RUNNING"}
    assert _in_use(cloud, "res-ok", "us-central1-c") == 16


@pytest.mark.e2e
def test_capacity_failures_carry_the_real_markers(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    exhausted = _create(cloud, "np-a", "us-central1-ai1a", "res-exhausted")
    degraded = _create(cloud, "np-a", "us-central1-b", "res-degraded")
    wrong_zone = _create(cloud, "np-a", "us-central1-b", "res-ok")
    for proc in (exhausted, degraded):
        assert proc.returncode == 1
        assert "finished with error:" in proc.stderr and "RESOURCE_EXHAUSTED" in proc.stderr
    assert wrong_zone.returncode == 1
    assert "Reservation is incorrect for the requested resources" in wrong_zone.stderr
    as_results = [
        SubprocessRunner(env=cloud.env).run(
            _create_argv(
                "np-a", "us-central1-ai1a", "res-exhausted", f"--placement-policy={POLICY}"
            )
        )
    ]
    assert classify(as_results[0]) is XpkFailure.CAPACITY
    assert _pools(cloud) == {"default-pool": "RUNNING"}


@pytest.mark.e2e
def test_too_few_free_hosts_is_refused_at_once_with_gkes_429(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(
        reservations=[
            {"name": "small", "zone": "us-central1-c", "host_count": 40, "in_use_hosts": 16}
        ]
    )
    proc = _create(cloud, "np-a", "us-central1-c", "small")
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == (
        "ERROR: (gcloud.beta.container.node-pools.create) ResponseError: code=429, "
        "message=Reservation does not have enough resources for the request: specific "
        'reservation "small" is insufficient for node pool "np-a" at zone "us-central1-c": '
        "required 32 and short of 8 VM count of machine type tpu7x-standard-4t."
    ), proc.stderr
    assert _pools(cloud) == {"default-pool": "RUNNING"}


@pytest.mark.e2e
def test_provisioning_polls_then_running(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(behaviours={"provisioning_polls": 2})
    assert _create(cloud, "np-a", "us-central1-c", "res-ok").returncode == 0
    seen = [_pools(cloud)["np-a"] for _ in range(3)]
    assert seen == ["PROVISIONING", "PROVISIONING", "RUNNING"]


@pytest.mark.e2e
def test_conflict_on_create_answers_409(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    proc = _create(cloud, "stuck-pool", "us-central1-c", "res-ok")
    assert proc.returncode == 1
    assert "ResponseError: code=409, message=Already exists: " in proc.stderr
    assert proc.stderr.rstrip().endswith("/nodePools/stuck-pool.")


@pytest.mark.e2e
def test_error_pools_leave_an_error_pool_behind(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(behaviours={"error_pools": True})
    assert _create(cloud, "np-a", "us-central1-ai1a", "res-exhausted").returncode == 1
    assert _pools(cloud)["np-a"] == "ERROR"
    again = _create(cloud, "np-a", "us-central1-ai1a", "res-exhausted")
    assert "code=409" in again.stderr


@pytest.mark.e2e
def test_tpu7x_rejects_topology_flags_and_missing_policies(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    topo = cloud.run(*_create_argv("np-a", "us-central1-c", "res-ok", "--tpu-topology=4x4x8"))
    compact = cloud.run(
        *_create_argv(
            "np-a",
            "us-central1-c",
            "res-ok",
            "--placement-type=COMPACT",
            f"--placement-policy={POLICY}",
        )
    )
    no_policy = cloud.run(*_create_argv("np-a", "us-central1-c", "res-ok"))
    missing = cloud.run(
        *_create_argv(
            "np-a", "us-central1-c", "res-ok", "--placement-policy=tpu7x-512-4x8x8-placement-policy"
        )
    )
    for proc in (topo, compact, no_policy, missing):
        assert proc.returncode == 1
        assert "ResponseError: code=400, message=INVALID_ARGUMENT" in proc.stderr
    assert _pools(cloud) == {"default-pool": "RUNNING"}


@pytest.mark.e2e
def test_provisioning_pools_and_used_policies_cannot_be_deleted(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(behaviours={"provisioning_polls": 5})
    assert _create(cloud, "np-a", "us-central1-c", "res-ok").returncode == 0
    early = cloud.run(
        "gcloud",
        "container",
        "node-pools",
        "delete",
        "np-a",
        f"--cluster={CLUSTER}",
        f"--region={REGION}",
        "--quiet",
    )
    assert early.returncode == 1 and "is currently creating node pool np-a" in early.stderr
    policy = cloud.run(
        "gcloud", "compute", "resource-policies", "delete", POLICY, f"--region={REGION}", "--quiet"
    )
    assert policy.returncode == 1 and "is already being used by" in policy.stderr


@pytest.mark.e2e
def test_unknown_commands_and_flags_exit_2(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    choice = cloud.run("gcloud", "containr", "clusters", "list")
    assert choice.returncode == 2 and choice.stderr.startswith(
        "ERROR: (gcloud) Invalid choice: 'containr'."
    )
    flag = cloud.run(
        "gcloud", "container", "node-pools", "list", f"--cluster={CLUSTER}", "--regio=x"
    )
    assert flag.returncode == 2
    assert "(gcloud.container.node-pools.list) unrecognized arguments: --regio=x" in flag.stderr


@pytest.mark.e2e
def test_workload_policy_create_then_exists(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(resource_policies=[])
    argv = [
        "gcloud",
        "beta",
        "compute",
        "resource-policies",
        "create",
        "workload-policy",
        POLICY,
        "--type=HIGH_THROUGHPUT",
        "--accelerator-topology=4x4x8",
        f"--region={REGION}",
    ]
    assert cloud.run(*argv).returncode == 0
    again = cloud.run(*argv)
    assert again.returncode == 1 and "already exists" in again.stderr
    policy = cloud.json(
        "gcloud",
        "compute",
        "resource-policies",
        "describe",
        POLICY,
        f"--region={REGION}",
        "--format=json",
    )
    assert policy["workloadPolicy"] == {"type": "HIGH_THROUGHPUT", "acceleratorTopology": "4x4x8"}


@pytest.mark.e2e
def test_concurrent_calls_are_all_recorded(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    argv = [
        "gcloud",
        "container",
        "node-pools",
        "list",
        f"--cluster={CLUSTER}",
        f"--region={REGION}",
        "--format=json",
    ]
    before = len(recorded_calls(cloud.state))  # the cloud's own get-credentials
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(lambda _: cloud.run(*argv).returncode, range(8)))
    assert codes == [0] * 8
    assert recorded_calls(cloud.state)[before:] == [argv] * 8
