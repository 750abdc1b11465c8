"""Configuration and scenario files that would exhaust memory or crash the reader."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from conftest import CONFIG
from tpu_trainer.config.load import read_config
from tpu_trainer.errors import ConfigError

pytestmark = pytest.mark.unit


def _bomb(levels: int) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, levels + 1):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    lines.append(f"project_id: *a{levels}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [3, 8])
def test_yaml_aliases_are_refused_fast_with_a_short_message(levels: int, tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb(levels))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert time.perf_counter() - started < 1.0
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB
    assert info.value.message == f"{path}:2: YAML aliases (*a0) are not accepted"
    assert "in full" in info.value.fix


def test_a_config_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes(CONFIG.read_bytes() + "cluster_name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert "not UTF-8" in info.value.message
    assert f"{path}:{CONFIG.read_text().count(chr(10)) + 1}:" in info.value.message


def test_deep_nesting_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("project_id: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        read_config(path)


def test_a_long_value_is_shortened_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "long.yaml"
    path.write_text(CONFIG.read_text().replace("demo-project\n", "x" * 40_000 + "\n", 1))
    with pytest.raises(ConfigError) as info:
        read_config(path)
    assert len(info.value.message) < 300
    assert "(40000 characters)" in info.value.message
    assert "project_id" in info.value.message


def test_a_scenario_file_with_aliases_is_refused(tmp_path: Path) -> None:
    from tpu_trainer.fakecloud.scenario import load_scenario

    path = tmp_path / "scenario.yaml"
    path.write_text(_bomb(8).replace("project_id", "reservations"))
    with pytest.raises(ConfigError, match="aliases"):
        load_scenario(path)
