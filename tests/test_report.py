"""The README report: template, appending without losing anything, concurrency, charts."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from conftest import GOLDEN, check_golden
from tpu_trainer.errors import InputError
from tpu_trainer.report import RunReport, StepRow, marker, update_readme, write_plots
from tpu_trainer.report.model import Outcome
from tpu_trainer.report.readme import lock_path

pytestmark = pytest.mark.unit

REPORT_GOLDEN = GOLDEN / "report"

# Seconds, TFLOP/s/device, Tokens/s/device and loss of six steps of a bf16 run on 128 chips.
_METRICS = (
    (125.31, 64.2, 131.0, 12.274),
    (28.02, 292.6, 598.1, 11.906),
    (27.40, 299.2, 611.6, 10.873),
    (27.45, 298.7, 610.5, 10.112),
    (27.41, 299.1, 611.4, 9.655),
    (27.42, 299.0, 611.2, 9.341),
)


def make_run(run_id: str = "a1b2c3d4", *, date: str = "2026-11-22", **changes: Any) -> RunReport:
    """A run whose steady-state numbers are the means of steps 2 onwards."""
    scale = float(changes.pop("scale", 1.0))
    steps = tuple(
        StepRow(
            step=i,
            seconds=s * scale,
            tflops_per_device=t / scale,
            tflops_per_chip=2 * t / scale,
            tokens_per_device=k / scale,
            tokens_per_chip=2 * k / scale,
            total_weights=None,
            loss=loss,
        )
        for i, (s, t, k, loss) in enumerate(_METRICS)
    )
    steady = steps[2:]
    steady_metrics = _METRICS[2:]
    fields: dict[str, Any] = {
        "run_id": run_id,
        "date": date,
        "model": "deepseek3-671b",
        "config_name": "4k-bf16-tpu7x-4x4x8",
        "topology": "4x4x8",
        "device_type": "tpu7x-256",
        "precision": "bf16",
        "chips": 128,
        "steady_step_seconds": sum(s.seconds for s in steady) / len(steady),
        "steady_tflops_device": sum(t / scale for _, t, _, _ in steady_metrics) / len(steady),
        "steady_tflops_chip": sum(2 * t / scale for _, t, _, _ in steady_metrics) / len(steady),
        "steady_tokens_chip": sum(2 * k / scale for _, _, k, _ in steady_metrics) / len(steady),
        "steady_steps": tuple(s.step for s in steady),
        "loss_first": steps[0].loss,
        "loss_last": steps[-1].loss,
        "final_loss": steps[-1].loss,
        "note": "first run",
        "steps": steps,
        "framework_version": "tpu-recipes-v0.1.4",
        "jax_version": "0.8.1",
        "libtpu_version": "0.0.31",
        "xpk_version": "v0.16.1",
        "params": "671B",
    }
    fields.update(changes)
    return RunReport(**fields)


LEDGER: dict[str, Any] = {
    "goodput": 0.6254,
    "largest_badput": "PROGRAM_STARTUP",
    "cost_usd": 1234.5678,
    "cost_per_million_tokens": 1.2345,
}
"""A run's goodput and cost as the README row and section carry them."""


def without_row(text: str, run_id: str) -> str:
    """``text`` without the one table row that carries ``run_id``'s marker."""
    rows = [line for line in text.splitlines(keepends=True) if _is_row_of(line, run_id)]
    assert len(rows) == 1, f"expected one row for {run_id}, found {len(rows)}"
    return text.replace(rows[0], "", 1)


def _is_row_of(line: str, run_id: str) -> bool:
    return line.startswith("|") and marker(run_id) in line


def table_rows(text: str) -> list[str]:
    return [
        line for line in text.splitlines() if line.startswith("|") and "tpu-trainer run" in line
    ]


@pytest.fixture(autouse=True)
def _store_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """README locks are taken beside the run store: keep it inside the test's folder."""
    monkeypatch.setenv("TPU_TRAINER_HOME", str(tmp_path / "store"))


# -- a new README ---------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_new_readme_matches_golden(tmp_path: Path, update_golden: bool, lang: str) -> None:
    readme = tmp_path / "README.md"
    plots = [tmp_path / f"deepseek3-671b-a1b2c3d4-{n}.png" for n in ("step_time", "loss")]
    assert update_readme(readme, make_run(**LEDGER), lang=lang, plots=plots)  # type: ignore[arg-type]
    check_golden(REPORT_GOLDEN / f"readme_{lang}.md", readme.read_text("utf-8"), update_golden)


def test_two_runs_match_golden(tmp_path: Path, update_golden: bool) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run(**LEDGER))
    update_readme(
        readme,
        make_run(
            "e5f6a7b8",
            date="2026-11-23",
            scale=0.82,
            config_name="4k-fp8-tpu7x-4x4x8",
            precision="fp8",
            note="",
            **{
                **LEDGER,
                "goodput": 0.5,
                "cost_usd": None,
                "cost_per_million_tokens": None,
                "price_note": "price unknown — set prices.tpu7x in the configuration",
            },
        ),
    )
    check_golden(REPORT_GOLDEN / "readme_zh_two_runs.md", readme.read_text("utf-8"), update_golden)


def test_headings_follow_the_runbook_template(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run())
    text = readme.read_text("utf-8")
    for heading in (
        "# deepseek3-671b 训练测试记录",
        "## 模型概况",
        "## 测试结果",
        "### 我的测试记录",
        "### 详细训练日志 - 4x4x8 (2026-11-22)",
    ):
        assert f"\n{heading}\n" in f"\n{text}"
    assert "| 日期 | 配置 | Precision | Step Time (s) | TFLOPs/s/device | TFLOPs/s/chip |" in text
    assert "| Step | 耗时 (s) | TFLOP/s/device | TFLOP/s/chip | Tokens/s/chip | Loss |" in text
    assert "- **稳态性能 (Step 2+)**: ~27.42 s/step, ~598.0 TFLOP/s/chip" in text
    assert "- **Loss 下降**: 12.274 → 9.341 (23.9%)" in text


# -- appending ------------------------------------------------------------------------------


def test_second_run_adds_exactly_one_row_and_one_section(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run("run1"))
    before = readme.read_text("utf-8")
    assert update_readme(readme, make_run("run2", date="2026-11-23", topology="4x8x8"))
    after = readme.read_text("utf-8")

    rest = without_row(after, "run2")
    assert rest.startswith(before)
    added = rest[len(before) :]
    assert added.startswith("\n### 详细训练日志 - 4x8x8 (2026-11-23)\n")
    assert added.count("\n### ") == 1
    assert added.count(marker("run2")) == 1
    lines = after.splitlines()
    first = next(i for i, line in enumerate(lines) if _is_row_of(line, "run1"))
    assert _is_row_of(lines[first + 1], "run2")
    assert len(table_rows(after)) == 2


def test_hand_written_content_survives_byte_for_byte(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run("run1"))
    text = readme.read_text("utf-8")
    text = "> Draft notes above the title.\n\n" + text
    text = text.replace("## 测试结果\n", "Some words between the sections.\n\n## 测试结果\n")
    text = text.replace("### 我的测试记录\n\n", "### 我的测试记录\n\n说明：稳态取 Step 2+。\n\n")
    row1 = next(line for line in text.splitlines(keepends=True) if _is_row_of(line, "run1"))
    text = text.replace(row1, row1 + "\nA paragraph right after the table.\n")
    text = text.replace(
        "\n### 详细训练日志", "\nBetween the table and the logs.\n\n### 详细训练日志"
    )
    text += "\n## 我的笔记\n\n- trailing notes with ``` and | pipes, no final newline"
    readme.write_text(text, encoding="utf-8")

    assert update_readme(readme, make_run("run2"))
    after = readme.read_text("utf-8")
    assert without_row(after, "run2").startswith(text)
    lines = after.splitlines()
    first = next(i for i, line in enumerate(lines) if _is_row_of(line, "run1"))
    assert _is_row_of(lines[first + 1], "run2")
    assert lines[first + 2] == ""
    assert after.endswith(
        "- **运行**: `run2` · `4k-bf16-tpu7x-4x4x8` · 128 chips (tpu7x-256) · "
        "MaxText tpu-recipes-v0.1.4 · JAX 0.8.1 · libtpu 0.0.31 · XPK v0.16.1\n"
    )


def test_the_same_run_is_added_once(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    assert update_readme(readme, make_run("run1"))
    data = readme.read_bytes()
    assert not update_readme(readme, make_run("run1"))
    assert not update_readme(readme, make_run("run1", note="changed"), lang="en")
    assert readme.read_bytes() == data
    assert data.decode().count(marker("run1")) == 2


def test_readme_without_a_table_gets_a_results_section(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    original = "# DeepSeek3 notes\n\nWritten by hand. | not a table\n"
    readme.write_text(original, encoding="utf-8")
    assert update_readme(readme, make_run("run1"))
    assert update_readme(readme, make_run("run2"))
    after = readme.read_text("utf-8")
    assert after.startswith(original + "\n## 测试结果\n\n### 我的测试记录\n\n| 日期 |")
    assert after.count("### 我的测试记录") == 1
    assert len(table_rows(after)) == 2
    assert after.count("### 详细训练日志") == 2


def test_heading_without_a_table_gets_one(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# Notes\n\n### My runs\nNothing yet.\n\n## Other\n", encoding="utf-8")
    update_readme(readme, make_run("run1"), lang="en")
    after = readme.read_text("utf-8")
    assert after.startswith("# Notes\n\n### My runs\n\n| Date | Config |")
    assert "| first run <!-- tpu-trainer run run1 --> |\n\nNothing yet.\n\n## Other\n" in after
    assert after.endswith("XPK v0.16.1\n")
    assert "\n### Training log - 4x4x8 (2026-11-22)\n" in after


def test_tables_in_code_blocks_are_left_alone(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    original = "# Template\n\n```markdown\n### 我的测试记录\n\n| 日期 | 配置 |\n|---|---|\n```\n"
    readme.write_text(original, encoding="utf-8")
    update_readme(readme, make_run("run1"))
    after = readme.read_text("utf-8")
    assert after.startswith(original + "\n## 测试结果\n")


def test_a_hand_made_table_gets_its_own_columns(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    original = (
        "### My runs\n\n| Date | Topology | Step time | Extra | Notes |\n"
        "|:--|:-:|--:|---|---|\n| 2026-01-01 | 2x2x1 | 9.9 | x | old |\n"
    )
    readme.write_text(original, encoding="utf-8")
    update_readme(readme, make_run("run1", note="a | b"), lang="en")
    lines = readme.read_text("utf-8").splitlines()
    assert lines[5] == "| 2026-11-22 | 4x4x8 | 27.42 |  | a \\| b <!-- tpu-trainer run run1 --> |"


def test_line_endings_and_byte_order_mark_are_kept(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run("run1"))
    original = "\ufeff" + readme.read_text("utf-8").replace("\n", "\r\n")
    readme.write_bytes(original.encode("utf-8"))
    update_readme(readme, make_run("run2"))
    after = readme.read_bytes().decode("utf-8")
    assert without_row(after, "run2").startswith(original)
    assert "\n" not in after.replace("\r\n", "")
    assert len(table_rows(after)) == 2


def test_an_empty_file_gets_the_whole_template(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("", encoding="utf-8")
    update_readme(readme, make_run("run1"))
    assert readme.read_text("utf-8").startswith("# deepseek3-671b 训练测试记录\n")


def test_a_file_that_is_not_utf8_is_not_touched(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_bytes(b"# caf\xe9\n")
    with pytest.raises(InputError, match="not UTF-8"):
        update_readme(readme, make_run())
    assert readme.read_bytes() == b"# caf\xe9\n"


def test_plot_links_are_relative_to_the_readme(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    charts = tmp_path / "my charts"
    update_readme(readme, make_run(), plots=[charts / "loss.png", tmp_path / "step.png"])
    text = readme.read_text("utf-8")
    assert "\n![loss](my%20charts/loss.png)\n" in text
    assert "\n![step](step.png)\n" in text


def test_bad_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="YYYY-MM-DD"):
        make_run(date="2026-13-01")
    for bad in ("a b", "a--b", "x -->", ""):
        with pytest.raises(InputError, match="run id"):
            make_run(bad)
    with pytest.raises(InputError, match="language"):
        update_readme(tmp_path / "README.md", make_run(), lang="fr")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="does not exist"):
        update_readme(tmp_path / "missing" / "README.md", make_run())
    assert not (tmp_path / "README.md").exists()


# -- where the README may be written --------------------------------------------------------


def test_a_symlinked_readme_is_refused_naming_the_link(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("not the model's README\n", encoding="utf-8")
    model = tmp_path / "model"
    model.mkdir()
    link = model / "README.md"
    link.symlink_to(elsewhere)
    with pytest.raises(InputError, match="symbolic link") as caught:
        update_readme(link, make_run())
    assert str(link) in caught.value.message
    assert "tpu-trainer report a1b2c3d4" in caught.value.fix
    assert elsewhere.read_text("utf-8") == "not the model's README\n"
    assert link.is_symlink()


def test_a_symlinked_chart_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "target.png"
    target.write_bytes(b"keep")
    model = tmp_path / "model"
    model.mkdir()
    (model / "deepseek3-671b-a1b2c3d4-loss.png").symlink_to(target)
    with pytest.raises(InputError, match="symbolic link"):
        write_plots(make_run(), model)
    assert target.read_bytes() == b"keep"
    assert not (model / "deepseek3-671b-a1b2c3d4-step_time.png").exists()


def test_a_read_only_readme_is_not_replaced(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# mine\n", encoding="utf-8")
    readme.chmod(0o444)
    with pytest.raises(InputError, match="read-only") as caught:
        update_readme(readme, make_run())
    assert "tpu-trainer report a1b2c3d4" in caught.value.fix
    assert readme.read_text("utf-8") == "# mine\n"
    assert readme.stat().st_mode & 0o777 == 0o444


def test_a_readme_that_is_a_folder_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "README.md").mkdir()
    with pytest.raises(InputError, match="is a folder, not a file"):
        update_readme(tmp_path / "README.md", make_run())


# -- runs that are not measurements -----------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "lang", "mark"),
    [
        ({"outcome": Outcome.FAILED}, "en", "FAILED"),
        ({"outcome": Outcome.TIMED_OUT}, "en", "TIMED OUT"),
        ({"outcome": Outcome.FAILED}, "zh", "失败"),
        ({"rehearsal": True}, "en", "REHEARSAL (fake cloud, not a measurement)"),
        ({"rehearsal": True, "outcome": Outcome.CANCELLED}, "zh", "已取消 · 演练（假云，非实测）"),
    ],
)
def test_failed_runs_and_rehearsals_are_marked(
    tmp_path: Path, changes: dict[str, Any], lang: str, mark: str
) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run("ok1"), lang=lang)  # type: ignore[arg-type]
    update_readme(readme, make_run("bad1", **changes), lang=lang)  # type: ignore[arg-type]
    text = readme.read_text("utf-8")
    good, bad = table_rows(text)
    assert f"**{mark}**; first run" in bad
    assert "**" not in good
    headings = [line for line in text.splitlines() if line.startswith("### ") and "(" in line]
    assert headings[-1].endswith(f" — {mark}")
    assert " — " not in headings[0]


def test_a_hand_made_table_without_a_note_column_still_shows_the_mark(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("### My runs\n\n| Date | Loss |\n|---|---|\n", encoding="utf-8")
    update_readme(readme, make_run(outcome=Outcome.FAILED), lang="en")
    (row,) = table_rows(readme.read_text("utf-8"))
    assert row == f"| 2026-11-22 | **FAILED** 9.341 {marker('a1b2c3d4')} |"


# -- concurrency ----------------------------------------------------------------------------


def _add_in_process(readme: str, index: int, barrier: Any) -> None:
    barrier.wait(timeout=60)
    update_readme(Path(readme), make_run(f"p{index:02d}", note=f"writer {index}"))


def test_twenty_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    readme = model / "README.md"
    original = (
        "Hand-written header.\n\n# deepseek3-671b 训练测试记录\n\n## 测试结果\n\n"
        "### 我的测试记录\n\nAll runs of this model:\n\n"
        "| 日期 | 配置 | Precision | Step Time (s) | TFLOPs/s/device | TFLOPs/s/chip "
        "| Tokens/s/chip | Loss (final) | 备注 |\n"
        "|---|---|---|---|---|---|---|---|---|\n\nNotes after the table.\n\n## Appendix\n\nEnd.\n"
    )
    readme.write_text(original, encoding="utf-8")
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(20)
    procs = [ctx.Process(target=_add_in_process, args=(str(readme), i, barrier)) for i in range(20)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0] * 20

    after = readme.read_text("utf-8")
    rows = table_rows(after)
    assert len(rows) == 20
    ids = sorted(row.split("tpu-trainer run ")[1].split(" ")[0] for row in rows)
    assert ids == [f"p{i:02d}" for i in range(20)]
    rest = after
    for run_id in ids:
        assert after.count(marker(run_id)) == 2
        rest = without_row(rest, run_id)
    assert rest.startswith(original)
    assert rest.count("### 详细训练日志") == 20
    # the lock is taken beside the run store: nothing but the README is left in the model folder
    assert sorted(p.name for p in model.iterdir()) == ["README.md"]
    assert [p.name for p in (tmp_path / "store" / "locks").iterdir()] == [lock_path(readme).name]
