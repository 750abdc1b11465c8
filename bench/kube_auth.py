"""Benchmark: what reaching a rehearsal's cluster the way GKE is reached costs.

Starts the emulated Google APIs and the Kubernetes API emulator over a small scenario, then
times (wall and CPU of the child processes, ``--runs`` each, default 10):

- ``gcloud container clusters get-credentials`` (once per process that uses kubectl);
- ``kubectl get nodes`` over HTTPS with the kubeconfig it wrote, whose user runs
  ``gke-gcloud-auth-plugin``, the token given as ``$CLOUDSDK_AUTH_ACCESS_TOKEN`` (what a
  rehearsal does);
- the same with only gcloud's token file (``$CLOUDSDK_AUTH_ACCESS_TOKEN_FILE``): the plugin
  asks ``gcloud config config-helper`` on every call;
- ``kubectl get nodes`` over plain HTTP with a static token (how rehearsals reached the
  emulator before), for comparison.

Prints min/median/max wall and median CPU seconds of each, and the load average. Needs the real
gcloud, kubectl and gke-gcloud-auth-plugin.

Usage: python bench/kube_auth.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _timing import median
from tpu_trainer.fakecloud import init_state
from tpu_trainer.fakecloud.scenario import parse_scenario
from tpu_trainer.simcloud.gcloud_env import TOKEN, gcloud_env
from tpu_trainer.simcloud.kube.kubeconfig import write_kubeconfig
from tpu_trainer.simcloud.kube.server import KubeServer
from tpu_trainer.simcloud.rehearsal import PLUGIN_TOKEN_ENV, kube_env, start_emulator

SCENARIO = {
    "project": "demo-project",
    "region": "us-central1",
    "cluster": {"name": "demo-cluster"},
    "node_pools": [
        {"name": "default-pool", "machine_type": "e2-standard-8", "node_count": 3,
         "zone": "us-central1-a"},
    ],
}  # fmt: skip
GET_CREDENTIALS = [
    "gcloud", "container", "clusters", "get-credentials", "demo-cluster",
    "--location=us-central1", "--project=demo-project",
]  # fmt: skip


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``argv``, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {done.stderr[-800:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def report(label: str, samples: list[tuple[float, float]]) -> None:
    walls = [w for w, _ in samples]
    cpu = median([c for _, c in samples])
    print(
        f"{label:<62} wall min {min(walls):.2f}  median {median(walls):.2f}  "
        f"max {max(walls):.2f} s; CPU median {cpu:.2f} s"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    runs = parser.parse_args(argv).runs
    for tool in ("gcloud", "kubectl", "gke-gcloud-auth-plugin"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    with tempfile.TemporaryDirectory(prefix="kube-auth-") as tmp:
        root = Path(tmp)
        init_state(parse_scenario(SCENARIO), root / "state.json")
        google = start_emulator(root)
        kube = kube_env(root)
        base = {
            **gcloud_env(google.base_url, root / "gcloud-config"),
            **kube,
            "HOME": str(root),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        }
        print(f"load average before: {os.getloadavg()}")
        report("gcloud container clusters get-credentials", [
            timed(GET_CREDENTIALS, base) for _ in range(runs)
        ])  # fmt: skip
        with_token = {**base, PLUGIN_TOKEN_ENV: TOKEN}
        get_nodes = ["kubectl", "get", "nodes"]
        report("kubectl get nodes: HTTPS, plugin, $CLOUDSDK_AUTH_ACCESS_TOKEN", [
            timed(get_nodes, with_token) for _ in range(runs)
        ])  # fmt: skip
        report("kubectl get nodes: HTTPS, plugin -> gcloud config-helper", [
            timed(get_nodes, base) for _ in range(runs)
        ])  # fmt: skip
        with KubeServer(root / "state.json", idle_seconds=120) as plain:
            config = write_kubeconfig(root / "plain-kubeconfig", plain.base_url, "plain")
            plain_env = {**base, "KUBECONFIG": str(config)}
            report("kubectl get nodes: plain HTTP, static token (before)", [
                timed(get_nodes, plain_env) for _ in range(runs)
            ])  # fmt: skip
        print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
