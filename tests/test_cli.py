"""The command line: exit codes, messages that name the next step, files written safely."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CONFIG, IRONWOOD, RECIPES, RECIPES_ROOT

pytestmark = pytest.mark.e2e

ENV = {**os.environ, "HOME": "/nonexistent-home", "TPU_TRAINER_CONFIG": "", "COLUMNS": "200"}


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tpu_trainer", *args],
        capture_output=True,
        text=True,
        env=env or ENV,
        cwd=cwd,
        timeout=60,
        check=False,
    )


def test_cli_help_lists_the_commands() -> None:
    proc = cli("--help")
    assert proc.returncode == 0
    for command in ("plan", "scripts", "config", "slice"):
        assert command in proc.stdout


def test_cli_plan_json_for_a_recipe_folder() -> None:
    proc = cli("plan", str(RECIPES_ROOT / RECIPES["classic"]), "--config", str(CONFIG), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["slice"]["device_type"] == "tpu7x-2x2x1"
    assert data["config"]["project_id"]["value"] == "demo-project"


def test_cli_plan_table_shows_slice_values_and_commands() -> None:
    proc = cli("plan", str(RECIPES_ROOT / RECIPES["storage"]), "--config", str(CONFIG))
    assert proc.returncode == 0, proc.stderr
    assert "tpu7x-512" in proc.stdout and "1xtpu7x-512" in proc.stdout
    assert "xpk workload create" in proc.stdout
    assert "config project_id" in proc.stdout


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["plan", "/no/such/recipe/folder"], 2, "no such file or folder"),
        (["plan", str(RECIPES_ROOT)], 2, "holds 7 recipes"),
        (["slice", "tpu7x-3x3x3"], 2, "is not a TPU v7 (Ironwood) topology"),
        (["plan", "some-model"], 2, "no tpu_recipes_path"),
    ],
)
def test_cli_bad_input_gets_one_clear_error_and_nonzero_exit(
    args: list[str], code: int, needle: str
) -> None:
    proc = cli(*args)
    assert proc.returncode == code
    assert needle in proc.stderr
    assert "next:" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_not_a_recipe_folder(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    proc = cli("plan", str(tmp_path))
    assert proc.returncode == 2
    assert "is not a recipe folder" in proc.stderr


def _copy_recipe(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "training" / "ironwood" / "m" / "4k-bf16-tpu7x-2x2x1" / "xpk"
    folder.mkdir(parents=True)
    (folder / "run_recipe.sh").write_text(text)
    return folder


def test_cli_command_substitution_in_maxtext_args_is_refused(tmp_path: Path) -> None:
    original = (RECIPES_ROOT / RECIPES["classic"] / "run_recipe.sh").read_text()
    folder = _copy_recipe(tmp_path, original.replace("steps=20", "steps=$(cat /etc/hostname)"))
    proc = cli("plan", str(folder))
    assert proc.returncode == 4
    assert "command substitution in MAXTEXT_ARGS" in proc.stderr
    assert "run_recipe.sh:" in proc.stderr


def test_cli_unknown_topology_in_recipe(tmp_path: Path) -> None:
    original = (RECIPES_ROOT / RECIPES["classic"] / "run_recipe.sh").read_text()
    folder = _copy_recipe(
        tmp_path, original.replace("--device-type=tpu7x-2x2x1", "--device-type=tpu7x-3x5x7")
    )
    proc = cli("plan", str(folder))
    assert proc.returncode == 2
    assert "'3x5x7' is not a TPU v7 (Ironwood) topology" in proc.stderr
    assert "4x4x8" in proc.stderr


def test_cli_config_with_a_missing_key_names_file_and_key(tmp_path: Path) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text(CONFIG.read_text().replace("cluster_name: demo-cluster\n", ""))
    proc = cli("scripts", str(RECIPES_ROOT / RECIPES["classic"]), "--config", str(bad))
    assert proc.returncode == 3
    assert f"{bad}: cluster_name: missing" in proc.stderr
    assert "add `cluster_name:" in proc.stderr


def test_cli_debug_shows_the_traceback() -> None:
    proc = cli("--debug", "plan", "/no/such/recipe/folder")
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


def test_cli_scripts_writes_both_and_keeps_a_foreign_file(tmp_path: Path) -> None:
    original = (RECIPES_ROOT / RECIPES["classic"] / "run_recipe.sh").read_text()
    folder = _copy_recipe(tmp_path, original)
    proc = cli("scripts", str(folder), "--config", str(CONFIG))
    assert proc.returncode == 0, proc.stderr
    assert (folder / "setup_training_env.sh").stat().st_mode & 0o111
    assert "xpk workload create" in (folder / "submit_m.sh").read_text()
    again = cli("scripts", str(folder), "--config", str(CONFIG))
    assert again.returncode == 0
    (folder / "submit_m.sh").write_text("# my own notes\n")
    refused = cli("scripts", str(folder), "--config", str(CONFIG))
    assert refused.returncode == 2
    assert "not written by tpu-trainer" in refused.stderr
    assert (folder / "submit_m.sh").read_text() == "# my own notes\n"


def test_cli_scripts_without_any_config_says_how_to_make_one() -> None:
    proc = cli("scripts", str(RECIPES_ROOT / RECIPES["classic"]))
    assert proc.returncode == 3
    assert "config init" in proc.stderr


def test_cli_config_init_then_show_tells_where_values_come_from(tmp_path: Path) -> None:
    target = tmp_path / "c.yaml"
    proc = cli(
        "config",
        "init",
        "--path",
        str(target),
        "--project-id",
        "demo-project",
        "--cluster-name",
        "demo-cluster",
        "--reservation",
        "res-a",
        "--reservation",
        "res-b",
        "--default-zone",
        "us-central1-ai1a",
    )
    assert proc.returncode == 0, proc.stderr
    assert "still to fill in: base_output_dir, workload_image" in proc.stdout
    shown = cli("config", "show", "--config", str(target), "--json")
    data = json.loads(shown.stdout)
    assert data["values"]["project_id"]["value"] == "demo-project"
    assert data["values"]["project_id"]["source"].startswith(f"{target}:")
    assert data["values"]["region"]["source"] == "derived from default_zone"
    again = cli("config", "init", "--path", str(target))
    assert again.returncode == 3 and "already exists" in again.stderr


def test_cli_model_name_lookup_under_tpu_recipes_path(tmp_path: Path) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(CONFIG.read_text() + f"tpu_recipes_path: {RECIPES_ROOT}\n")
    proc = cli("plan", "mixtral-moe", "--precision", "fp8", "--config", str(cfg), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["model"] == "mixtral-moe"


@pytest.mark.parametrize(
    "command",
    [["plan"], ["scripts"], ["slice"], ["config"], ["config", "init"], ["config", "show"]],
)
def test_cli_every_command_has_working_help(command: list[str]) -> None:
    proc = cli(*command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage" in proc.stdout


def test_cli_a_model_folder_with_one_recipe_is_that_recipe() -> None:
    proc = cli("plan", str(IRONWOOD / "tinyllama-8b"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["slice"]["device_type"] == "tpu7x-2x2x1"
