"""The fake cloud: gcloud, kubectl and xpk stand-ins run as programs on PATH, against a state
file made from a scenario. xpk checks go through xpk's own parser (about a second each)."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpu_trainer.errors import ConfigError
from tpu_trainer.fakecloud import (
    fake_cloud_env,
    init_state,
    load_scenario,
    read_state,
    recorded_calls,
    write_shims,
)
from tpu_trainer.fakecloud.state import transaction
from tpu_trainer.fakecloud.workloads import new_workload
from tpu_trainer.infra.gcloud import Gcloud
from tpu_trainer.infra.gcloud_errors import XpkFailure, classify
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandResult, SubprocessRunner
from tpu_trainer.plan.slices import Slice

DOC = Path(__file__).resolve().parents[1] / "docs" / "fake-cloud.md"
REGION, PROJECT, CLUSTER = "us-central1", "demo-project", "demo-cluster"
POLICY = "tpu7x-256-4x4x8-placement-policy"

BASE: dict[str, Any] = {
    "project": PROJECT,
    "region": REGION,
    "cluster": {"name": CLUSTER},
    "node_pools": [
        {
            "name": "default-pool",
            "machine_type": "e2-standard-8",
            "node_count": 3,
            "zone": "us-central1-ai1a",
        }
    ],
    "reservations": [
        {
            "name": "res-exhausted",
            "zone": "us-central1-ai1a",
            "host_count": 64,
            "capacity": "exhausted",
        },
        {"name": "res-degraded", "zone": "us-central1-b", "host_count": 64, "status": "DEGRADED"},
        {"name": "res-ok", "zone": "us-central1-c", "host_count": 64, "in_use_hosts": 16},
    ],
    "resource_policies": [POLICY],
    "behaviours": {"conflict_on_create": ["stuck-pool"]},
}

# xpk's own parser checks every fake xpk call: scripts/test.sh installs it (a missing xpk fails).
needs_xpk = pytest.mark.xpk


@dataclass
class Cloud:
    state: Path
    env: dict[str, str]

    def run(self, *argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            input=stdin if stdin is not None else "",
        )

    def json(self, *argv: str) -> Any:
        proc = self.run(*argv)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def data(self) -> dict[str, Any]:
        return read_state(self.state)


MakeCloud = Callable[..., Cloud]


@pytest.fixture
def make_cloud(tmp_path: Path) -> MakeCloud:
    """A fake cloud from BASE with some top-level sections replaced or merged."""

    def make(**sections: Any) -> Cloud:
        data = copy.deepcopy(BASE)
        for key, value in sections.items():
            data[key] = {**data[key], **value} if isinstance(data.get(key), dict) else value
        scenario_file = tmp_path / "scenario.yaml"
        scenario_file.write_text(yaml.safe_dump(data), encoding="utf-8")
        state = init_state(load_scenario(scenario_file), tmp_path / "state.json")
        write_shims(tmp_path / "bin")
        return Cloud(state, fake_cloud_env(tmp_path / "bin", state))

    return make


def _create_argv(name: str, zone: str, reservation: str, *extra: str, hosts: int = 32) -> list[str]:
    return [
        "gcloud",
        "beta",
        "container",
        "node-pools",
        "create",
        name,
        f"--cluster={CLUSTER}",
        f"--project={PROJECT}",
        f"--location={REGION}",
        f"--node-locations={zone}",
        "--machine-type=tpu7x-standard-4t",
        f"--num-nodes={hosts}",
        *extra,
        "--reservation-affinity=specific",
        f"--reservation={reservation}",
        "--enable-gvnic",
        "--scopes=storage-full,gke-default",
        "--max-pods-per-node=15",
        "--node-version=1.34.1-gke.1829001",
    ]


def _create(
    cloud: Cloud, name: str, zone: str, reservation: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return cloud.run(*_create_argv(name, zone, reservation, f"--placement-policy={POLICY}", *extra))


def _pools(cloud: Cloud) -> dict[str, str]:
    listed = cloud.json(
        "gcloud",
        "container",
        "node-pools",
        "list",
        f"--cluster={CLUSTER}",
        f"--region={REGION}",
        "--format=json",
        f"--project={PROJECT}",
    )
    return {p["name"]: p["status"] for p in listed}


def _in_use(cloud: Cloud, reservation: str, zone: str) -> str:
    found = cloud.json(
        "gcloud",
        "beta",
        "compute",
        "reservations",
        "describe",
        reservation,
        f"--zone={zone}",
        "--format=json",
        f"--project={PROJECT}",
    )
    value: str = found["aggregateReservation"]["inUseHostCount"]
    return value


# ---- scenario ---------------------------------------------------------------------------------
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


def test_the_documented_example_scenario_loads(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"## Scenario format\n\n```yaml\n(.*?)```", text, re.S)
    assert block is not None
    path = tmp_path / "doc.yaml"
    path.write_text(block.group(1), encoding="utf-8")
    scenario = load_scenario(path)
    assert [r.name for r in scenario.reservations] == ["res-exhausted", "res-degraded", "res-ok"]
    assert scenario.reservations[0].capacity == "exhausted"
    assert scenario.reservations[1].status == "DEGRADED"


# ---- gcloud -------------------------------------------------------------------------------------
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
    assert missing.stderr == (
        "ERROR: (gcloud.container.clusters.describe) ResponseError: code=404, message=Not found: "
        f"projects/{PROJECT}/locations/{REGION}/clusters/nope.\n"
    )


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
    assert listed is not None and listed.status == "DEGRADED"
    assert g.resource_policy_exists(POLICY, REGION)
    assert not g.resource_policy_exists("other-policy", REGION)
    assert Kubectl(runner).get("resourceflavor", "1xtpu7x-256") is None


def test_create_appears_in_list_uses_hosts_and_delete_gives_them_back(
    make_cloud: MakeCloud,
) -> None:
    cloud = make_cloud()
    assert _pools(cloud) == {"default-pool": "RUNNING"}
    made = _create(cloud, "np-a", "us-central1-c", "res-ok")
    assert made.returncode == 0, made.stderr
    assert "Created [https://container.googleapis.com/" in made.stderr
    assert _pools(cloud) == {"default-pool": "RUNNING", "np-a": "RUNNING"}
    assert _in_use(cloud, "res-ok", "us-central1-c") == "48"
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
    assert _in_use(cloud, "res-ok", "us-central1-c") == "16"


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


def test_too_few_free_hosts_is_resource_exhausted(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(
        reservations=[
            {"name": "small", "zone": "us-central1-c", "host_count": 40, "in_use_hosts": 16}
        ]
    )
    proc = _create(cloud, "np-a", "us-central1-c", "small")
    assert proc.returncode == 1 and "RESOURCE_EXHAUSTED" in proc.stderr


def test_provisioning_polls_then_running(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(behaviours={"provisioning_polls": 2})
    assert _create(cloud, "np-a", "us-central1-c", "res-ok").returncode == 0
    seen = [_pools(cloud)["np-a"] for _ in range(3)]
    assert seen == ["PROVISIONING", "PROVISIONING", "RUNNING"]


def test_conflict_on_create_answers_409(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    proc = _create(cloud, "stuck-pool", "us-central1-c", "res-ok")
    assert proc.returncode == 1
    assert "ResponseError: code=409, message=Already exists: " in proc.stderr
    assert proc.stderr.rstrip().endswith("/nodePools/stuck-pool.")


def test_error_pools_leave_an_error_pool_behind(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(behaviours={"error_pools": True})
    assert _create(cloud, "np-a", "us-central1-ai1a", "res-exhausted").returncode == 1
    assert _pools(cloud)["np-a"] == "ERROR"
    again = _create(cloud, "np-a", "us-central1-ai1a", "res-exhausted")
    assert "code=409" in again.stderr


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
    with ThreadPoolExecutor(max_workers=8) as pool:
        codes = list(pool.map(lambda _: cloud.run(*argv).returncode, range(16)))
    assert codes == [0] * 16
    assert recorded_calls(cloud.state) == [argv] * 16


# ---- kubectl ------------------------------------------------------------------------------------
def test_kubectl_not_found_apply_and_patch(make_cloud: MakeCloud, tmp_path: Path) -> None:
    cloud = make_cloud(kueue={"configmap": {"tpu7x-8": "1"}})
    missing = cloud.run("kubectl", "get", "resourceflavor", "1xtpu7x-256", "-o", "json")
    assert missing.returncode == 1
    assert missing.stderr == (
        'Error from server (NotFound): resourceflavors.kueue.x-k8s.io "1xtpu7x-256" not found\n'
    )
    flavor = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "1xtpu7x-256"},
        "spec": {"nodeLabels": {}},
    }
    manifest = tmp_path / "flavor.json"
    manifest.write_text(json.dumps(flavor), encoding="utf-8")
    applied = cloud.json("kubectl", "apply", "-f", str(manifest), "-o", "json")
    assert applied["metadata"]["name"] == "1xtpu7x-256"
    assert (
        cloud.run("kubectl", "get", "resourceflavor", "1xtpu7x-256", "-o", "json").returncode == 0
    )
    cm = f"{CLUSTER}-resources-configmap"
    patched = cloud.run(
        "kubectl",
        "patch",
        "configmap",
        cm,
        "--namespace=default",
        "--type",
        "merge",
        "-p",
        '{"data":{"tpu7x-256":"32"}}',
    )
    assert patched.stdout == f"configmap/{cm} patched\n"
    data = cloud.json("kubectl", "get", "configmap", cm, "--namespace=default", "-o", "json")[
        "data"
    ]
    assert data == {"tpu7x-8": "1", "tpu7x-256": "32"}


def _seed_workload(cloud: Cloud, name: str, device: str, zone: str) -> None:
    """A submitted workload without going through xpk (it takes a second per call)."""
    with transaction(cloud.state) as state:
        state["workloads"][name] = new_workload(
            state,
            name,
            Slice.parse(device),
            num_slices=1,
            zone=zone,
            image="img",
            command="true",
            parallel_flag=False,
        )


def _admit(cloud: Cloud, s: Slice, pool: str, zone: str) -> None:
    """Kueue objects for ``s`` and a RUNNING pool for it (what xpk cluster adapt leaves)."""
    with transaction(cloud.state) as state:
        from tpu_trainer.fakecloud import k8s
        from tpu_trainer.fakecloud.state import new_pool

        k8s.put(state, k8s.resource_flavor(s.kueue_flavor(1), "tpu7x", s.topology_name))
        k8s.put(state, k8s.cluster_queue({s.kueue_flavor(1): s.chips}))
        k8s.put(state, k8s.local_queue())
        state["node_pools"][pool] = new_pool(
            pool,
            machine_type=s.machine_type,
            node_count=s.hosts,
            zone=zone,
            status="RUNNING",
            version="v",
            placement_policy=s.workload_policy,
        )


def _pods(cloud: Cloud, name: str) -> list[dict[str, Any]]:
    listed = cloud.json(
        "kubectl", "get", "pods", "-o", "json", f"--selector=jobset.sigs.k8s.io/jobset-name={name}"
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


def test_pods_of_a_one_host_slice(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(
        workloads={"pending_polls": 1, "running_polls": 1, "log": "step 0\nstep 1\n"}
    )
    _seed_workload(cloud, "one", "tpu7x-2x2x1", "us-central1-c")
    assert _pods(cloud, "one") == []  # Kueue cannot admit it yet: no pods at all
    _admit(cloud, Slice.parse("tpu7x-2x2x1"), "np-one", "us-central1-c")
    phases = [[p["status"]["phase"] for p in _pods(cloud, "one")] for _ in range(3)]
    assert phases == [["Pending"], ["Running"], ["Succeeded"]]
    pod = _pods(cloud, "one")[0]
    assert re.fullmatch(r"one-slice-job-0-0-[a-z0-9]{5}", pod["metadata"]["name"])
    assert [c["name"] for c in pod["spec"]["containers"]] == ["jax-tpu"]
    logs = cloud.run("kubectl", "logs", pod["metadata"]["name"], "--container=jax-tpu")
    assert logs.stdout == "step 0\nstep 1\n"


def test_pods_of_a_multi_host_slice(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    s = Slice.parse("tpu7x-4x4x4")
    _seed_workload(cloud, "multi", s.device_type, "us-central1-c")
    _admit(cloud, s, "np-multi", "us-central1-c")
    pods = _pods(cloud, "multi")
    assert len(pods) == s.hosts == 16
    names = sorted(p["metadata"]["name"] for p in pods)
    assert all(re.fullmatch(r"multi-slice-job-0-\d+-[a-z0-9]{5}", n) for n in names)
    assert {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] for p in pods} == {
        str(i) for i in range(16)
    }
    assert {tuple(c["name"] for c in p["spec"]["containers"]) for p in pods} == {
        ("jax-tpu-1", "jax-tpu-2")
    }
    wrong = cloud.run("kubectl", "logs", names[0], "--container=jax-tpu")
    assert wrong.returncode == 1 and "is not valid for pod" in wrong.stderr


# ---- xpk ----------------------------------------------------------------------------------------
def _adapt(cloud: Cloud, reservation: str, zone: str) -> subprocess.CompletedProcess[str]:
    return cloud.run(
        "xpk",
        "cluster",
        "adapt",
        f"--cluster={CLUSTER}",
        f"--project={PROJECT}",
        f"--zone={zone}",
        "--tpu-type=tpu7x-4x4x8",
        "--num-slices=1",
        f"--reservation={reservation}",
    )


@needs_xpk
@pytest.mark.xpk
def test_xpk_rejects_an_unknown_flag_like_argparse(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    proc = cloud.run(
        "xpk",
        "cluster",
        "adapt",
        f"--cluster={CLUSTER}",
        f"--project={PROJECT}",
        "--zone=us-central1-c",
        "--tpu-type=tpu7x-4x4x8",
        "--num-slice=1",
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: xpk")
    assert "xpk: error: unrecognized arguments: --num-slice=1" in proc.stderr
    assert recorded_calls(cloud.state)[-1][:3] == ["xpk", "cluster", "adapt"]


@needs_xpk
@pytest.mark.xpk
def test_xpk_adapt_memory_limit_bug(make_cloud: MakeCloud) -> None:
    cloud = make_cloud(behaviours={"xpk_memory_limit_bug": True})
    proc = _adapt(cloud, "res-ok", "us-central1-c")
    assert proc.returncode == 1
    assert proc.stderr.startswith("Traceback (most recent call last):")
    assert proc.stderr.rstrip().endswith(
        "AttributeError: 'Namespace' object has no attribute 'memory_limit'"
    )
    result = CommandResult(("xpk",), proc.returncode, proc.stdout, proc.stderr, 0.0)
    assert classify(result) is XpkFailure.MEMORY_LIMIT
    assert _pools(cloud) == {"default-pool": "RUNNING"}


@needs_xpk
@pytest.mark.xpk
def test_xpk_adapt_as_released_configures_kueue_but_makes_no_pool(make_cloud: MakeCloud) -> None:
    cloud = make_cloud()
    made = _adapt(cloud, "res-ok", "us-central1-c")
    assert made.returncode == 0, made.stdout + made.stderr
    assert _pools(cloud) == {"default-pool": "RUNNING"}
    k = Kubectl(SubprocessRunner(env=cloud.env))
    assert k.get("resourceflavor", "1xtpu7x-256") is not None


@needs_xpk
@pytest.mark.xpk
def test_xpk_adapt_then_workloads_succeed_and_fail(make_cloud: MakeCloud) -> None:
    # the seed documents' xpk, whose adapt also made the node pools
    cloud = make_cloud(
        workloads={"pending_polls": 0}, behaviours={"xpk_adapt_creates_node_pools": True}
    )
    exhausted = _adapt(cloud, "res-exhausted", "us-central1-ai1a")
    assert exhausted.returncode == 1 and "RESOURCE_EXHAUSTED" in exhausted.stdout
    made = _adapt(cloud, "res-ok", "us-central1-c")
    assert made.returncode == 0, made.stdout + made.stderr
    assert _pools(cloud) == {"default-pool": "RUNNING", f"{CLUSTER}-np-0": "RUNNING"}
    k = Kubectl(SubprocessRunner(env=cloud.env))
    assert k.get("resourceflavor", "1xtpu7x-256") is not None
    queue = k.get("clusterqueue", "cluster-queue")
    assert queue is not None
    assert queue["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "1xtpu7x-256"
    cm = k.get("configmap", f"{CLUSTER}-resources-configmap", "default")
    assert cm is not None and cm["data"] == {"tpu7x-256": "32"}
    for name, exit_code, expected in (("ok-run", 0, 0), ("bad-run", 1, 125)):
        with transaction(cloud.state) as state:
            state["workload_defaults"]["exit_code"] = exit_code
        created = cloud.run(
            "xpk",
            "workload",
            "create",
            f"--cluster={CLUSTER}",
            f"--project={PROJECT}",
            "--zone=us-central1-c",
            "--device-type=tpu7x-4x4x8",
            "--num-slices=1",
            "--docker-image=img",
            f"--workload={name}",
            "--command=echo hi",
        )
        assert created.returncode == 0, created.stdout
        waited = cloud.run(
            "xpk",
            "workload",
            "list",
            f"--cluster={CLUSTER}",
            f"--project={PROJECT}",
            "--zone=us-central1-c",
            f"--wait-for-job-completion={name}",
            "--timeout=60",
        )
        assert waited.returncode == expected, waited.stdout
    assert set(cloud.data()["workloads"]) == {"ok-run", "bad-run"}


def test_shims_are_sh_scripts_running_this_python(tmp_path: Path) -> None:
    write_shims(tmp_path, python="/opt/py/bin/python")
    for tool in ("gcloud", "kubectl", "xpk"):
        text = (tmp_path / tool).read_text(encoding="utf-8")
        assert text.startswith("#!/bin/sh\n")
        assert f'exec /opt/py/bin/python -m tpu_trainer.fakecloud {tool} "$@"' in text
        assert os.access(tmp_path / tool, os.X_OK)
    env = fake_cloud_env(tmp_path, tmp_path / "s.json", {"PATH": "/usr/bin"})
    assert env["PATH"] == f"{tmp_path}{os.pathsep}/usr/bin"
    assert env["TPU_TRAINER_FAKE_STATE"] == str(tmp_path / "s.json")
