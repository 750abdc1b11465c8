"""A README row and goodput line written before the teardown, replaced by the figures worked
out once it ended (pure text), in either language; a README edited by hand is left alone."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tpu_trainer.report.model import Outcome, RunReport
from tpu_trainer.report.readme import add_run, replace_figures, replace_run

pytestmark = pytest.mark.unit


def _report() -> RunReport:
    return RunReport(
        run_id="abcd1234",
        date="2026-11-24",
        model="mixtral-moe",
        config_name="4k-fp8-tpu7x-4x4x4",
        topology="4x4x4",
        device_type="tpu7x-128",
        precision="fp8",
        chips=64,
        steady_step_seconds=2.2,
        steady_tflops_device=730.0,
        steady_tflops_chip=1460.0,
        steady_tokens_chip=3723.6,
        steady_steps=(2, 3, 4),
        loss_first=10.9,
        loss_last=6.4,
        final_loss=6.4,
        goodput=0.625,
        largest_badput="PROGRAM_STARTUP",
        cost_usd=12.5,
    )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_row_and_the_goodput_line_take_the_new_figures(lang: str) -> None:
    old = _report()
    new = replace(old, goodput=0.5, largest_badput="TEARDOWN", cost_usd=15.25)
    text = add_run("# mixtral-moe\n\nNotes.\n", old, lang=lang)  # type: ignore[arg-type]
    assert text is not None and "62.5%" in text
    changed = replace_figures(text, old, new)
    assert "62.5%" not in changed and "$12.50" not in changed
    assert changed.count("50.0%") == 2 and changed.count("$15.25") == 2
    assert changed.count("TEARDOWN") == 2
    assert (
        changed.replace("50.0%", "62.5%")
        .replace("$15.25", "$12.50")
        .replace("TEARDOWN", "PROGRAM_STARTUP")
        == text
    )


def test_a_readme_edited_by_hand_is_left_as_it_is() -> None:
    old = _report()
    text = add_run("# mixtral-moe\n", old, lang="en")
    assert text is not None
    edited = text.replace("62.5%", "about 60%")
    assert replace_figures(edited, old, replace(old, goodput=0.5)) == edited


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_run_carried_on_replaces_its_row_and_section_and_nothing_else(lang: str) -> None:
    before = replace(_report(), outcome=Outcome.INTERRUPTED, steady_steps=(2, 3), final_loss=7.1)
    whole = replace(_report(), steady_step_seconds=2.0, final_loss=6.1)
    other = replace(_report(), run_id="ffff0000", date="2026-11-20")
    text = add_run("# mixtral-moe\r\n\r\nNotes.\r\n", other, lang=lang)  # type: ignore[arg-type]
    assert text is not None
    text = add_run(text, before, lang=lang)  # type: ignore[arg-type]
    assert text is not None and add_run(text, whole, lang=lang) is None  # type: ignore[arg-type]
    changed = replace_run(text, before, whole, plot_links=[])
    assert changed is not None and changed != text
    expected = add_run(
        add_run("# mixtral-moe\r\n\r\nNotes.\r\n", other, lang=lang) or "",  # type: ignore[arg-type]
        whole,
        lang=lang,  # type: ignore[arg-type]
    )
    assert changed == expected  # as if the whole run had been written in the first place
    assert "\n" not in changed.replace("\r\n", "")  # its line endings kept


def test_a_carried_on_run_edited_by_hand_is_left_as_it_is() -> None:
    before = replace(_report(), outcome=Outcome.INTERRUPTED)
    text = add_run("# mixtral-moe\n", before, lang="en")
    assert text is not None
    edited = text.replace("2.20", "2.2 (checked)")
    assert replace_run(edited, before, _report()) is None
