"""The plan for people: whole names at 80 columns, plain values, long values shortened."""

from __future__ import annotations

import io
import time

import pytest
from rich.console import Console

from conftest import RECIPES, plan_for
from tpu_trainer.checks.run import CheckReport
from tpu_trainer.cli.check_cmd import render_checks
from tpu_trainer.cli.render_plan import render_plan
from tpu_trainer.plan.plan import Finding, Level

pytestmark = pytest.mark.unit


def _render(width: int, **opts: object) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, highlight=False, color_system=None)
    render_plan(plan_for(RECIPES["storage"], **opts), console=console, findings=())
    return buffer.getvalue()


def test_at_80_columns_the_slice_names_are_whole() -> None:
    text = _render(80)
    assert "tpu7x-4x8x8" in text
    assert "1xtpu7x-512" in text
    assert "tpu7x-512=64" in text
    assert "tpu7x-512-4x8x8-placement-policy" in text
    assert "tpu…" not in text


def test_at_80_columns_check_names_are_whole() -> None:
    buffer = io.StringIO()
    findings = (
        Finding("memory-fit (estimate)", Level.WARN, "x " * 200, "y " * 100),
        Finding("maxtext-config types", Level.FAIL, "short", ""),
    )
    render_checks(CheckReport(findings), Console(file=buffer, width=80, color_system=None))
    text = buffer.getvalue()
    assert "memory-fit (estimate)" in text
    assert "maxtext-config types" in text


def test_a_40kb_value_is_shortened_and_fast(capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_for(RECIPES["storage"], overrides=(("run_note", "a" * 40_000),))
    started = time.perf_counter()
    render_plan(plan, findings=())  # the console plan itself makes
    assert time.perf_counter() - started < 2.0
    text = capsys.readouterr().out
    assert "(40009 characters" in text  # run_note=… shortened, its length shown
    assert len(text) < 20_000


def test_values_are_printed_as_written_not_as_markup() -> None:
    text = _render(200, overrides=(("run_note", "[bold]x[/]"),))
    assert "run_note=[bold]x[/]" in text
