"""The fake cluster: the real kubectl against it, the pods of submitted workloads and the
shims that put the tools on PATH."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from fake_cloud_setup import (
    CLUSTER,
    Cloud,
    MakeCloud,
    cloud_factory,
)
from tpu_trainer.fakecloud import (
    fake_cloud_env,
    write_shims,
)
from tpu_trainer.fakecloud.state import transaction
from tpu_trainer.fakecloud.workloads import new_workload
from tpu_trainer.plan.slices import Slice


@pytest.fixture
def make_cloud(tmp_path: Path) -> MakeCloud:
    return cloud_factory(tmp_path)


# ---- kubectl ------------------------------------------------------------------------------------
@pytest.mark.e2e
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


@pytest.mark.e2e
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


@pytest.mark.e2e
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


@pytest.mark.unit
def test_shims_are_sh_scripts_running_this_python(tmp_path: Path) -> None:
    for retired in ("kubectl", "xpk"):  # an earlier version's stand-ins
        (tmp_path / retired).write_text("#!/bin/sh\n", encoding="utf-8")
    write_shims(tmp_path, python="/opt/py/bin/python")
    assert not (tmp_path / "kubectl").exists()  # kubectl is the real one, never a shim
    assert not (tmp_path / "xpk").exists()  # and so is xpk
    for tool in ("gcloud", "gcluster"):
        text = (tmp_path / tool).read_text(encoding="utf-8")
        assert text.startswith("#!/bin/sh\n")
        assert f'exec /opt/py/bin/python -m tpu_trainer.fakecloud {tool} "$@"' in text
        assert os.access(tmp_path / tool, os.X_OK)
    env = fake_cloud_env(tmp_path, tmp_path / "s.json", {"PATH": "/usr/bin"})
    assert env["PATH"] == f"{tmp_path}{os.pathsep}/usr/bin"
    assert env["TPU_TRAINER_FAKE_STATE"] == str(tmp_path / "s.json")
