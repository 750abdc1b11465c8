"""The pre-flight (what the tool checks before it asks for capacity) through the real gcloud.

A rehearsal's cloud (``simcloud.rehearsal.prepare``): the installed gcloud against the emulated
GKE and Compute APIs on 127.0.0.1, the real kubectl against the emulated Kubernetes API. Timed, each a median of ``--repeat``:

- every question of the checklist alone (gcloud: the active account, which the gcloud shim
  answers, the cluster, its node pools, the workload policy; kubectl: the Kueue objects);
- ``tpu-trainer preflight``'s work: the account, then the seven questions at once, the checks;
- ``train``'s prerequisites stage (``before_create``: the account and the cluster).

Then the real gcloud processes of one checklist and their CPU time. Target: the checklist's
wall time <= 1.5 x its slowest single question (the questions really run at once).

    python bench/preflight_latency.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_with_config
from tpu_trainer.app.services import recording_services
from tpu_trainer.fakecloud.state import recorded_calls
from tpu_trainer.launchers.gke import preflight
from tpu_trainer.launchers.gke.kueue import (
    CLUSTER_QUEUE,
    CONFIGMAP_NAMESPACE,
    configmap_name,
)
from tpu_trainer.plan.naming import LOCAL_QUEUE
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.simcloud.rehearsal import prepare, recorded_problems
from tpu_trainer.store.db import RunStore

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "tests/fixtures/recipes/training/ironwood/mixtral-moe/4k-fp8-tpu7x-4x4x4"
TARGET = 1.5


def _scenario(folder: Path) -> Path:
    data = {
        "project": "demo-project",
        "region": "us-central1",
        "cluster": {"name": "demo-cluster"},
        "node_pools": [
            {
                "name": "default-pool",
                "machine_type": "e2-standard-8",
                "node_count": 3,
                "zone": "us-central1-a",
            }
        ],
        "reservations": [{"name": "res-a", "zone": "us-central1-a", "host_count": 32}],
        "resource_policies": ["tpu7x-128-4x4x4-placement-policy"],
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _median(call: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of each timing (median)")
    args = parser.parse_args()
    repeat = max(1, args.repeat)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "TPU_TRAINER_REHEARSAL_DIR": str(folder / "rehearsal")}
        config, cloud_env, workdir = prepare(_scenario(folder), None, env, fresh=True)
        svc = recording_services(
            RunStore(folder / "runs.db"), SilentDisplay(), config.project_id, cloud_env
        )
        plan = plan_with_config(
            Request(str(RECIPE)), config, PlanOptions(user="bench", now=datetime(2026, 11, 22))
        )
        g, k, s = svc.gcloud, svc.kubectl, plan.slice
        singles: dict[str, Callable[[], Any]] = {
            "gcloud auth list": g.active_account,
            "cluster describe": lambda: g.cluster(config.cluster_name, config.region),
            "node-pools list": lambda: g.node_pools(config.cluster_name, config.region),
            "policy describe": lambda: g.resource_policy_exists(
                str(s.workload_policy), config.region
            ),
            "resourceflavor get": lambda: k.get("resourceflavor", s.kueue_flavor(1)),
            "clusterqueue get": lambda: k.get("clusterqueue", CLUSTER_QUEUE),
            "localqueue get": lambda: k.get("localqueue", LOCAL_QUEUE, CONFIGMAP_NAMESPACE),
            "configmap get": lambda: k.get(
                "configmap", configmap_name(config.cluster_name), CONFIGMAP_NAMESPACE
            ),
        }
        times = {name: _median(call, repeat) for name, call in singles.items()}

        def checklist() -> None:
            preflight.require_account(g)
            preflight.checks(plan, config, preflight.observe(plan, config, g, k))

        wall = _median(checklist, repeat)
        prerequisites = _median(lambda: preflight.before_create(plan, config, g), repeat)
        state = workdir / "state.json"
        before_calls, before_cpu = len(recorded_calls(state)), _children_cpu()
        once = _median(checklist, 1)
        calls = recorded_calls(state)[before_calls:]
        cpu = _children_cpu() - before_cpu
        problems = recorded_problems(workdir)
    print(
        f"load average (1 min) at the start {load:.1f} on {os.cpu_count()} CPUs; medians of {repeat}"
    )
    for name, seconds in times.items():
        print(f"  {name:<20} {seconds:6.2f} s")
    slowest = max(times.values())
    gcloud_calls = [c for c in calls if c[0] == "gcloud"]
    print(f"sequential sum {sum(times.values()):.2f} s, slowest single {slowest:.2f} s")
    print(f"train's prerequisites (account, cluster) {prerequisites:.2f} s")
    print(
        f"one checklist: {once:.2f} s wall, {len(gcloud_calls)} gcloud processes (and the "
        f"kubectl ones), {cpu:.2f} s of CPU in all of them"
    )
    if problems:
        print(f"emulator: {len(problems)} exchanges broke the discovery documents")
    ratio = wall / slowest
    verdict = "PASS" if ratio <= TARGET and not problems else "FAIL"
    print(
        f"preflight wall time {wall:.2f} s = {ratio:.2f} x slowest (target <= {TARGET}): {verdict}"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
