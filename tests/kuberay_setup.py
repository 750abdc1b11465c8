"""A simulated cloud for KubeRay runs: a scenario's cluster behind the Kubernetes API emulator
(the real kubectl), a run store recording every command under the run, and the fixture recipe's
plan."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from conftest import CONFIG, NOW, RECIPES, RECIPES_ROOT
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.fakecloud import Scenario, fake_cloud_env, init_state, write_shims
from tpu_trainer.fakecloud.state import read_state
from tpu_trainer.infra.kube_access import KubeAccess
from tpu_trainer.infra.kubectl import Kubectl
from tpu_trainer.infra.runner import CommandResult, SubprocessRunner
from tpu_trainer.launchers.kuberay.manifests import RaySettings
from tpu_trainer.launchers.kuberay.run import KubeRayRun
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.simcloud.rehearsal import emulated_env
from tpu_trainer.store.db import RunStore


@dataclass
class Cloud:
    state: Path
    store: RunStore
    runner: SubprocessRunner
    plan: Plan
    recipe: Path
    kubectl: Kubectl
    """kubectl for the scenario's cluster, with its credentials from get-credentials (as
    ``train`` builds it)."""


TOKEN = "kuberay-made-token-5f2c9e0a7b"
RAY_LOG = Path(__file__).resolve().parent / "fixtures" / "maxtext_logs" / "ray_v6e_4x4.log"
RANK = "\x1b[36m(TrainController pid=2210)\x1b[0m - (ip=10.12.3.6, pid=4411) world_rank=0, local_rank=0, node_rank=0\n"
CPU_ONLY: dict[str, Any] = {
    "project": "demo-project",
    "region": "us-central1",
    "cluster": {"name": "demo-cluster"},
    # CPU nodes for the Ray head; no TPU node pool: the TPU workers stay Pending
    "node_pools": [
        {"name": "default-pool", "machine_type": "e2-standard-8", "node_count": 3,
         "zone": "us-central1-a"}
    ],
}  # fmt: skip


def ray_job_chunks() -> list[str]:
    """A Ray Train job's log (12 MaxText steps on worker 0, whose rank the controller names),
    in three chunks."""
    lines = RAY_LOG.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if "Started training worker group" in line)
    lines.insert(at + 1, RANK)
    third = len(lines) // 3
    return ["".join(lines[:third]), "".join(lines[third : 2 * third]), "".join(lines[2 * third :])]


SETTINGS = RaySettings(image="us-docker.pkg.dev/demo-project/images/ray-maxtext:2.60.0")


def kuberay_run(cloud: Cloud, run_id: str, **kwargs: Any) -> KubeRayRun:
    """The KubeRay launcher for the cloud's recipe, polling fast, with no ``RAY_AUTH_TOKEN``."""
    return KubeRayRun(
        cloud.store,
        cloud.runner,
        SilentDisplay(),
        cloud.plan,
        str(cloud.recipe),
        SETTINGS,
        run_id=run_id,
        poll_seconds=0.05,
        env={},
        kubectl=cloud.kubectl,
        **kwargs,
    )


@contextmanager
def kuberay_cloud(
    tmp_path: Path, scenario: Scenario, run_id: str, overrides: tuple[tuple[str, str], ...]
) -> Iterator[Cloud]:
    """The scenario's cloud, and the tee-upload recipe planned with ``overrides``."""
    state = tmp_path / "state.json"
    init_state(scenario, state)
    write_shims(tmp_path / "bin")
    env = emulated_env(tmp_path, fake_cloud_env(tmp_path / "bin", state))
    env.pop("RAY_AUTH_TOKEN", None)
    store = RunStore(tmp_path / "store" / "runs.db")

    def record(result: CommandResult) -> None:
        store.record_command(run_id, result)

    recipe = tmp_path / "recipes" / RECIPES["tee-upload"]
    shutil.copytree(RECIPES_ROOT / RECIPES["tee-upload"], recipe)
    plan = plan_request(
        Request(str(recipe), config_path=CONFIG),
        PlanOptions(user="test_user", now=NOW, overrides=overrides),
    )
    runner = SubprocessRunner(env=env, recorder=record)
    access = KubeAccess(scenario.project, scenario.region, scenario.cluster.name)
    try:
        yield Cloud(state, store, runner, plan, recipe, Kubectl(runner, access=access))
    finally:
        store.close()


def kinds_left(state: Path) -> set[str]:
    """The kinds a KubeRay run makes (or its operator makes for it) still in the cluster."""
    data = read_state(state)
    kept = [key.split("/")[0] for key in data["k8s"]]
    kept += [key.split("/")[1] for key in data.get("kube_api", {}).get("objects", {})]
    return set(kept) & {"ConfigMap", "rayclusters", "secrets", "services", "pods"}
