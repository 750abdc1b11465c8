"""Each kubectl command line a GKE rehearsal runs (the lines of a failover rehearsal, in their
order: the Kueue and ConfigMap checks, the ClusterQueue repair, the pods followed, worker 0's
log followed, the other hosts' last lines, the JobSet's end) gives, through the real kubectl
against the emulated API server, the answer recorded in ``golden/simkube/failover_kubectl.json``
(what the Python kubectl stand-in the emulator replaced printed for the same state): the same
exit code and error text, the same log text, and every recorded JSON field (the emulator adds
what a real server adds: uid, resourceVersion, the CRDs' defaults, the pod templates).
``pytest --update-golden`` records the emulator's answers instead."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from test_simkube_kubectl import Cluster
from test_simkube_workloads import SCENARIO
from tpu_trainer.fakecloud.initial import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.fakecloud.state import transaction
from tpu_trainer.fakecloud.workloads import jobset_uid, new_workload, pod_names
from tpu_trainer.launchers.gke import kueue
from tpu_trainer.plan.slices import Slice
from tpu_trainer.simcloud.kube.server import KubeServer

pytestmark = pytest.mark.e2e

GOLDEN = Path(__file__).resolve().parent / "golden" / "simkube" / "failover_kubectl.json"
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


def _said(argv: list[str], stderr: str) -> str:
    """The error text, a missing pod's log as the recorded answers word it (the real kubectl
    says `error: error from server (NotFound): pods "P" not found in namespace "default"`; the
    tool reads no logs error)."""
    if argv[0] != "logs":
        return stderr
    return stderr.replace("error: error from server", "Error from server").replace(
        ' not found in namespace "default"', " not found"
    )


def _differences(
    argv: list[str], recorded: dict[str, Any], real: subprocess.CompletedProcess[str]
) -> list[str]:
    line = " ".join(argv)
    if recorded["exit"] != real.returncode:
        return [f"{line}: exit {recorded['exit']} != {real.returncode} ({real.stderr.strip()})"]
    if real.returncode != 0:
        said = _said(argv, real.stderr)
        return [] if recorded["stderr"] == said else [f"{line}: {recorded['stderr']!r} != {said!r}"]
    if "-o" not in argv:
        return [] if recorded["stdout"] == real.stdout else [f"{line}: the logs differ"]
    found = _contained(json.loads(recorded["stdout"]), json.loads(real.stdout))
    return [f"{line}: {d}" for d in found]


def test_every_kubectl_line_of_a_rehearsal_answers_as_recorded(
    tmp_path: Path, update_golden: bool
) -> None:
    real_state, pods = _state(tmp_path / "emulated.json")
    queue_file = tmp_path / "queue.json"
    queue_file.write_text(json.dumps(kueue.cluster_queue(Slice.parse("v6e-8"), 1)))
    recorded = json.loads(GOLDEN.read_text(encoding="utf-8"))
    table = _table(pods, queue_file)
    assert [r["argv"] for r in recorded] == [
        [a.replace(str(queue_file), "{queue_file}") for a in argv] for argv in table
    ]
    differences: list[str] = []
    answers: list[dict[str, Any]] = []
    with KubeServer(real_state, idle_seconds=120) as server:
        real = Cluster(tmp_path, server)
        for argv, expected in zip(table, recorded, strict=True):
            emulated = real.kubectl(*argv)
            differences += _differences(argv, expected, emulated)
            answers.append(
                {
                    **expected,
                    "exit": emulated.returncode,
                    "stdout": emulated.stdout,
                    "stderr": _said(argv, emulated.stderr),
                }
            )
    if update_golden:
        GOLDEN.write_text(json.dumps(answers, indent=1) + "\n", encoding="utf-8")
        return
    assert differences == []
    # the missing flavor, Kueue's hold (no pod yet), the pods waiting to start, the missing JobSet
    assert [n for n, r in enumerate(answers) if r["exit"] == 1] == [3, 8, 12, 18]
