"""Each kubectl command line a GKE rehearsal runs (the lines the stand-in records in a failover
rehearsal, in their order: the Kueue and ConfigMap checks, the ClusterQueue repair, the pods
followed, worker 0's log followed, the other hosts' last lines, the JobSet's end) gives the
same answer through the real kubectl against the emulated API server as through the stand-in,
from two copies of the same state: the same exit code and error text, the same log text, and
every field of the stand-in's JSON in the emulator's (which adds what a real server adds:
uid, resourceVersion, the CRDs' defaults, the pod templates)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from test_simkube_kubectl import Cluster
from test_simkube_workloads import SCENARIO
from tpu_trainer.fakecloud import fake_cloud_env, write_shims
from tpu_trainer.fakecloud.initial import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import transaction
from tpu_trainer.fakecloud.workloads import jobset_uid, new_workload, pod_names
from tpu_trainer.launchers.gke import kueue
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

RUN = "root-llama-20261124-1239"
SERVER_FIELDS = frozenset({"uid", "resourceVersion", "creationTimestamp", "generation"})
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SCENARIO_WITH_CONFIGMAP = {
    **SCENARIO,
    "kueue": {**SCENARIO["kueue"], "configmap": {"v6e-8": "2"}},  # type: ignore[dict-item]
}


def _table(pods: list[str], queue_file: Path) -> list[list[str]]:
    """The kubectl lines of a GKE rehearsal, for this scenario's slice and workload."""
    ns = "--namespace=default"
    selector = f"--selector=jobset.sigs.k8s.io/jobset-name={RUN}"
    return [
        ["get", "clusterqueue", "cluster-queue", "-o", "json"],
        ["get", "localqueue", "multislice-queue", ns, "-o", "json"],
        ["get", "resourceflavor", "1xv6e-8", "-o", "json"],
        ["get", "resourceflavor", "1xv6e-16", "-o", "json"],
        ["get", "configmap", "demo-cluster-resources-configmap", ns, "-o", "json"],
        ["get", "pods", "-o", "json", selector],
        ["get", "jobset", RUN, ns, "-o", "json"],
        [
            "get",
            "workloads.kueue.x-k8s.io",
            "-o",
            "json",
            f"--selector=kueue.x-k8s.io/job-uid={jobset_uid(RUN)}",
            ns,
        ],
        ["logs", pods[0], "--container=jax-tpu", "--follow"],
        ["apply", "-f", str(queue_file), "-o", "json"],
        ["get", "clusterqueue", "cluster-queue", "-o", "json"],
        ["get", "pods", "-o", "json", selector],
        ["logs", pods[0], "--container=jax-tpu", "--follow"],
        ["get", "pods", "-o", "json", selector],
        ["logs", pods[0], "--container=jax-tpu", "--follow"],
        ["logs", pods[1], "--container=jax-tpu", "--tail=400"],
        ["get", "pods", "-o", "json", selector],
        ["get", "jobset", RUN, ns, "-o", "json"],
        ["get", "jobset", "other-run", ns, "-o", "json"],
    ]


def _state(path: Path) -> tuple[Path, list[str]]:
    """The scenario's state with the run's workload submitted (as xpk's stand-in does)."""
    state = init_state(parse_scenario(SCENARIO_WITH_CONFIGMAP), path)
    with transaction(state) as s:
        wl = new_workload(
            s, RUN, Slice.parse("v6e-8"), num_slices=1, zone="us-central1-a",
            image="img", command="python3 train.py", parallel_flag=False,
        )  # fmt: skip
        s["workloads"][RUN] = wl
    return state, [name for _, _, name in pod_names(wl)]


def _contained(small: Any, big: Any, where: str = "") -> list[str]:
    """Where ``small`` (the stand-in's JSON) is not in ``big`` (the emulator's)."""
    if isinstance(small, dict) and isinstance(big, dict):
        out = []
        for key, value in small.items():
            if (where.endswith(".metadata") and key in SERVER_FIELDS) or key == LAST_APPLIED:
                continue
            if key not in big:
                out.append(f"{where}.{key}: missing")
            else:
                out += _contained(value, big[key], f"{where}.{key}")
        return out
    if isinstance(small, list) and isinstance(big, list):
        if len(small) != len(big):
            return [f"{where}: {len(small)} items, not {len(big)}"]
        return [
            d
            for n, (a, b) in enumerate(zip(small, big, strict=True))
            for d in _contained(a, b, f"{where}[{n}]")
        ]
    return [] if small == big else [f"{where}: {small!r} != {big!r}"]


def _differences(
    argv: list[str], stand: subprocess.CompletedProcess[str], real: subprocess.CompletedProcess[str]
) -> list[str]:
    line = " ".join(argv)
    if stand.returncode != real.returncode:
        return [f"{line}: exit {stand.returncode} != {real.returncode} ({real.stderr.strip()})"]
    if stand.returncode != 0:
        said = real.stderr
        if argv[0] == "logs":  # the real kubectl words a missing pod its own way (the tool
            # reads no logs error): `error: error from server (NotFound): pods "P" not found in
            # namespace "default"`
            said = said.replace("error: error from server", "Error from server").replace(
                ' not found in namespace "default"', " not found"
            )
        return [] if stand.stderr == said else [f"{line}: {stand.stderr!r} != {real.stderr!r}"]
    if "-o" not in argv:
        return [] if stand.stdout == real.stdout else [f"{line}: the logs differ"]
    return [f"{line}: {d}" for d in _contained(json.loads(stand.stdout), json.loads(real.stdout))]


def test_every_kubectl_line_of_a_rehearsal_answers_as_through_the_stand_in(tmp_path: Path) -> None:
    stand_state, pods = _state(tmp_path / "stand-in.json")
    real_state, same = _state(tmp_path / "emulated.json")
    assert pods == same
    queue_file = tmp_path / "queue.json"
    queue_file.write_text(json.dumps(kueue.cluster_queue(Slice.parse("v6e-8"), 1)))
    write_shims(tmp_path / "bin")
    stand_env = fake_cloud_env(tmp_path / "bin", stand_state)
    differences: list[str] = []
    answered: list[tuple[int, int]] = []
    with KubeServer(real_state, idle_seconds=120) as server:
        real = Cluster(tmp_path, server)
        for argv in _table(pods, queue_file):
            stand = subprocess.run(
                [str(tmp_path / "bin" / "kubectl"), *argv],
                env=stand_env, capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            emulated = real.kubectl(*argv)
            differences += _differences(argv, stand, emulated)
            answered.append((stand.returncode, emulated.returncode))
    assert differences == []
    # the missing flavor, Kueue's hold (no pod yet), the pods waiting to start, the missing JobSet
    failed = [n for n, codes in enumerate(answered) if codes == (1, 1)]
    assert failed == [3, 8, 12, 18]
