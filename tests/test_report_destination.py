"""Where a run's README report goes (the model folder, or beside the run store) and what its
row says about how the run ended."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import CONFIG, NOW, RECIPES, RECIPES_ROOT
from tpu_trainer.app.display import SilentDisplay
from tpu_trainer.app.planning import Request, plan_request
from tpu_trainer.app.results import (
    Ending,
    model_folder,
    record_results,
    report_from_json,
    report_to_json,
    write_stored_report,
)
from tpu_trainer.app.stages import Stages
from tpu_trainer.errors import InputError
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.plan.plan import Plan, PlanOptions
from tpu_trainer.store.db import RunMode, RunStatus, RunStore, StepRow

pytestmark = pytest.mark.unit

RECIPE = RECIPES_ROOT / RECIPES["tee-upload"]  # mixtral-moe/4k-fp8-tpu7x-4x4x4, no xpk level
RUN = "r0001"


def _copy(tmp_path: Path, *parts: str) -> Path:
    """The fixture recipe's folder copied to ``tmp_path/parts``."""
    folder = tmp_path.joinpath(*parts)
    shutil.copytree(RECIPE, folder)
    return folder


def _plan(folder: Path) -> Plan:
    return plan_request(
        Request(str(folder / "run_recipe.sh"), config_path=CONFIG),
        PlanOptions(user="t", now=NOW, profiler=None),
    )


def _log(tmp_path: Path, steps: int = 6) -> Path:
    lines = []
    for n in range(steps):
        seconds = 100.0 if n == 0 else 2.5
        loss = 10.0 - 0.5 * n
        lines.append(
            f"completed step: {n}, seconds: {seconds:.3f}, TFLOP/s/device: 700.000, "
            f"Tokens/s/device: {4096 * 4 / seconds:.3f}, total_weights: {4096 * 4 * 128}, "
            f"loss: {loss:.3f}"
        )
    log = tmp_path / "worker0.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return log


def _record(
    tmp_path: Path,
    plan: Plan,
    mode: RunMode = RunMode.REAL,
    ending: tuple[RunStatus, str | None] = (RunStatus.SUCCEEDED, None),
    *,
    in_store: bool = True,
) -> tuple[RunStore, SilentDisplay, Path | None]:
    """Record a run that ended as ``ending``: in the store first (as the GKE run does), or
    passed to record_results (as the local and Ray runs do)."""
    store = RunStore(tmp_path / "store" / "runs.db", mode)
    store.create_run(
        RUN,
        model=plan.model,
        request="r",
        launcher=LaunchPath.XPK,
        device_type=plan.slice.device_type,
        precision=plan.precision.value,
        project=None,
        cluster=None,
        region=None,
        zone=None,
        plan_json=None,
    )
    if in_store:
        store.finish_run(RUN, *ending)
    display = SilentDisplay()
    stages = Stages(store, display, RUN)
    recorded = record_results(
        stages, plan, _log(tmp_path), "en", ending=None if in_store else Ending(*ending)
    )
    assert recorded is not None
    return store, display, recorded.readme


def _tree(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_model_folder_with_and_without_the_xpk_level(tmp_path: Path) -> None:
    flat = _copy(tmp_path, "a", "mixtral-moe", "4k-fp8-tpu7x-4x4x4")
    assert model_folder(_plan(flat)) == tmp_path / "a" / "mixtral-moe"
    xpk = _copy(tmp_path, "b", "mixtral-moe", "4k-fp8-tpu7x-4x4x4", "xpk")
    assert model_folder(_plan(xpk)) == tmp_path / "b" / "mixtral-moe"
    for parts in (("c", "scratch"), ("d", "mixtral-moe", "4k-fp8-tpu7x-4x4x4", "copy")):
        assert model_folder(_plan(_copy(tmp_path, *parts))) is None


def test_a_recipe_outside_the_layout_never_writes_into_the_folder_above(tmp_path: Path) -> None:
    downloads = tmp_path / "downloads"
    folder = _copy(tmp_path, "downloads", "scratch")
    before = _tree(downloads)
    store, display, readme = _record(tmp_path, _plan(folder))
    assert readme == tmp_path / "store" / "runs" / RUN / "README.md"
    assert f"<!-- tpu-trainer run {RUN} -->" in readme.read_text("utf-8")
    assert len(list(readme.parent.glob(f"*-{RUN}-*.png"))) == 3
    assert _tree(downloads) == before
    assert any("not in the tpu-recipes layout" in m for m in display.messages)
    with pytest.raises(InputError, match="no model folder"):
        write_stored_report(store, RUN, "en", to_recipe=True)


@pytest.mark.parametrize(
    ("ending", "in_store", "mark"),
    [
        ((RunStatus.FAILED, "RESOURCE_EXHAUSTED: out of memory"), True, "FAILED"),
        ((RunStatus.FAILED, "the workload did not finish within 60 s"), True, "TIMED OUT"),
        ((RunStatus.CANCELLED, "interrupted"), True, "CANCELLED"),
        ((RunStatus.FAILED, "MaxText exited with 1"), False, "FAILED"),
    ],
)
def test_a_run_that_did_not_succeed_says_so(
    tmp_path: Path, ending: tuple[RunStatus, str | None], in_store: bool, mark: str
) -> None:
    folder = _copy(tmp_path, "t", "mixtral-moe", "4k-fp8-tpu7x-4x4x4")
    _, _, readme = _record(tmp_path, _plan(folder), ending=ending, in_store=in_store)
    assert readme == tmp_path / "t" / "mixtral-moe" / "README.md"
    (row,) = [
        line for line in readme.read_text("utf-8").splitlines() if RUN in line and "|" in line
    ]
    assert f"**{mark}**" in row
    assert f"— {mark}" in readme.read_text("utf-8")


def test_a_rehearsal_stays_out_of_the_recipes_tree_unless_asked(tmp_path: Path) -> None:
    tree = tmp_path / "t"
    folder = _copy(tmp_path, "t", "mixtral-moe", "4k-fp8-tpu7x-4x4x4")
    before = _tree(tree)
    store, display, readme = _record(tmp_path, _plan(folder), RunMode.REHEARSAL)
    assert readme == tmp_path / "store" / "runs" / RUN / "README.md"
    assert "REHEARSAL (fake cloud, not a measurement)" in readme.read_text("utf-8")
    assert _tree(tree) == before
    assert any("--to-recipe" in m for m in display.messages)
    row = store.run(RUN)
    assert row is not None and row.mode is RunMode.REHEARSAL

    written, plots, changed, _ = write_stored_report(store, RUN, "en", to_recipe=True)
    assert written == tree / "mixtral-moe" / "README.md"
    assert changed and len(plots) == 3
    text = written.read_text("utf-8")
    assert "**REHEARSAL (fake cloud, not a measurement)**" in text
    assert sorted(set(_tree(tree)) - set(before)) == sorted(
        ["mixtral-moe/README.md", *(str(p.relative_to(tree)) for p in plots)]
    )


def test_a_read_only_readme_keeps_the_metrics_and_says_how_to_report_later(
    tmp_path: Path,
) -> None:
    folder = _copy(tmp_path, "t", "mixtral-moe", "4k-fp8-tpu7x-4x4x4")
    readme = tmp_path / "t" / "mixtral-moe" / "README.md"
    readme.write_text("# mine\n", encoding="utf-8")
    readme.chmod(0o444)
    store, display, written = _record(tmp_path, _plan(folder))
    assert written is None
    assert readme.read_text("utf-8") == "# mine\n"
    warning = next(m for m in display.messages if m.startswith("warning: README not written"))
    assert "read-only" in warning and f"tpu-trainer report {RUN}" in warning
    assert len(store.steps(RUN)) == 6
    assert (store.metrics(RUN) or {}).get("report")
    assert ("report", "failed") in [(n, s) for n, s, *_ in store.stages(RUN)]
    assert not list(readme.parent.glob("*.png"))

    readme.chmod(0o644)
    again, _, changed, _ = write_stored_report(store, RUN, "en", to_recipe=False)
    assert again == readme and changed
    assert readme.read_text("utf-8").startswith("# mine\n")


def test_the_same_step_rows_go_from_the_summary_through_the_store_to_the_report(
    tmp_path: Path,
) -> None:
    folder = _copy(tmp_path, "recipes", "mixtral-moe", "4k-fp8-tpu7x-4x4x4")
    store, _, _ = _record(tmp_path, _plan(folder))
    figures = store.metrics(RUN) or {}
    summarized = [
        StepRow(**{k: v for k, v in s.items() if k != "steady"}) for s in figures["steps"]
    ]
    assert store.step_rows(RUN) == summarized
    stored = figures["report"]
    assert list(stored["steps"][0]) == [
        "step",
        "seconds",
        "tflops_device",
        "tflops_chip",
        "tokens_chip",
        "loss",
    ]
    report, model_dir = report_from_json(stored)
    assert [r.step for r in report.steps] == [r.step for r in summarized]
    assert json.loads(json.dumps(report_to_json(report, model_dir))) == stored


FORMATS = [
    (
        "training/ironwood/gemmoe-26b/4k-bf16-tpu7x-4x4x4/cluster_toolkit/run_recipe.sh",
        "training/ironwood/gemmoe-26b",
    ),
    (
        "training/trillium/Llama3.1-8B-MaxText/v6e-16/llama3-1-8b-1xv6e-16.sh",
        "training/trillium/Llama3.1-8B-MaxText",
    ),
    (
        "training/trillium/Mixtral-8x7B-MaxText/mixtral-8x7b-2xv6e-256.sh",
        "training/trillium/Mixtral-8x7B-MaxText",
    ),
    (
        "training/trillium/Llama3.1-8B-MaxText/v6e-16/README.md",
        "training/trillium/Llama3.1-8B-MaxText",
    ),
    ("training/trillium/Mixtral-8x7B-MaxText/README.md", "training/trillium/Mixtral-8x7B-MaxText"),
    (
        "training/trillium/Mistral-7B-MaxText/cluster_toolkit/run_recipe.sh",
        "training/trillium/Mistral-7B-MaxText",
    ),
    ("training/v5p/Llama3.1-405B-MaxText/README.md", "training/v5p/Llama3.1-405B-MaxText"),
    ("training/v5p/Dense7B-Script/README.md", "training/v5p/Dense7B-Script"),
]


def _plan_path(path: Path) -> Plan:
    return plan_request(
        Request(str(path), config_path=CONFIG), PlanOptions(user="t", now=NOW, profiler=None)
    )


@pytest.mark.parametrize(("recipe", "model"), FORMATS)
def test_every_recipe_format_reports_into_its_model_folder(
    recipe: str, model: str, tmp_path: Path
) -> None:
    """Trillium scripts and READMEs, v5p READMEs and cluster_toolkit recipes append to their
    model folder's README, leaving what it holds and leaving the recipe reading the same."""
    root = tmp_path / "tpu-recipes"
    shutil.copytree(RECIPES_ROOT / "training", root / "training")
    script = root / recipe
    readme = root / model / "README.md"
    before = readme.read_bytes() if readme.exists() else b""
    plan = _plan_path(script)
    assert model_folder(plan) == root / model
    _, display, written = _record(tmp_path, plan)
    assert written == readme
    after = readme.read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    assert f"<!-- tpu-trainer run {RUN} -->".encode() in after
    assert not any("not in the tpu-recipes layout" in m for m in display.messages)
    again = _plan_path(script)
    assert again.recipe.program_args == plan.recipe.program_args
    assert again.recipe.xpk_flags == plan.recipe.xpk_flags


def test_a_recipe_folder_outside_a_checkout_reports_into_its_own_readme(tmp_path: Path) -> None:
    folder = tmp_path / "mine" / "llama-v6e-16"
    shutil.copytree(RECIPES_ROOT / "training/trillium/Llama3.1-8B-MaxText/v6e-16", folder)
    plan = _plan_path(folder / "llama3-1-8b-1xv6e-16.sh")
    assert model_folder(plan) == folder
    (folder / "README.md").unlink()
    assert model_folder(plan) is None  # a lone script: no recipe folder to write into
