"""The run template and the launch-path registry: a GKE run plans once (a zone change is
``Plan.with_zone``), every launch path is registered under the name the store records, and each
recorded kind of resource has a deleter."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import CONFIG, NOW, RECIPES, RECIPES_ROOT
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.outcome import RunOutcome, TeardownReport
from tpu_trainer.app.planning import Request, plan_with_config
from tpu_trainer.app.resume import FINISHED
from tpu_trainer.app.services import Services
from tpu_trainer.config.load import load_config
from tpu_trainer.infra.runner import DryRunRunner, SubprocessRunner
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.launchers.gke.run import GkeRun
from tpu_trainer.launchers.gke.teardown import Teardown
from tpu_trainer.launchers.kuberay.cluster import KubeRayTeardown
from tpu_trainer.launchers.registry import DELETERS, LAUNCHERS, DeleteOptions, deleter_for
from tpu_trainer.launchers.tpu_vm.teardown import TpuVmTeardown
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.recipes import read as recipe_read
from tpu_trainer.recipes import reader as recipe_reader
from tpu_trainer.recipes.read import read_recipe_file
from tpu_trainer.recipes.reader import parse_recipe
from tpu_trainer.recipes.recipe import Recipe
from tpu_trainer.recipes.resolve import RecipeRef
from tpu_trainer.store.db import RunStatus, RunStore

pytestmark = pytest.mark.unit

OTHER_ZONE = "us-east5-b"


class _NothingToDelete:
    def run(self, run_id: str) -> TeardownReport:  # noqa: ARG002
        return TeardownReport()


def _services(tmp_path: Path) -> Services:
    store = RunStore(tmp_path / "store" / "runs.db")
    runner = DryRunRunner(SubprocessRunner(), on_record=lambda _: None)
    return Services(runner, store, SilentDisplay(), "demo-project")


def test_a_gke_run_whose_pool_lands_in_another_zone_reads_its_recipe_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = Path(RECIPES["classic"]).parent
    shutil.copytree(RECIPES_ROOT / folder, tmp_path / folder.name)
    recipe = tmp_path / folder.name / "xpk"
    config = load_config(CONFIG, require=True)
    assert config is not None and config.default_zone != OTHER_ZONE
    reads: list[str] = []
    parses: list[str] = []

    def counted_read(ref: RecipeRef) -> str:
        reads.append("r")
        return read_recipe_file(ref)

    def counted_parse(text: str, source: str) -> Recipe:
        parses.append("p")
        return parse_recipe(text, source)

    monkeypatch.setattr(recipe_read, "read_recipe_file", counted_read)
    monkeypatch.setattr(recipe_reader, "parse_recipe", counted_parse)
    opts = PlanOptions(user="test_user", now=NOW)
    plan = plan_with_config(Request(str(recipe)), config, opts)

    submitted: list[Plan] = []

    def provision(self: GkeRun, plan: Plan, outcome: RunOutcome) -> str:  # noqa: ARG001
        outcome.zone = OTHER_ZONE
        return OTHER_ZONE

    def submit(self: GkeRun, plan: Plan, script: Path, zone: str, outcome: RunOutcome) -> None:  # noqa: ARG001
        submitted.append(plan)
        self.store.finish_run(self.run_id, RunStatus.SUCCEEDED)

    def nothing(*_: object) -> None:
        return None

    monkeypatch.setattr(GkeRun, "_provision", provision)
    monkeypatch.setattr(GkeRun, "_configure", nothing)
    monkeypatch.setattr(GkeRun, "_submit", submit)
    monkeypatch.setattr(GkeRun, "_follow", lambda *_: FINISHED)
    monkeypatch.setattr(GkeRun, "_results", nothing)
    monkeypatch.setattr(GkeRun, "_teardown", lambda _: _NothingToDelete())
    run = GkeRun(_services(tmp_path), config, plan, "test", run_id="0c0c0c0c")
    outcome = run.start()

    assert outcome.status is RunStatus.SUCCEEDED, outcome.error
    assert (len(reads), len(parses)) == (1, 1)
    [used] = submitted
    assert used.value_of("ZONE") == OTHER_ZONE
    assert OTHER_ZONE in plan.files[1].read_text(encoding="utf-8")
    # the same plan as planning for that zone from the start
    assert used == plan_with_config(Request(str(recipe)), config, replace(opts, zone=OTHER_ZONE))


def test_with_zone_keeps_a_zone_given_with_var() -> None:
    from conftest import plan_for

    plan = plan_for(RECIPES["classic"], variables=(("ZONE", "europe-west4-a"),))
    assert plan.with_zone(OTHER_ZONE) == plan
    moved = plan_for(RECIPES["classic"]).with_zone(OTHER_ZONE)
    assert moved == plan_for(RECIPES["classic"], zone=OTHER_ZONE)


def test_every_launch_path_has_its_launcher_under_the_stored_name() -> None:
    assert set(LAUNCHERS) == set(LaunchPath)
    for path, cls in LAUNCHERS.items():
        assert cls.launch_path is path
    assert [p.value for p in LaunchPath] == ["xpk", "tpu-vm", "kuberay", "local", "ray"]


def test_each_recorded_kind_finds_the_teardown_that_deletes_it(tmp_path: Path) -> None:
    svc = _services(tmp_path)
    opts = DeleteOptions(dry_run=True)
    assert set(DELETERS) >= {"workload", "nodepool", "workload-policy", "tpu-vm"}
    assert type(deleter_for(svc, [], opts)) is Teardown
    assert type(deleter_for(svc, ["nodepool", "workload"], opts)) is Teardown
    assert type(deleter_for(svc, ["tpu-vm", "queued-resource"], opts)) is TpuVmTeardown
    assert type(deleter_for(svc, ["raycluster", "configmap"], opts)) is KubeRayTeardown
