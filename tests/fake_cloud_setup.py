"""A fake cloud for tests: the base scenario, a fixture that makes a cloud from it, and the
gcloud command lines tests send it."""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tpu_trainer.fakecloud import (
    fake_cloud_env,
    init_state,
    load_scenario,
    read_state,
    write_shims,
)
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.simcloud.rehearsal import emulated_env

DOC = Path(__file__).resolve().parents[1] / "docs" / "simulated-cloud.md"
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
        {"name": "res-degraded", "zone": "us-central1-b", "host_count": 64, "health": "DEGRADED"},
        {"name": "res-ok", "zone": "us-central1-c", "host_count": 64, "in_use_hosts": 16},
    ],
    "resource_policies": [POLICY],
    "behaviours": {"conflict_on_create": ["stuck-pool"]},
}


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


def cloud_factory(tmp_path: Path) -> MakeCloud:
    """Makes a fake cloud from BASE with some top-level sections replaced or merged (the
    ``make_cloud`` fixture of the fake-cloud tests)."""

    def make(**sections: Any) -> Cloud:
        data = copy.deepcopy(BASE)
        for key, value in sections.items():
            data[key] = {**data[key], **value} if isinstance(data.get(key), dict) else value
        scenario_file = tmp_path / "scenario.yaml"
        scenario_file.write_text(yaml.safe_dump(data), encoding="utf-8")
        state = init_state(load_scenario(scenario_file), tmp_path / "state.json")
        write_shims(tmp_path / "bin")
        cloud = Cloud(state, emulated_env(tmp_path, fake_cloud_env(tmp_path / "bin", state)))
        # kubectl reaches the cluster the way it reaches GKE: get-credentials writes its config
        access = KubeAccess(data["project"], data["region"], data["cluster"]["name"])
        signed_in = cloud.run(*access.argv)
        assert signed_in.returncode == 0 or not data.get("account"), signed_in.stderr
        return cloud

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


def _in_use(cloud: Cloud, reservation: str, zone: str) -> int:
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
    value: int = found["aggregateReservation"]["inUseHostCount"]  # int32: a JSON number
    return value
