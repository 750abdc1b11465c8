"""The watchdog's configuration keys: ``watchdog_k`` (a number) and ``first_step_deadline``
(seconds, or with s/m/h), checked once when the file is read."""

from __future__ import annotations

from pathlib import Path

import pytest

from test_config import VALID, read_error, write
from tpu_trainer.app.watchdog_run import watchdog_settings
from tpu_trainer.config.load import read_config

pytestmark = pytest.mark.unit


def test_watchdog_keys_are_read_as_numbers_with_their_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", VALID + "watchdog_k: 3.5\nfirst_step_deadline: 45m\n")
    config = read_config(path)
    assert config.watchdog_k == 3.5
    assert config.first_step_deadline == 2700.0
    assert config.sources["first_step_deadline"].line == 15


def test_without_watchdog_keys_the_watchdog_uses_its_defaults(tmp_path: Path) -> None:
    config = read_config(write(tmp_path / "c.yaml", VALID))
    assert (config.watchdog_k, config.first_step_deadline) == (None, None)
    settings = watchdog_settings(
        None, "m", "v6e-8", k=config.watchdog_k, first_step_deadline_s=config.first_step_deadline
    )
    assert (settings.k, settings.first_step_deadline_s) == (5.0, 1800.0)


def test_first_step_deadline_in_plain_seconds_and_hours(tmp_path: Path) -> None:
    for raw, seconds in (("900", 900.0), ("2h", 7200.0), ("30s", 30.0)):
        path = write(tmp_path / "c.yaml", VALID + f"first_step_deadline: {raw}\n")
        assert read_config(path).first_step_deadline == seconds


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("watchdog_k: 0", "must be more than 0"),
        ("watchdog_k: 5m", "is not a positive number"),
        ("watchdog_k: five", "is not a positive number"),
        ("first_step_deadline: -3", "is not a positive number"),
        ("first_step_deadline: true", "is not a positive number"),
    ],
)
def test_a_bad_watchdog_value_names_the_key_its_line_and_the_fix(
    tmp_path: Path, line: str, problem: str
) -> None:
    error = read_error(tmp_path, VALID + line + "\n")
    key = line.partition(":")[0]
    assert f"config.yaml:14: {key}: " in error.message
    assert problem in error.message
    assert f"`{key}: " in error.fix


def test_a_misspelled_watchdog_key_suggests_the_right_one(tmp_path: Path) -> None:
    error = read_error(tmp_path, VALID + "watchdog_kk: 5\n")
    assert "did you mean `watchdog_k`?" in error.fix
