"""The real kubectl against the emulated Kubernetes API server: nodes from the state's pools,
apply of Kueue and JobSet objects, the real error texts, deprecation warnings, logs -f."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import advance, clock, transaction
from tpu_trainer.infra.kubectl import split_prefix, split_timestamp, tails_argv
from tpu_trainer.launchers.gke import kueue
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.kube.kubeconfig import context_name, write_kubeconfig
from tpu_trainer.simcloud.kube.logs import append_log
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

SCENARIO = {
    "project": "demo-project",
    "region": "us-central1",
    "cluster": {"name": "demo-cluster"},
    "node_pools": [
        {
            "name": "default-pool",
            "machine_type": "e2-standard-8",
            "node_count": 1,
            "zone": "us-central1-a",
        },
        {
            "name": "tpu-pool",
            "machine_type": "ct6e-standard-4t",
            "node_count": 2,
            "zone": "us-central1-a",
            "tpu_topology": "2x4",
        },
    ],
}
DEPRECATED = "Warning: This version is deprecated. Use v1beta2 instead."


def jobset(name: str) -> dict[str, Any]:
    """A JobSet shaped as xpk writes one for a 2-host v6e slice."""
    container = {
        "name": "jax-tpu",
        "image": "python:3.11",
        "command": ["bash", "-c", "python3 train.py"],
        "resources": {"limits": {"google.com/tpu": 4}},
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": "multislice-queue"},
            "annotations": {
                "alpha.jobset.sigs.k8s.io/exclusive-topology": "cloud.google.com/gke-nodepool"
            },
        },
        "spec": {
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [
                {
                    "name": "slice-job",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "backoffLimit": 0,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "nodeSelector": {
                                        "cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
                                        "cloud.google.com/gke-tpu-topology": "2x4",
                                    },
                                    "containers": [container],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


class Cluster:
    def __init__(self, root: Path, server: KubeServer) -> None:
        self.root = root
        self.server = server
        kubeconfig = write_kubeconfig(
            root / "kubeconfig",
            server.base_url,
            context_name("demo-project", "us-central1", "demo-cluster"),
        )
        self.env = {"KUBECONFIG": str(kubeconfig), "HOME": str(root), "PATH": "/usr/bin:/bin"}
        self.binary = _kubectl()

    def kubectl(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.binary, *args],
            input=stdin,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def follow(self, *args: str) -> subprocess.Popen[str]:
        """``kubectl <args>`` left running (``logs -f``), its output piped."""
        return subprocess.Popen(
            [self.binary, *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def apply(self, *objects: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(objects))


def _kubectl() -> str:
    found = shutil.which("kubectl") or shutil.which("kubectl", path="/usr/bin")
    if found is None:
        pytest.fail(
            "kubectl is not installed: install kubectl 1.32 "
            "(https://kubernetes.io/docs/tasks/tools/) or `gcloud components install kubectl`"
        )
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp("simkube")
    state = init_state(parse_scenario(SCENARIO), root / "state.json")
    with KubeServer(state, idle_seconds=120) as server:
        yield Cluster(root, server)


def test_nodes_are_the_pools_vms_with_gke_tpu_labels(cluster: Cluster) -> None:
    shown = cluster.kubectl(
        "get",
        "nodes",
        "-L",
        "cloud.google.com/gke-tpu-accelerator,cloud.google.com/gke-tpu-topology",
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "GKE-TPU-ACCELERATOR",
        "GKE-TPU-TOPOLOGY",
    ]
    tpu = [line.split() for line in lines[1:] if "-tpu-pool-" in line]
    assert len(tpu) == 2
    assert all(row[1] == "Ready" and row[-2:] == ["tpu-v6e-slice", "2x4"] for row in tpu)
    listed = cluster.kubectl(
        "get", "nodes", "-l", "cloud.google.com/gke-nodepool=tpu-pool", "-o", "yaml"
    )
    nodes = yaml.safe_load(listed.stdout)["items"]
    assert [n["status"]["capacity"]["google.com/tpu"] for n in nodes] == ["4", "4"]


def test_kueue_v1beta2_apply_then_unchanged_keeps_generation(cluster: Cluster) -> None:
    slice_ = Slice.parse("tpu7x-4x4x8")
    objects = [
        kueue.resource_flavor(slice_, 1),
        kueue.cluster_queue(slice_, 1),
        kueue.local_queue(),
    ]
    for obj in objects:
        obj["apiVersion"] = "kueue.x-k8s.io/v1beta2"
    first = cluster.apply(*objects)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "resourceflavor.kueue.x-k8s.io/1xtpu7x-256 created",
        "clusterqueue.kueue.x-k8s.io/cluster-queue created",
        "localqueue.kueue.x-k8s.io/multislice-queue created",
    ]
    assert "Warning" not in first.stderr
    again = cluster.apply(*objects)
    assert [line.split()[-1] for line in again.stdout.splitlines()] == ["unchanged"] * 3
    queue = yaml.safe_load(
        cluster.kubectl("get", "clusterqueue", "cluster-queue", "-o", "yaml").stdout
    )
    assert queue["metadata"]["generation"] == 1
    assert queue["spec"]["queueingStrategy"] == "BestEffortFIFO"  # the CRD's default
    objects[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = 256
    changed = cluster.apply(objects[1])
    assert changed.stdout.strip() == "clusterqueue.kueue.x-k8s.io/cluster-queue configured"
    generation = cluster.kubectl(
        "get", "cq", "cluster-queue", "-o", "jsonpath={.metadata.generation}"
    )
    assert generation.stdout == "2"


def test_kueue_v1beta1_write_gets_the_crds_deprecation_warning(cluster: Cluster) -> None:
    flavor = kueue.resource_flavor(Slice.parse("v6e-8"), 1)
    assert flavor["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    flavor["apiVersion"] = "kueue.x-k8s.io/v1beta1"  # as xpk's own templates still write it
    done = cluster.apply(flavor)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "resourceflavor.kueue.x-k8s.io/1xv6e-8 created"
    assert DEPRECATED in done.stderr.splitlines()


def test_jobset_apply_twice_keeps_generation_and_delete_then_get_is_not_found(
    cluster: Cluster,
) -> None:
    first = cluster.apply(jobset("train-run"))
    assert first.stdout.strip() == "jobset.jobset.x-k8s.io/train-run created", first.stderr
    before = yaml.safe_load(cluster.kubectl("get", "jobset", "train-run", "-o", "yaml").stdout)
    # The server defaults groupName inside replicatedJobs; kubectl's JSON merge patch replaces
    # whole lists, so it sends the list again (and says "configured", as against a real
    # server), and the server finds nothing changed: same generation, same resourceVersion.
    again = cluster.apply(jobset("train-run"))
    assert again.stdout.strip() == "jobset.jobset.x-k8s.io/train-run configured", again.stderr
    after = yaml.safe_load(cluster.kubectl("get", "jobset", "train-run", "-o", "yaml").stdout)
    assert before["spec"]["replicatedJobs"][0]["groupName"] == "default"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] == 1
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    deleted = cluster.kubectl("delete", "jobset", "train-run")
    assert deleted.stdout.strip() == 'jobset.jobset.x-k8s.io "train-run" deleted'
    gone = cluster.kubectl("get", "jobset", "train-run")
    assert gone.returncode == 1
    assert gone.stderr.strip() == (
        'Error from server (NotFound): jobsets.jobset.x-k8s.io "train-run" not found'
    )


def test_invalid_and_unknown_fields_are_refused_with_the_real_texts(cluster: Cluster) -> None:
    broken = jobset("broken")
    del broken["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    refused = cluster.apply(broken)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'The JobSet "broken" is invalid: '
        "spec.replicatedJobs[0].template.spec.template: Required value"
    )
    typo = jobset("typo")
    typo["spec"]["replicatedJob"] = []
    strict = cluster.apply(typo)
    assert strict.returncode == 1
    assert strict.stderr.strip() == (
        'Error from server (BadRequest): error when creating "STDIN": JobSet in version '
        '"v1alpha2" cannot be handled as a JobSet: strict decoding error: '
        'unknown field "spec.replicatedJob"'
    )


def test_create_configmap_sends_protobuf_and_is_understood(cluster: Cluster) -> None:
    made = cluster.kubectl("create", "configmap", "settings", "--from-literal=tpu7x-256=32")
    assert made.stdout.strip() == "configmap/settings created", made.stderr
    shown = cluster.kubectl("get", "configmap", "settings", "-o", "yaml")
    assert yaml.safe_load(shown.stdout)["data"] == {"tpu7x-256": "32"}


def _pod(name: str) -> dict[str, Any]:
    """A pod of one ``jax-tpu`` container, outside any workload."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "jax-tpu", "image": "python:3.11"}]},
    }


def test_logs_follow_streams_lines_as_they_are_written(cluster: Cluster) -> None:
    assert cluster.apply(_pod("worker-0")).returncode == 0
    state = cluster.server.state_path
    append_log(state, "default", "worker-0", "jax-tpu", ["completed step: 0"])
    follow = cluster.follow("logs", "-f", "worker-0", "-c", "jax-tpu")
    try:
        assert follow.stdout is not None
        assert follow.stdout.readline() == "completed step: 0\n"  # before the pod has finished
        threading.Timer(
            0.3,
            append_log,
            (state, "default", "worker-0", "jax-tpu", ["completed step: 1"]),
            {"phase": "Succeeded"},
        ).start()
        rest, _ = follow.communicate(timeout=30)
    finally:
        follow.kill()
    assert rest == "completed step: 1\n"
    assert follow.returncode == 0


def test_logs_timestamps_put_each_line_s_write_time_in_front_as_the_kubelet_does(
    cluster: Cluster,
) -> None:
    assert cluster.apply(_pod("worker-1")).returncode == 0
    state = cluster.server.state_path
    append_log(state, "default", "worker-1", "jax-tpu", ["completed step: 0", "step 0 done"])
    with transaction(state) as s:
        written = clock(s)
        advance(s, 90.0)
    append_log(state, "default", "worker-1", "jax-tpu", ["completed step: 1"])
    shown = cluster.kubectl("logs", "worker-1", "-c", "jax-tpu", "--timestamps", "--tail=2")
    assert shown.returncode == 0, shown.stderr
    first, second = shown.stdout.splitlines()
    # RFC 3339 with nine fraction digits, then a space (Go's RFC3339NanoFixed, in UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z step 0 done", first)
    first_at, first_text = split_timestamp(first)
    second_at, second_text = split_timestamp(second)
    assert (first_text, second_text) == ("step 0 done", "completed step: 1")
    assert first_at == pytest.approx(written) and second_at == pytest.approx(written + 90.0)
    plain = cluster.kubectl("logs", "worker-1", "-c", "jax-tpu", "--tail=1")
    assert plain.stdout == "completed step: 1\n"  # without the flag, the lines alone
    with transaction(state) as s:
        advance(s, 60.0)
    again = cluster.kubectl("logs", "worker-1", "-c", "jax-tpu", "--timestamps", "--tail=2")
    assert again.stdout == shown.stdout  # a line keeps the time it was written


def test_one_logs_call_by_selector_gives_every_pods_last_lines_behind_its_name(
    cluster: Cluster,
) -> None:
    for name in ("tails-0", "tails-1", "tails-2"):
        pod = _pod(name)
        pod["metadata"]["labels"] = {"tails": "yes"}
        assert cluster.apply(pod).returncode == 0
    state = cluster.server.state_path
    for name in ("tails-0", "tails-2"):
        append_log(state, "default", name, "jax-tpu", [f"{name} step 0", f"{name} step 1"])
    shown = cluster.kubectl(*tails_argv("tails=yes", "jax-tpu", 1))
    assert shown.returncode == 0, shown.stderr
    got: dict[str, str] = {}
    for line in shown.stdout.splitlines():
        pod_name, rest = split_prefix(line)
        assert pod_name is not None, line
        got[pod_name] = split_timestamp(rest)[1]
    assert got == {"tails-0": "tails-0 step 1", "tails-2": "tails-2 step 1"}
    assert split_prefix("error: container jax-tpu is waiting to start") == (
        None,
        "error: container jax-tpu is waiting to start",
    )


def test_server_binds_loopback_and_stops_when_idle(tmp_path: Path) -> None:
    state = init_state(parse_scenario(SCENARIO), tmp_path / "state.json")
    server = KubeServer(state, idle_seconds=0.5)
    url = server.start()
    host, port = url.removeprefix("http://").split(":")
    assert host == "127.0.0.1"
    deadline = time.monotonic() + 10
    while server.running and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not server.running
    with (
        pytest.raises(ConnectionRefusedError),
        socket.create_connection((host, int(port)), timeout=2),
    ):
        pass
