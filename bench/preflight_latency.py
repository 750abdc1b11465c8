"""Preflight wall time against scripted cloud latencies (describe 2 s, list 3 s).

The preflight asks the cloud seven questions. Run one after another they would take the sum of
their latencies; run concurrently the whole checklist should take about as long as the slowest
single question. This benchmark measures both on the fake cloud and prints the ratio
(target: preflight wall time <= 1.5 x the slowest single check).

    python bench/preflight_latency.py [--describe 2] [--list 3]
"""

from __future__ import annotations

import argparse
import os
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
from tpu_trainer.fakecloud.rehearsal import prepare
from tpu_trainer.launchers.gke import preflight
from tpu_trainer.launchers.gke.kueue import (
    CLUSTER_QUEUE,
    CONFIGMAP_NAMESPACE,
    LOCAL_QUEUE,
    configmap_name,
)
from tpu_trainer.plan.plan import PlanOptions
from tpu_trainer.store.db import RunStore

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "tests/fixtures/recipes/training/ironwood/mixtral-moe/4k-fp8-tpu7x-4x4x4"
TARGET = 1.5


def _scenario(folder: Path, describe: float, list_: float) -> Path:
    data = {
        "project": "demo-project",
        "region": "us-central1",
        "cluster": {"name": "demo-cluster"},
        "node_pools": [
            {
                "name": "default-pool",
                "machine_type": "e2-standard-8",
                "node_count": 3,
                "zone": "us-central1-ai1a",
            }
        ],
        "reservations": [{"name": "res-a", "zone": "us-central1-ai1a", "host_count": 32}],
        "latencies": {"describe": describe, "list": list_},
    }
    path = folder / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--describe", type=float, default=2.0)
    parser.add_argument("--list", type=float, default=3.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = {**os.environ, "TPU_TRAINER_REHEARSAL_DIR": str(folder / "rehearsal")}
        config, fake_env, _ = prepare(
            _scenario(folder, args.describe, args.list), None, env, fresh=True
        )
        svc = recording_services(
            RunStore(folder / "runs.db"), SilentDisplay(), config.project_id, fake_env
        )
        plan = plan_with_config(
            Request(str(RECIPE)), config, PlanOptions(user="bench", now=datetime(2026, 11, 22))
        )
        g, k, s = svc.gcloud, svc.kubectl, plan.slice
        singles: dict[str, Callable[[], Any]] = {
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
        times = {name: _timed(call) for name, call in singles.items()}
        wall = _timed(lambda: preflight.checks(plan, config, preflight.observe(plan, config, g, k)))
    for name, seconds in times.items():
        print(f"  {name:<20} {seconds:6.2f} s")
    slowest = max(times.values())
    ratio = wall / slowest
    print(f"sequential sum {sum(times.values()):.2f} s, slowest single {slowest:.2f} s")
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    print(
        f"preflight wall time {wall:.2f} s = {ratio:.2f} x slowest (target <= {TARGET}): {verdict}"
    )
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
