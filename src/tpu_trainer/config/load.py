"""Finding and reading the configuration file."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tpu_trainer.config.model import KEYS, Config, config_from_mapping, short
from tpu_trainer.errors import ConfigError

ENV_VAR = "TPU_TRAINER_CONFIG"
_NULLS = ("null", "Null", "NULL", "~")


def search_path(home: Path | None = None) -> tuple[Path, ...]:
    """Files looked at, in order, when neither --config nor $TPU_TRAINER_CONFIG is given."""
    home = home or Path.home()
    return (
        home / ".config" / "tpu-trainer" / "config.yaml",
        home / ".claude" / "skills" / "tpu-trainer" / "config.yaml",
    )


@dataclass(frozen=True, slots=True)
class Located:
    path: Path | None
    how: str
    """"--config", "$TPU_TRAINER_CONFIG", "default location" or "none found"."""


def locate(
    explicit: Path | None, env: dict[str, str] | None = None, home: Path | None = None
) -> Located:
    """Which configuration file applies (the first of: --config, $TPU_TRAINER_CONFIG, defaults)."""
    env = dict(os.environ) if env is None else env
    if explicit is not None:
        if not explicit.is_file():
            raise ConfigError(
                f"--config {explicit}: no such file",
                fix="check the path, or run `tpu-trainer config init --path FILE`",
            )
        return Located(explicit, "--config")
    if env.get(ENV_VAR):
        path = Path(env[ENV_VAR]).expanduser()
        if not path.is_file():
            raise ConfigError(
                f"${ENV_VAR}={path}: no such file",
                fix=f"unset {ENV_VAR} or point it at a config file",
            )
        return Located(path, f"${ENV_VAR}")
    for path in search_path(home):
        if path.is_file():
            return Located(path, "default location")
    return Located(None, "none found")


def _key_lines(text: str) -> dict[str, int]:
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return {}
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {
        str(k.value): k.start_mark.line + 1 for k, _ in node.value if isinstance(k, yaml.ScalarNode)
    }


def refuse_aliases(text: str, where: str) -> None:
    """YAML aliases (``*name``) are refused before anything is built: a few hundred bytes of
    nested aliases would otherwise expand to gigabytes (the "billion laughs")."""
    try:
        for event in yaml.parse(text, Loader=yaml.BaseLoader):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark is not None else 0
                raise ConfigError(
                    f"{where}:{line}: YAML aliases (*{event.anchor}) are not accepted",
                    fix="write the value out in full where the alias stands",
                )
    except (yaml.YAMLError, RecursionError):
        return  # reported with its line by the loader


def _load_yaml(text: str, path: Path) -> Any:
    refuse_aliases(text, str(path))
    try:
        # BaseLoader keeps every scalar as written: `jax_version: 0.10` stays "0.10", not 0.1.
        return yaml.load(text, Loader=yaml.BaseLoader)  # noqa: S506 (BaseLoader builds no objects)
    except RecursionError:
        raise ConfigError(
            f"{path}: nested too deeply", fix="write `key: value` lines (see `config init`)"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise ConfigError(
            f"{where}: not valid YAML ({short(str(getattr(e, 'problem', e)))})",
            fix="fix the YAML syntax (keys are `name: value`, one per line)",
        ) from None


def read_config(path: Path, *, require: bool = True) -> Config:
    """Read and validate one configuration file."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        line = e.object[: e.start].count(b"\n") + 1
        raise ConfigError(
            f"{path}:{line}: not UTF-8 text (byte {e.object[e.start : e.start + 1]!r})",
            fix="save the configuration as UTF-8 (`tpu-trainer config init` writes one)",
        ) from None
    except OSError as e:
        raise ConfigError(
            f"{path}: cannot read ({e.strerror})", fix="check the file's permissions"
        ) from None
    data = _load_yaml(text, path)
    if data is None or data == "":
        data = {}
    if isinstance(data, dict):
        # BaseLoader reads `key: null` and `key: ~` as text: they mean "not set".
        data = {k: (None if v in _NULLS else v) for k, v in data.items()}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected `key: value` lines, found a {type(data).__name__}",
            fix="see `tpu-trainer config init` for the format",
        )
    config = config_from_mapping(data, str(path), _key_lines(text), require=require)
    return replace(config, path=path)


def load_config(
    explicit: Path | None = None,
    *,
    require: bool = True,
    env: dict[str, str] | None = None,
    home: Path | None = None,
) -> Config | None:
    """The configuration in force, or None when there is none and ``require`` is False."""
    found = locate(explicit, env, home)
    if found.path is None:
        if require:
            places = ", ".join(str(p) for p in search_path(home))
            raise ConfigError(
                f"no configuration found (looked for --config, ${ENV_VAR}, {places})",
                fix="run `tpu-trainer config init` to write one",
            )
        return None
    return read_config(found.path, require=require)


def render_template(values: dict[str, str]) -> str:
    """A commented config.yaml with ``values`` filled in and the other keys shown as examples."""
    lines = [
        "# tpu-trainer configuration. Every value is yours: the tool has no built-in project.",
        "",
    ]
    for key in KEYS:
        lines.append(f"# {key.help}{'' if key.required else ' (optional)'}")
        value = values.get(key.name)
        if value:
            lines.append(f"{key.name}: {value}")
        else:
            lines.append(f"# {key.name}: {key.example}")
        lines.append("")
    return "\n".join(lines)
