"""The real xpk 1.16 against the emulators: its gcloud calls go to the emulated Google APIs, its
kubectl calls and its Kubernetes Python client to the emulated cluster. Each xpk command is a
Python start-up plus its own gcloud calls (tens of seconds on a busy machine): few of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.infra.runner import SubprocessRunner
from tpu_trainer.runtime.xpk_runtime import install_xpk
from tpu_trainer.simcloud.client_env import client_env
from tpu_trainer.simcloud.gcloud_env import TOKEN, gcloud_env
from tpu_trainer.simcloud.rehearsal import PLUGIN_TOKEN_ENV, kube_env, start_emulator

pytestmark = pytest.mark.e2e

PROJECT, REGION, ZONE, CLUSTER = "demo-project", "us-central1", "us-central1-a", "demo-cluster"
SCENARIO = {
    "project": PROJECT,
    "region": REGION,
    "cluster": {"name": CLUSTER},
    "node_pools": [
        {"name": "default-pool", "machine_type": "e2-standard-8", "node_count": 1, "zone": ZONE},
        {
            "name": "tpu-pool",
            "machine_type": "ct6e-standard-4t",
            "node_count": 2,
            "zone": ZONE,
            "tpu_topology": "2x4",
        },
    ],
    "reservations": [{"name": "res-a", "zone": ZONE, "host_count": 4}],
}
WHERE = [f"--cluster={CLUSTER}", f"--project={PROJECT}", f"--zone={ZONE}"]
NUMBER = "--project-number=123456789012"
"""Cloud Resource Manager is not emulated: xpk takes the project number from its flag."""


def _tool(name: str, how: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/bin")
    if found is None:
        pytest.fail(f"{name} is not installed: {how}")
    return found


@dataclass
class Cloud:
    root: Path
    env: dict[str, str]
    calls: Path
    xpk: str

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.xpk, *argv],
            env=self.env,
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )

    def logged(self) -> list[str]:
        return self.calls.read_text(encoding="utf-8").splitlines()

    def kubectl(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [_tool("kubectl", "see tests/test_simkube_kubectl.py"), *argv],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def _logging_wrapper(folder: Path, name: str, real: str, log: Path) -> None:
    """``name`` on PATH: appends its argv to ``log``, then runs the real program."""
    path = folder / name
    path.write_text(
        f'#!/bin/sh\nprintf "%s %s\\n" {name} "$*" >> "{log}"\nexec "{real}" "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Cloud:
    root = tmp_path_factory.mktemp("real-xpk")
    gcloud = _tool(
        "gcloud", "install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install)"
    )
    kubectl = _tool("kubectl", "install kubectl 1.32 or `gcloud components install kubectl`")
    xpk_dir = install_xpk(SubprocessRunner(), print)  # the cache's (scripts/test.sh makes it)
    init_state(parse_scenario(SCENARIO), root / "state.json")
    google = start_emulator(root)
    kube = kube_env(root)  # HTTPS, the rehearsal's CA and token; GKE's endpoint points at it
    bin_dir, log = root / "bin", root / "calls.log"
    bin_dir.mkdir()
    # xpk's own get-credentials writes the kubeconfig its kubectl and Kubernetes client use
    _logging_wrapper(bin_dir, "gcloud", gcloud, log)
    _logging_wrapper(bin_dir, "kubectl", kubectl, log)
    (bin_dir / "crane").write_text("#!/bin/sh\necho 'crane: --help only'\n")
    (bin_dir / "crane").chmod(0o755)  # xpk checks `crane --help`; an image name needs no build
    env = {
        **gcloud_env(google.base_url, root / "gcloud-config"),
        **client_env(google.base_url, root / "gcloud-config", PROJECT),
        **kube,
        PLUGIN_TOKEN_ENV: TOKEN,
        "CLOUDSDK_CORE_PROJECT": PROJECT,
        "HOME": str(root),
        "TELEMETRY_ENABLED": "false",
        "DEPENDENCY_AUTO_DOWNLOAD": "false",
        "PATH": os.pathsep.join((str(bin_dir), "/usr/bin", "/bin")),
    }
    return Cloud(root, env, log, str(xpk_dir / "xpk"))


def test_workload_create_list_delete(cloud: Cloud) -> None:
    created = cloud.run(
        "workload",
        "create",
        *WHERE,
        NUMBER,
        "--priority=very-high",
        "--max-restarts=0",
        "--device-type=v6e-8",
        "--num-slices=1",
        "--docker-image=python:3.11",
        "--workload=demo-run",
        "--command=python3 -c 1",
    )
    calls = cloud.logged()
    assert "kubectl config set-context --current --namespace=default" in calls
    fetched = f"gcloud container clusters get-credentials {CLUSTER} --location={REGION} --project={PROJECT}"
    assert fetched in calls  # xpk's retry without --dns-endpoint wrote the kubeconfig
    assert any(c.startswith("kubectl apply -f") for c in calls), created.stdout[-3000:]
    shown = cloud.kubectl("get", "jobsets", "-o", "json")
    names = [o["metadata"]["name"] for o in json.loads(shown.stdout)["items"]]
    assert names == ["demo-run"], created.stdout[-3000:]
    assert created.returncode == 0, created.stdout[-3000:]

    listed = cloud.run("workload", "list", *WHERE, NUMBER)
    assert listed.returncode == 0, listed.stdout[-3000:]
    assert "demo-run" in listed.stdout

    deleted = cloud.run("workload", "delete", "--workload=demo-run", *WHERE, NUMBER)
    assert "kubectl delete jobset demo-run -n default" in cloud.logged()
    assert deleted.returncode == 0, deleted.stdout[-3000:]
    assert json.loads(cloud.kubectl("get", "jobsets", "-o", "json").stdout)["items"] == []


def test_cluster_adapt_finds_jobset_and_kueue_installed(cloud: Cloud) -> None:
    """Up to its Kueue objects: their ResourceFlavor is made; the ProvisioningRequestConfig
    after it is a kind the emulator does not serve yet, so the command itself ends in 1."""
    adapted = cloud.run(
        "cluster", "adapt", *WHERE, NUMBER, "--tpu-type=v6e-8", "--num-slices=1",
        "--reservation=res-a",
    )  # fmt: skip
    out = adapted.stdout
    assert "Cluster has Jobset version 0.12.0 >= 0.10.1. Skipping installation." in out
    assert "Cluster has Kueue version 0.19.2 >= v0.17.1. Skipping installation." in out
    assert not [c for c in cloud.logged() if "https://" in c]  # no release manifest download
    assert "memory_limit" not in out + adapted.stderr  # xpk 1.16.0 has no such bug
    flavors = cloud.kubectl("get", "resourceflavors.kueue.x-k8s.io", "-o", "name")
    assert "resourceflavor.kueue.x-k8s.io/1xv6e-8" in flavors.stdout.split()
