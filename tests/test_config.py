"""Tests for ``tpu_trainer.config.model`` and ``tpu_trainer.config.load``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpu_trainer.config.load import (
    ENV_VAR,
    load_config,
    locate,
    read_config,
    render_template,
    search_path,
)
from tpu_trainer.config.model import KEY_NAMES, Reservation, Source, config_from_mapping
from tpu_trainer.errors import ConfigError, TpuTrainerError

pytestmark = pytest.mark.unit

# Line numbers matter: tests check that sources point at them.
VALID = """\
# a comment on line 1
project_id: demo-project
cluster_name: demo-cluster
reservations:
  - demo-reservation-a
  - name: demo-reservation-b
    zone: us-central1-c
default_zone: us-central1-ai1a
base_output_dir: gs://demo-bucket/runs
workload_image: gcr.io/demo-project/maxtext-runner
maxtext_branch: main
jax_version: 0.8.1
libtpu_version: 0.0.31
"""

VALID_LINES = {
    "project_id": 2,
    "cluster_name": 3,
    "reservations": 4,
    "default_zone": 8,
    "base_output_dir": 9,
    "workload_image": 10,
    "maxtext_branch": 11,
    "jax_version": 12,
    "libtpu_version": 13,
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def config_with_project(project: str) -> str:
    return VALID.replace("project_id: demo-project", f"project_id: {project}")


def read_error(tmp_path: Path, text: str) -> ConfigError:
    path = write(tmp_path / "config.yaml", text)
    with pytest.raises(ConfigError) as info:
        read_config(path)
    return info.value


# ---------------------------------------------------------------------------
# A valid file
# ---------------------------------------------------------------------------


def test_read_config_valid_file_loads_every_value(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", VALID)
    config = read_config(path)
    assert config.project_id == "demo-project"
    assert config.cluster_name == "demo-cluster"
    assert config.default_zone == "us-central1-ai1a"
    assert config.base_output_dir == "gs://demo-bucket/runs"
    assert config.workload_image == "gcr.io/demo-project/maxtext-runner"
    assert config.maxtext_branch == "main"
    assert config.jax_version == "0.8.1"
    assert config.libtpu_version == "0.0.31"
    assert config.tpu_recipes_path is None
    assert config.machine_type is None
    assert config.path == path


def test_read_config_reservations_as_names_and_as_name_zone(tmp_path: Path) -> None:
    config = read_config(write(tmp_path / "config.yaml", VALID))
    assert config.reservations == (
        Reservation("demo-reservation-a"),
        Reservation("demo-reservation-b", zone="us-central1-c"),
    )
    assert config.reservations[0].zone is None


def test_read_config_single_reservation_string_becomes_one_entry(tmp_path: Path) -> None:
    text = VALID.replace(
        "reservations:\n  - demo-reservation-a\n  - name: demo-reservation-b\n"
        "    zone: us-central1-c\n",
        "reservations: only-one\n",
    )
    config = read_config(write(tmp_path / "config.yaml", text))
    assert config.reservations == (Reservation("only-one"),)


def test_read_config_region_derived_from_default_zone(tmp_path: Path) -> None:
    config = read_config(write(tmp_path / "config.yaml", VALID))
    assert config.region == "us-central1"
    assert config.sources["region"] == Source("derived from default_zone")
    assert str(config.sources["region"]) == "derived from default_zone"


def test_read_config_explicit_region_wins_over_derived(tmp_path: Path) -> None:
    config = read_config(write(tmp_path / "config.yaml", VALID + "region: us-east5\n"))
    assert config.region == "us-east5"
    assert config.sources["region"] == Source(str(tmp_path / "config.yaml"), 14)


def test_read_config_sources_point_at_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", VALID)
    config = read_config(path)
    for key, line in VALID_LINES.items():
        assert config.sources[key] == Source(str(path), line), key
    assert str(config.sources["default_zone"]) == f"{path}:8"
    assert "tpu_recipes_path" not in config.sources


def test_read_config_tpu_recipes_path_becomes_path(tmp_path: Path) -> None:
    recipes = tmp_path / "tpu-recipes"
    config = read_config(write(tmp_path / "config.yaml", VALID + f"tpu_recipes_path: {recipes}\n"))
    assert config.tpu_recipes_path == recipes
    assert isinstance(config.tpu_recipes_path, Path)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------


def test_read_config_missing_required_key_names_file_key_and_fix(tmp_path: Path) -> None:
    error = read_error(tmp_path, VALID.replace("cluster_name: demo-cluster\n", ""))
    assert str(tmp_path / "config.yaml") in error.message
    assert "cluster_name" in error.message
    assert "missing" in error.message
    assert "add `cluster_name:" in error.fix
    assert isinstance(error, TpuTrainerError)
    assert error.exit_code == 3


def test_read_config_empty_required_value_counts_as_missing(tmp_path: Path) -> None:
    error = read_error(tmp_path, VALID.replace("project_id: demo-project", "project_id:"))
    assert "project_id: missing" in error.message
    assert "project_id" in error.fix


def test_read_config_unknown_key_reservation_suggests_reservations(tmp_path: Path) -> None:
    error = read_error(tmp_path, VALID.replace("reservations:", "reservation:"))
    assert "reservation" in error.message
    assert "unknown key" in error.message
    assert f"{tmp_path / 'config.yaml'}:4" in error.message
    assert "`reservations`" in error.fix


def test_read_config_misspelled_projet_id_suggests_project_id(tmp_path: Path) -> None:
    error = read_error(tmp_path, VALID.replace("project_id:", "projet_id:"))
    assert "projet_id" in error.message
    assert "did you mean `project_id`?" in error.fix


def test_config_from_mapping_far_off_key_lists_known_keys() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"zzzzzz": "1"}, "cfg.yaml")
    assert "known keys:" in info.value.fix
    for name in KEY_NAMES:
        assert name in info.value.fix


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("project_id: demo-project\ncluster_name: demo-cluster\n  bad: indent\n", 3),
        ("project_id: demo-project\ncluster_name: [a, b\ndefault_zone: x\n", 3),
    ],
)
def test_read_config_bad_yaml_reports_line_number(tmp_path: Path, text: str, line: int) -> None:
    error = read_error(tmp_path, text)
    assert f"{tmp_path / 'config.yaml'}:{line}:" in error.message
    assert "not valid YAML" in error.message
    assert "YAML" in error.fix


def test_read_config_list_instead_of_mapping_raises(tmp_path: Path) -> None:
    error = read_error(tmp_path, "- a\n- b\n")
    assert "found a list" in error.message


@pytest.mark.parametrize(
    ("old", "new", "key", "line"),
    [
        ("project_id: demo-project", "project_id: Demo_Project", "project_id", 2),
        ("project_id: demo-project", "project_id: abc", "project_id", 2),
        ("default_zone: us-central1-ai1a", "default_zone: uscentral", "default_zone", 8),
        (
            "workload_image: gcr.io/demo-project/maxtext-runner",
            "workload_image: not an image",
            "workload_image",
            10,
        ),
        (
            "workload_image: gcr.io/demo-project/maxtext-runner",
            "workload_image: gcr.io/x/y;rm -rf",
            "workload_image",
            10,
        ),
        ("cluster_name: demo-cluster", "cluster_name: 12345", "cluster_name", 3),
        (
            "base_output_dir: gs://demo-bucket/runs",
            "base_output_dir: s3://x/y",
            "base_output_dir",
            9,
        ),
        ("maxtext_branch: main", "maxtext_branch: main;reboot", "maxtext_branch", 11),
        ("jax_version: 0.8.1", "jax_version: true", "jax_version", 12),
    ],
)
def test_read_config_bad_value_error_names_key_and_line(
    tmp_path: Path, old: str, new: str, key: str, line: int
) -> None:
    assert old in VALID
    error = read_error(tmp_path, VALID.replace(old, new))
    assert f"{tmp_path / 'config.yaml'}:{line}: {key}:" in error.message
    assert f"`{key}:" in error.fix


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("{name: x-res, zone: bad}", "is not a zone"),
        ("{zone: us-central1-c}", "has no name"),
        ("{name: x-res, color: red}", "unknown field"),
        ("Bad_Name", "is not a reservation name"),
    ],
)
def test_read_config_bad_reservation_entry_raises_with_example(
    tmp_path: Path, entry: str, problem: str
) -> None:
    error = read_error(tmp_path, VALID.replace("- demo-reservation-a", f"- {entry}"))
    assert "reservations" in error.message
    assert problem in error.message
    assert "reservations: [" in error.fix


def test_read_config_empty_reservation_list_raises(tmp_path: Path) -> None:
    text = VALID.replace(
        "reservations:\n  - demo-reservation-a\n  - name: demo-reservation-b\n"
        "    zone: us-central1-c\n",
        "reservations: []\n",
    )
    error = read_error(tmp_path, text)
    assert "needs at least one reservation" in error.message


def test_read_config_float_looking_version_keeps_its_text(tmp_path: Path) -> None:
    config = read_config(
        write(tmp_path / "config.yaml", VALID.replace("jax_version: 0.8.1", "jax_version: 0.10"))
    )
    assert config.jax_version == "0.10"


@pytest.mark.parametrize("version", ["0.10", "1.20", "0.4.30"])
def test_read_config_unquoted_version_keeps_trailing_zero(tmp_path: Path, version: str) -> None:
    text = VALID.replace("jax_version: 0.8.1", f"jax_version: {version}")
    assert read_config(write(tmp_path / "config.yaml", text)).jax_version == version


@pytest.mark.parametrize("key", ["machine_type", "maxtext_branch", "tpu_recipes_path"])
def test_read_config_explicit_null_leaves_optional_key_unset(tmp_path: Path, key: str) -> None:
    text = VALID.replace("maxtext_branch: main\n", "") + f"{key}: null\n"
    config = read_config(write(tmp_path / "config.yaml", text))
    assert getattr(config, key) is None
    assert key not in config.sources


# ---------------------------------------------------------------------------
# Where the file is looked for
# ---------------------------------------------------------------------------


def _four_places(tmp_path: Path) -> tuple[Path, Path, Path, Path, Path]:
    home = tmp_path / "home"
    explicit = write(tmp_path / "explicit.yaml", config_with_project("explicit-proj"))
    from_env = write(tmp_path / "env.yaml", config_with_project("envvar-proj"))
    user = write(home / ".config" / "tpu-trainer" / "config.yaml", config_with_project("user-proj"))
    skill = write(
        home / ".claude" / "skills" / "tpu-trainer" / "config.yaml",
        config_with_project("skill-proj"),
    )
    return home, explicit, from_env, user, skill


def test_search_path_is_user_config_then_skill_config(tmp_path: Path) -> None:
    assert search_path(tmp_path) == (
        tmp_path / ".config" / "tpu-trainer" / "config.yaml",
        tmp_path / ".claude" / "skills" / "tpu-trainer" / "config.yaml",
    )


def test_load_config_explicit_path_beats_everything(tmp_path: Path) -> None:
    home, explicit, from_env, _, _ = _four_places(tmp_path)
    config = load_config(explicit, env={ENV_VAR: str(from_env)}, home=home)
    assert config is not None
    assert config.project_id == "explicit-proj"
    assert config.path == explicit
    assert locate(explicit, env={ENV_VAR: str(from_env)}, home=home).how == "--config"


def test_load_config_env_var_beats_default_locations(tmp_path: Path) -> None:
    home, _, from_env, _, _ = _four_places(tmp_path)
    config = load_config(env={ENV_VAR: str(from_env)}, home=home)
    assert config is not None
    assert config.project_id == "envvar-proj"
    assert locate(None, env={ENV_VAR: str(from_env)}, home=home).how == "$TPU_TRAINER_CONFIG"


def test_load_config_user_config_beats_skill_config(tmp_path: Path) -> None:
    home, _, _, user, _ = _four_places(tmp_path)
    config = load_config(env={}, home=home)
    assert config is not None
    assert config.project_id == "user-proj"
    assert config.path == user
    assert locate(None, env={}, home=home).how == "default location"


def test_load_config_skill_config_used_when_alone(tmp_path: Path) -> None:
    home, _, _, user, skill = _four_places(tmp_path)
    user.unlink()
    config = load_config(env={}, home=home)
    assert config is not None
    assert config.project_id == "skill-proj"
    assert config.path == skill


def test_load_config_empty_env_var_is_ignored(tmp_path: Path) -> None:
    home, _, _, _, _ = _four_places(tmp_path)
    config = load_config(env={ENV_VAR: ""}, home=home)
    assert config is not None
    assert config.project_id == "user-proj"


def test_load_config_explicit_missing_file_raises(tmp_path: Path) -> None:
    home, _, _, _, _ = _four_places(tmp_path)
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(missing, env={}, home=home)
    assert str(missing) in info.value.message
    assert "no such file" in info.value.message


def test_load_config_env_var_missing_file_raises(tmp_path: Path) -> None:
    home, _, _, _, _ = _four_places(tmp_path)
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(env={ENV_VAR: str(missing)}, home=home)
    assert ENV_VAR in info.value.message
    assert ENV_VAR in info.value.fix


def test_load_config_nothing_found_not_required_returns_none(tmp_path: Path) -> None:
    assert load_config(require=False, env={}, home=tmp_path) is None
    assert locate(None, env={}, home=tmp_path).path is None


def test_load_config_nothing_found_required_raises_with_places(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(env={}, home=tmp_path)
    assert str(tmp_path / ".config" / "tpu-trainer" / "config.yaml") in info.value.message
    assert "config init" in info.value.fix


# ---------------------------------------------------------------------------
# The template
# ---------------------------------------------------------------------------


def test_render_template_partial_values_read_back(tmp_path: Path) -> None:
    values = {
        "project_id": "my-proj-1",
        "cluster_name": "c1",
        "default_zone": "europe-west4-a",
    }
    path = write(tmp_path / "config.yaml", render_template(values))
    config = read_config(path, require=False)
    assert config.project_id == "my-proj-1"
    assert config.cluster_name == "c1"
    assert config.default_zone == "europe-west4-a"
    assert config.region == "europe-west4"
    assert config.reservations == ()
    assert config.workload_image == ""


def test_render_template_partial_values_fail_when_required(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yaml", render_template({"project_id": "my-proj-1"}))
    with pytest.raises(ConfigError, match="cluster_name: missing"):
        read_config(path)


def test_render_template_full_values_read_back_required(tmp_path: Path) -> None:
    values = {
        "project_id": "my-proj-1",
        "cluster_name": "c1",
        "reservations": "[res-a, res-b]",
        "default_zone": "us-central1-ai1a",
        "base_output_dir": "gs://my-bucket/runs",
        "workload_image": "gcr.io/my-proj-1/runner",
    }
    config = read_config(write(tmp_path / "config.yaml", render_template(values)))
    assert config.reservations == (Reservation("res-a"), Reservation("res-b"))
    assert config.base_output_dir == "gs://my-bucket/runs"
    assert config.workload_image == "gcr.io/my-proj-1/runner"


def test_render_template_shows_every_key_commented_when_empty() -> None:
    text = render_template({})
    for name in KEY_NAMES:
        assert f"# {name}: " in text
    assert not any(line and not line.startswith("#") for line in text.splitlines())
