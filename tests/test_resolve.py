"""Tests for ``tpu_trainer.recipes.resolve`` and ``tpu_trainer.recipes.folder``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.catalog.accelerators import Precision
from tpu_trainer.errors import InputError
from tpu_trainer.recipes.folder import parse_folder_name
from tpu_trainer.recipes.resolve import (
    Filters,
    recipes_under,
    resolve,
    resolve_model,
    resolve_path,
)

pytestmark = pytest.mark.unit

# Recipe folders, relative to <root>/training/ironwood; True when they have the xpk/ level.
TREE = {
    "llama3-8b/4k-bf16-tpu7x-4x4x8": True,
    "deepseek3-671b/4k-bf16-tpu7x-4x8x8": True,
    "deepseek3-671b/4k-bf16-tpu7x-4x8x8-gcs": True,
    "deepseek3-671b/4k-bf16-tpu7x-4x8x8-lustre": False,
    "deepseek3-671b/4k-fp8-tpu7x-4x8x8": True,
    "qwen3-32b/bf16-tpu7x-4x4x4": False,
    "qwen3-32b/128k-fp8-tpu7x-4x8x8": False,
}
DEEPSEEK_BF16 = [
    "deepseek3-671b/4k-bf16-tpu7x-4x8x8/xpk",
    "deepseek3-671b/4k-bf16-tpu7x-4x8x8-gcs/xpk",
    "deepseek3-671b/4k-bf16-tpu7x-4x8x8-lustre",
]


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake tpu-recipes checkout; the working directory is an empty folder beside it."""
    base = tmp_path / "tpu-recipes"
    ironwood = base / "training" / "ironwood"
    for folder, has_xpk in TREE.items():
        where = ironwood / folder / ("xpk" if has_xpk else "")
        where.mkdir(parents=True)
        (where / "run_recipe.sh").write_text("# placeholder recipe\n", encoding="utf-8")
        (ironwood / folder / "README.md").write_text("readme\n", encoding="utf-8")
    (ironwood / "not-a-model").mkdir()
    (ironwood / "not-a-model" / "notes.txt").write_text("nothing here\n", encoding="utf-8")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return base


def ironwood(root: Path) -> Path:
    return root / "training" / "ironwood"


# ---------------------------------------------------------------------------
# Paths
# ---------------------------------------------------------------------------


def test_resolve_path_folder_with_xpk_level_finds_script_in_xpk(root: Path) -> None:
    config_dir = ironwood(root) / "llama3-8b" / "4k-bf16-tpu7x-4x4x8"
    ref = resolve_path(config_dir)
    assert ref.script == config_dir / "xpk" / "run_recipe.sh"
    assert ref.folder == config_dir / "xpk"
    assert ref.config_dir == config_dir
    assert ref.model_dir == ironwood(root) / "llama3-8b"
    assert ref.model == "llama3-8b"
    assert ref.parsed is not None
    assert ref.parsed.topology == "4x4x8"


def test_resolve_path_xpk_folder_itself_gives_same_recipe(root: Path) -> None:
    config_dir = ironwood(root) / "llama3-8b" / "4k-bf16-tpu7x-4x4x8"
    assert resolve_path(config_dir / "xpk") == resolve_path(config_dir)


def test_resolve_path_folder_without_xpk_level_finds_script(root: Path) -> None:
    config_dir = ironwood(root) / "qwen3-32b" / "bf16-tpu7x-4x4x4"
    ref = resolve_path(config_dir)
    assert ref.script == config_dir / "run_recipe.sh"
    assert ref.folder == config_dir
    assert ref.config_dir == config_dir
    assert ref.model == "qwen3-32b"
    assert ref.parsed is not None
    assert ref.parsed.seq is None


def test_resolve_path_run_recipe_file_itself(root: Path) -> None:
    script = ironwood(root) / "deepseek3-671b" / "4k-bf16-tpu7x-4x8x8-gcs" / "xpk" / "run_recipe.sh"
    ref = resolve(str(script), None, Filters())
    assert ref.script == script
    assert ref.config_dir == script.parent.parent
    assert ref.model == "deepseek3-671b"
    assert ref.parsed is not None
    assert ref.parsed.suffix == "gcs"


def test_resolve_path_other_file_raises_input_error(root: Path) -> None:
    readme = ironwood(root) / "llama3-8b" / "4k-bf16-tpu7x-4x4x8" / "README.md"
    with pytest.raises(InputError) as info:
        resolve_path(readme)
    assert "is not a run_recipe.sh" in info.value.message


def test_resolve_path_model_folder_with_several_recipes_lists_them(root: Path) -> None:
    model_dir = ironwood(root) / "deepseek3-671b"
    with pytest.raises(InputError) as info:
        resolve(str(model_dir), None, Filters())
    message = info.value.message
    assert "holds 4 recipes" in message
    for folder in (
        "4k-bf16-tpu7x-4x8x8/xpk",
        "4k-bf16-tpu7x-4x8x8-gcs/xpk",
        "4k-bf16-tpu7x-4x8x8-lustre",
        "4k-fp8-tpu7x-4x8x8/xpk",
    ):
        assert f"  {folder}" in message.splitlines()


def test_resolve_path_folder_that_is_not_a_recipe_raises(root: Path) -> None:
    with pytest.raises(InputError) as info:
        resolve(str(ironwood(root) / "not-a-model"), None, Filters())
    assert "is not a recipe folder" in info.value.message
    assert "run_recipe.sh" in info.value.message


def test_resolve_path_missing_path_raises(root: Path) -> None:
    missing = ironwood(root) / "nope" / "4k-bf16-tpu7x-4x4x8"
    with pytest.raises(InputError) as info:
        resolve(str(missing), root, Filters())
    assert "no such file or folder" in info.value.message
    assert str(missing) in info.value.message


def test_resolve_missing_sh_name_is_treated_as_path(root: Path) -> None:
    with pytest.raises(InputError, match="no such file or folder"):
        resolve("run_recipe.sh", root, Filters())


def test_resolve_relative_folder_from_working_directory(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ironwood(root))
    ref = resolve("qwen3-32b/bf16-tpu7x-4x4x4", None, Filters())
    assert ref.model == "qwen3-32b"
    assert ref.script.name == "run_recipe.sh"


# ---------------------------------------------------------------------------
# Model names
# ---------------------------------------------------------------------------


def test_resolve_model_only_recipe_needs_no_filter(root: Path) -> None:
    ref = resolve("llama3-8b", root, Filters())
    assert ref.config_dir == ironwood(root) / "llama3-8b" / "4k-bf16-tpu7x-4x4x8"


def test_resolve_model_precision_fp8_picks_the_one_fp8_recipe(root: Path) -> None:
    ref = resolve("deepseek3-671b", root, Filters(precision="fp8"))
    assert ref.config_dir.name == "4k-fp8-tpu7x-4x8x8"
    assert ref.parsed is not None
    assert ref.parsed.precision is Precision.FP8


def test_resolve_model_precision_is_case_insensitive(root: Path) -> None:
    ref = resolve("deepseek3-671b", root, Filters(precision="FP8"))
    assert ref.config_dir.name == "4k-fp8-tpu7x-4x8x8"


def test_resolve_model_ambiguous_lists_all_three_candidates(root: Path) -> None:
    with pytest.raises(InputError) as info:
        resolve("deepseek3-671b", root, Filters(precision="bf16", topology="4x8x8"))
    message = info.value.message
    assert "has 3 matching recipes" in message
    for folder in DEEPSEEK_BF16:
        assert f"  training/ironwood/{folder}" in message.splitlines()
    assert "fp8" not in message
    assert "--variant" in info.value.fix


def test_resolve_model_variant_gcs_narrows_to_one(root: Path) -> None:
    ref = resolve("deepseek3-671b", root, Filters(precision="bf16", variant="gcs"))
    assert ref.config_dir.name == "4k-bf16-tpu7x-4x8x8-gcs"


def test_resolve_model_variant_lustre_finds_folder_without_xpk_level(root: Path) -> None:
    ref = resolve("deepseek3-671b", root, Filters(variant="lustre"))
    assert ref.folder == ironwood(root) / "deepseek3-671b" / "4k-bf16-tpu7x-4x8x8-lustre"


@pytest.mark.parametrize("topology", ["4x4x4", "tpu7x-4x4x4"])
def test_resolve_model_topology_filter_accepts_both_forms(root: Path, topology: str) -> None:
    ref = resolve("qwen3-32b", root, Filters(topology=topology))
    assert ref.config_dir.name == "bf16-tpu7x-4x4x4"


def test_resolve_model_seq_filter_selects_long_context(root: Path) -> None:
    ref = resolve("qwen3-32b", root, Filters(seq="128K"))
    assert ref.config_dir.name == "128k-fp8-tpu7x-4x8x8"


def test_resolve_model_no_match_lists_model_recipes(root: Path) -> None:
    with pytest.raises(InputError) as info:
        resolve("deepseek3-671b", root, Filters(precision="fp8", seq="8k"))
    assert "matches the options given" in info.value.message
    assert "4k-fp8-tpu7x-4x8x8" in info.value.message
    assert "--precision" in info.value.fix


def test_resolve_model_unknown_model_lists_known_models(root: Path) -> None:
    with pytest.raises(InputError) as info:
        resolve("gpt-17", root, Filters())
    assert "gpt-17" in info.value.message
    assert info.value.fix == "known models: deepseek3-671b, llama3-8b, qwen3-32b"


def test_resolve_model_without_tpu_recipes_path_raises_with_fix() -> None:
    with pytest.raises(InputError) as info:
        resolve("deepseek3-671b", None, Filters())
    assert "tpu_recipes_path" in info.value.message
    assert "tpu_recipes_path" in info.value.fix


def test_resolve_model_missing_tpu_recipes_path_raises(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        resolve_model("llama3-8b", tmp_path / "absent", Filters())


def test_resolve_model_root_without_training_folder_searches_root(root: Path) -> None:
    ref = resolve_model("llama3-8b", root / "training" / "ironwood", Filters())
    assert ref.model == "llama3-8b"


def test_recipes_under_finds_every_recipe_sorted(root: Path) -> None:
    refs = recipes_under(root)
    assert len(refs) == len(TREE)
    assert [r.script for r in refs] == sorted(r.script for r in refs)
    assert {r.model for r in refs} == {"llama3-8b", "deepseek3-671b", "qwen3-32b"}


def test_filters_unparsed_folder_matches_only_without_filters() -> None:
    assert Filters().matches(None)
    assert not Filters(precision="bf16").matches(None)


# ---------------------------------------------------------------------------
# Folder names
# ---------------------------------------------------------------------------


def test_parse_folder_name_plain_recipe() -> None:
    parsed = parse_folder_name("4k-bf16-tpu7x-4x4x8")
    assert parsed is not None
    assert parsed.name == "4k-bf16-tpu7x-4x4x8"
    assert parsed.seq == "4k"
    assert parsed.seq_tokens == 4096
    assert parsed.precision is Precision.BF16
    assert parsed.device_type == "tpu7x-4x4x8"
    assert parsed.topology == "4x4x8"
    assert parsed.suffix is None


def test_parse_folder_name_storage_suffix() -> None:
    parsed = parse_folder_name("4k-bf16-tpu7x-4x8x8-gcs")
    assert parsed is not None
    assert parsed.suffix == "gcs"
    assert parsed.topology == "4x8x8"
    assert parsed.device_type == "tpu7x-4x8x8"


def test_parse_folder_name_without_sequence_length() -> None:
    parsed = parse_folder_name("bf16-tpu7x-4x4x4")
    assert parsed is not None
    assert parsed.seq is None
    assert parsed.seq_tokens is None
    assert parsed.precision is Precision.BF16
    assert parsed.topology == "4x4x4"


def test_parse_folder_name_long_context_fp8() -> None:
    parsed = parse_folder_name("128k-fp8-tpu7x-4x8x8")
    assert parsed is not None
    assert parsed.seq == "128k"
    assert parsed.seq_tokens == 128 * 1024
    assert parsed.precision is Precision.FP8
    assert parsed.device_type == "tpu7x-4x8x8"
    assert parsed.suffix is None


@pytest.mark.parametrize(
    "name", ["xpk", "", "4k-int4-tpu7x-4x4x8", "4k-bf16-tpu7x", "README.md", "4k-bf16-tpu7x-256"]
)
def test_parse_folder_name_other_names_give_none(name: str) -> None:
    assert parse_folder_name(name) is None


def test_resolve_model_variant_plain_picks_the_recipe_without_suffix(tmp_path: Path) -> None:
    for name in ("4k-bf16-tpu7x-4x8x8", "4k-bf16-tpu7x-4x8x8-gcs", "4k-bf16-tpu7x-4x8x8-lustre"):
        folder = tmp_path / "training" / "ironwood" / "m" / name / "xpk"
        folder.mkdir(parents=True)
        (folder / "run_recipe.sh").write_text("# placeholder\n")
    ref = resolve_model("m", tmp_path, Filters(variant="plain"))
    assert ref.config_dir.name == "4k-bf16-tpu7x-4x8x8"
