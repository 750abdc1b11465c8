"""The Kueue LocalQueue a workload goes to: a gcluster recipe's ``--queue`` (xpk's
``multislice-queue`` otherwise), in the plan, the Kueue repairs and the pre-flight checks."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from conftest import CONFIG, NOW, RECIPES, RECIPES_ROOT, plan_for
from test_preflight import _cluster, _pool
from tpu_trainer.app.plan_json import plan_json
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.cli.render_plan import slice_table
from tpu_trainer.config.load import read_config
from tpu_trainer.errors import InputError
from tpu_trainer.fakecloud.crd import validate
from tpu_trainer.launchers.gke.kueue import (
    cluster_queue,
    kueue_findings,
    local_queue,
    resource_flavor,
)
from tpu_trainer.launchers.gke.preflight import Observed, checks
from tpu_trainer.plan.plan import Level, Plan, PlanOptions

pytestmark = pytest.mark.unit

GCLUSTER = "training/ironwood/gemmoe-26b/4k-bf16-tpu7x-4x4x4"


def _gcluster_plan(tmp_path: Path, queue: str) -> Plan:
    folder = tmp_path / GCLUSTER
    shutil.copytree(RECIPES_ROOT / GCLUSTER, folder)
    script = folder / "cluster_toolkit" / "run_recipe.sh"
    script.write_text(script.read_text().replace("--queue multislice-queue", f"--queue {queue}"))
    return plan_request(
        Request(str(script), config_path=CONFIG), PlanOptions(user="t", now=NOW, profiler=None)
    )


def test_the_plan_takes_the_gcluster_recipes_queue_and_shows_it(tmp_path: Path) -> None:
    plan = _gcluster_plan(tmp_path, "team-a-queue")
    assert plan.local_queue == "team-a-queue"
    assert plan_json(plan)["slice"]["kueue_local_queue"] == "team-a-queue"
    shown = io.StringIO()
    Console(file=shown, width=120).print(slice_table(plan))
    assert "LocalQueue" in shown.getvalue() and "team-a-queue" in shown.getvalue()
    assert ("--queue", "team-a-queue") in plan.xpk_flags
    assert plan_for(RECIPES["classic"]).local_queue == "multislice-queue"  # xpk's own


def test_a_queue_kubernetes_would_refuse_is_an_error_before_anything(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        _gcluster_plan(tmp_path, "Team_Queue")
    assert "--queue 'Team_Queue' cannot name a Kueue LocalQueue" in info.value.message


def test_kueue_repairs_make_the_named_local_queue(tmp_path: Path) -> None:
    plan = _gcluster_plan(tmp_path, "team-a-queue")
    s, n = plan.slice, plan.num_slices
    [finding] = kueue_findings(
        "c",
        s,
        n,
        flavor=resource_flavor(s, n),
        cluster_queue=cluster_queue(s, n),
        configmap_data=None,
        local_queue_exists=False,
        xpk_configmap=False,
        local_queue_name=plan.local_queue,
    )
    assert finding.subject == "LocalQueue team-a-queue"
    assert "the recipe's --queue submits workloads to it" in finding.message
    assert finding.manifest is not None
    assert finding.manifest["metadata"] == {"name": "team-a-queue", "namespace": "default"}
    assert validate(dict(finding.manifest)) == []


def _observed(plan: Plan, local: bool) -> Observed:
    s, n = plan.slice, plan.num_slices
    key, value = s.configmap_entry(n)
    return Observed(
        _cluster(),
        [_pool(zone="us-central1-ai1a")],
        True,
        resource_flavor(s, n),
        cluster_queue(s, n),
        {"data": {key: value}},
        local_queue(name=plan.local_queue) if local else None,
    )


def test_preflight_checks_the_recipes_local_queue(tmp_path: Path) -> None:
    plan = _gcluster_plan(tmp_path, "team-a-queue")
    config = read_config(CONFIG)
    ready = {c.name: c for c in checks(plan, config, _observed(plan, True))}
    assert ready["kueue-localqueue"].status is Level.PASS
    assert ready["kueue-localqueue"].message.startswith("LocalQueue team-a-queue ready for")
    missing = {c.name: c for c in checks(plan, config, _observed(plan, False))}
    check = missing["kueue-localqueue"]
    assert check.status is Level.FAIL
    assert check.message.startswith("LocalQueue team-a-queue does not exist")
    assert "name: team-a-queue" in check.fix


class _Kubectl:
    def __init__(self) -> None:
        self.asked: list[tuple[str, ...]] = []

    def get(self, kind: str, name: str, namespace: str | None = None) -> None:
        self.asked.append((kind, name, namespace or ""))


class _Gcloud:
    """A cluster with nothing: only Kueue's questions matter here."""

    def cluster(self, *_: str) -> None:
        return None

    def node_pools(self, *_: str) -> list[object]:
        return []

    def resource_policy_exists(self, *_: str) -> bool:
        return True


def test_preflight_asks_the_cluster_for_the_recipes_local_queue(tmp_path: Path) -> None:
    from tpu_trainer.launchers.gke.preflight import observe

    plan = _gcluster_plan(tmp_path, "team-a-queue")
    kubectl = _Kubectl()
    observe(plan, read_config(CONFIG), _Gcloud(), kubectl)  # type: ignore[arg-type]
    assert ("localqueue", "team-a-queue", "default") in kubectl.asked
    assert not [a for a in kubectl.asked if a[:2] == ("localqueue", "multislice-queue")]
