"""The README row and section carry a run's goodput, largest badput bucket and cost; an
existing table without those columns gets them in its note, its other rows left as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_report import LEDGER, make_run
from tpu_trainer.report import update_readme

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _store_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TPU_TRAINER_HOME", str(tmp_path / "store"))


def test_a_table_without_goodput_columns_gets_them_in_the_note(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    original = (
        "### My runs\n\n| Date | Step time | Notes |\n|---|---|---|\n"
        "| 2026-01-01 | 9.9 | old run, kept as written |\n"
    )
    readme.write_text(original, encoding="utf-8")
    update_readme(readme, make_run("run1", note="mine", **LEDGER), lang="en")
    lines = readme.read_text("utf-8").splitlines()
    assert lines[4] == "| 2026-01-01 | 9.9 | old run, kept as written |"
    assert lines[5] == (
        "| 2026-11-22 | 27.42 | mine; goodput 62.5% (largest badput PROGRAM_STARTUP), "
        "cost $1,234.57 ($1.2345/M tokens) <!-- tpu-trainer run run1 --> |"
    )


def test_an_unpriced_run_says_which_price_to_set(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    unpriced = {
        **LEDGER,
        "cost_usd": None,
        "cost_per_million_tokens": None,
        "price_note": "price unknown — set prices.tpu7x in the configuration",
    }
    update_readme(readme, make_run("run1", **unpriced), lang="en")
    text = readme.read_text("utf-8")
    row = next(line for line in text.splitlines() if "tpu-trainer run run1 -->" in line)
    assert "| 62.5% | PROGRAM_STARTUP | price unknown — set prices.tpu7x |" in row
    assert (
        "- **Goodput**: 62.5% (largest badput: PROGRAM_STARTUP); **cost**: price unknown — set "
        "prices.tpu7x (teardown included; `tpu-trainer show` has each phase)\n"
    ) in text


def test_a_report_without_ledger_figures_has_no_goodput_line(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    update_readme(readme, make_run("run1"), lang="en")
    text = readme.read_text("utf-8")
    assert "**Goodput**" not in text
    row = next(line for line in text.splitlines() if "tpu-trainer run run1 -->" in line)
    assert "| n/a | n/a | n/a |" in row
