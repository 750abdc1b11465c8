"""`compare RUN RUN`: both runs' goodput, the overlay chart of loss and step time on shared
axes (its plotted lines and its JSON numbers read back), and the refusal of runs of different
models or slices unless --force."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from matplotlib.lines import Line2D
from typer.testing import CliRunner

from tpu_trainer.cli.main import app
from tpu_trainer.errors import InputError
from tpu_trainer.launch_path import LaunchPath
from tpu_trainer.report.compare_plot import MAX_POINTS, overlay_figure, series_of
from tpu_trainer.store.db import RunStatus, RunStore
from tpu_trainer.store.steps import StepRow

pytestmark = pytest.mark.unit

runner = CliRunner()


def _row(step: int, seconds: float, loss: float | None) -> StepRow:
    return StepRow(
        step=step,
        seconds=seconds,
        tflops_per_device=100.0,
        tflops_per_chip=200.0,
        tokens_per_device=50.0,
        tokens_per_chip=100.0,
        total_weights=4096.0,
        loss=loss,
    )


def _add_run(
    store: RunStore,
    run_id: str,
    *,
    model: str = "llama3-8b",
    device: str = "v6e-16",
    slices: int = 1,
    step_seconds: float = 2.0,
) -> list[StepRow]:
    store.create_run(
        run_id,
        model=model,
        request="r",
        launcher=LaunchPath.XPK,
        device_type=device,
        precision="bf16",
        project="p",
        cluster="c",
        region="us-central1",
        zone="us-central1-a",
        plan_json={"slice": {"family": "v6e", "chips": 16, "num_slices": slices}},
    )
    rows = [_row(n, 30.0 if n == 0 else step_seconds, 10.0 - 0.5 * n) for n in range(6)]
    store.record_steps(run_id, rows)
    store.set_metrics(run_id, {"step_seconds": step_seconds, "tflops_per_chip": 400 / step_seconds})
    store.finish_run(run_id, RunStatus.SUCCEEDED)
    return rows


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunStore:
    monkeypatch.setenv("TPU_TRAINER_HOME", str(tmp_path / "store"))
    monkeypatch.setenv("TPU_TRAINER_CONFIG", "")
    monkeypatch.setenv("COLUMNS", "200")
    (tmp_path / "store").mkdir()
    return RunStore(tmp_path / "store" / "runs.db")


def _xy(line: Line2D) -> tuple[list[float], list[float]]:
    x, y = line.get_data()
    return [float(v) for v in np.asarray(x)], [float(v) for v in np.asarray(y)]


def test_the_overlay_draws_both_runs_loss_and_step_time_on_shared_axes() -> None:
    a = series_of("a", [_row(n, 2.0 + n, 9.0 - n) for n in range(4)], 4)
    b = series_of("b", [_row(n, 4.0, None if n == 2 else 8.0) for n in range(4)], 4)
    fig = overlay_figure(a, b, "a against b")
    loss_ax, time_ax = fig.axes
    assert loss_ax.get_shared_x_axes().joined(loss_ax, time_ax)
    drawn = [[_xy(line) for line in ax.get_lines()] for ax in (loss_ax, time_ax)]
    assert drawn[0][0] == ([0.0, 1.0, 2.0, 3.0], [9.0, 8.0, 7.0, 6.0])
    assert drawn[1][0] == ([0.0, 1.0, 2.0, 3.0], [2.0, 3.0, 4.0, 5.0])
    assert drawn[1][1] == ([0.0, 1.0, 2.0, 3.0], [4.0] * 4)
    assert math.isnan(drawn[0][1][1][2])  # b logged no loss at step 2
    legend = loss_ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["a", "b"]


def test_a_long_run_is_drawn_as_bucket_means() -> None:
    steps = MAX_POINTS * 5
    series = series_of("long", (_row(n, float(n % 10), 1.0) for n in range(steps)), steps)
    assert series.width == 5
    assert len(series.steps) == MAX_POINTS
    assert series.steps[0] == 2.0  # steps 0-4: middle 2, mean step time (0+1+2+3+4)/5
    assert series.seconds[0] == 2.0
    assert series.seconds[1] == 7.0  # steps 5-9


def test_compare_writes_the_overlay_and_shows_both_runs_goodput(
    store: RunStore, tmp_path: Path
) -> None:
    a_rows = _add_run(store, "runa", step_seconds=2.0)
    b_rows = _add_run(store, "runb", step_seconds=4.0)
    png = tmp_path / "out" / "ab.png"
    result = runner.invoke(app, ["compare", "runa", "runb", "--plot", str(png)])
    assert result.exit_code == 0, result.output
    assert "step time a/b = 0.500" in result.output
    assert "a: goodput " in result.output
    assert "b: goodput " in result.output
    assert png.read_bytes().startswith(b"\x89PNG")
    plotted = json.loads(png.with_suffix(".json").read_text())
    runs = plotted["runs"]
    assert [r["label"] for r in runs] == [
        "runa llama3-8b v6e-16 bf16",
        "runb llama3-8b v6e-16 bf16",
    ]
    for run, rows in zip(runs, (a_rows, b_rows), strict=True):
        assert run["steps"] == [float(r.step) for r in rows]
        assert run["seconds"] == [r.seconds for r in rows]
        assert run["loss"] == [r.loss for r in rows]

    as_json = json.loads(runner.invoke(app, ["compare", "runa", "runb", "--json"]).output)
    assert as_json["comparable"] is True
    assert set(as_json["a"]) >= {"goodput", "largest_badput", "cost_usd"}
    assert Path(as_json["plot"]) == tmp_path / "store" / "compare" / "runa-vs-runb.png"
    assert Path(as_json["plot"]).is_file()


@pytest.mark.parametrize(
    ("other", "named"),
    [
        ({"model": "qwen3-8b"}, "model (llama3-8b against qwen3-8b)"),
        ({"device": "v6e-32"}, "slice (v6e-16 against v6e-32)"),
        ({"slices": 2}, "slice (v6e-16 against v6e-16 x2)"),
    ],
)
def test_runs_of_different_models_or_slices_are_refused_unless_forced(
    store: RunStore, tmp_path: Path, other: dict[str, object], named: str
) -> None:
    _add_run(store, "runa")
    _add_run(store, "runc", **other)  # type: ignore[arg-type]
    png = tmp_path / "refused.png"
    refused = runner.invoke(app, ["compare", "runa", "runc", "--plot", str(png)])
    assert isinstance(refused.exception, InputError)  # the entry point prints it and its fix
    assert f"runs runa and runc differ in {named}" in refused.exception.message
    assert "tpu-trainer compare runa runc --force" in refused.exception.fix
    assert not png.exists()

    forced = runner.invoke(app, ["compare", "runa", "runc", "--force", "--plot", str(png)])
    assert forced.exit_code == 0, forced.output
    assert f"WARNING: runs runa and runc differ in {named}" in forced.output
    assert png.is_file()
