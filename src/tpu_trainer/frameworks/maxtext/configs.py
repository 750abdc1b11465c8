"""MaxText's own configuration files (``configs/base.yml``, ``configs/models/*.yml``), read as data.

They come from the installed MaxText runtime; without it, from the MaxText wheel alone
(``pip download --no-deps``, 14 MB), unpacked once into the cache folder. Nothing is executed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.tool_env import cache_dir
from tpu_trainer.runtime.manager import MAXTEXT, runtime_dir


class MaxTextConfigsError(TpuTrainerError):
    """Neither the runtime nor the wheel's configuration files could be found or fetched."""


def _runtime_configs(env: dict[str, str] | None) -> Path | None:
    root = runtime_dir(MAXTEXT, env)
    return next(iter(sorted(root.glob("lib/python3*/site-packages/maxtext/configs"))), None)


def _wheel_configs(env: dict[str, str] | None) -> Path:
    return cache_dir(env) / f"maxtext-configs-{MAXTEXT.version}" / "maxtext" / "configs"


def _fetch_wheel_configs(env: dict[str, str] | None) -> Path:
    from tpu_trainer.infra.files import file_lock

    target = _wheel_configs(env)
    root = target.parent.parent
    root.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(str(root) + ".lock", timeout=600):
        if (target / "base.yml").is_file():
            return target
        download = root.with_name(root.name + ".download")
        download.mkdir(parents=True, exist_ok=True)
        try:
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--only-binary=:all:",
                    f"--python-version={MAXTEXT.python}",
                    "--disable-pip-version-check",
                    "--dest",
                    str(download),
                    f"maxtext=={MAXTEXT.version}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
        except OSError as e:
            raise MaxTextConfigsError(
                f"MaxText {MAXTEXT.version}'s configuration files are not here and pip could "
                f"not be started to fetch them ({e.strerror})",
                fix="run `tpu-trainer runtime install maxtext`",
            ) from None
        wheels = sorted(download.glob("maxtext-*.whl"))
        if result.returncode != 0 or not wheels:
            raise MaxTextConfigsError(
                f"MaxText {MAXTEXT.version}'s configuration files are not here and could not be "
                f"downloaded: {(result.stderr or result.stdout).strip()[-300:]}",
                fix="run `tpu-trainer runtime install maxtext` (or check access to PyPI)",
            )
        with zipfile.ZipFile(wheels[0]) as wheel:
            for name in wheel.namelist():
                if name.startswith("maxtext/configs/") and name.endswith(".yml"):
                    wheel.extract(name, root)
        shutil.rmtree(download, ignore_errors=True)
        return target


def configs_dir(env: dict[str, str] | None = None, *, fetch: bool = True) -> Path:
    """The folder holding ``base.yml`` and ``models/``: the runtime's, else the wheel's."""
    env = dict(os.environ) if env is None else env
    if env.get("TPU_TRAINER_MAXTEXT_CONFIGS"):
        return Path(env["TPU_TRAINER_MAXTEXT_CONFIGS"])
    found = _runtime_configs(env)
    if found is not None and (found / "base.yml").is_file():
        return found
    wheel = _wheel_configs(env)
    if (wheel / "base.yml").is_file():
        return wheel
    if not fetch:
        raise MaxTextConfigsError(
            f"MaxText {MAXTEXT.version}'s configuration files are not installed",
            fix="run `tpu-trainer runtime install maxtext`",
        )
    return _fetch_wheel_configs(env)


def _load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise MaxTextConfigsError(f"{path} is not a mapping", fix="reinstall the runtime")
    return data


@dataclass(frozen=True)
class MaxTextConfigs:
    """``base.yml`` and the model files of one MaxText version."""

    root: Path
    base: Mapping[str, Any]
    _models: dict[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)

    @classmethod
    def load(cls, env: dict[str, str] | None = None, *, fetch: bool = True) -> MaxTextConfigs:
        """The configuration files, read once per process and folder."""
        root = configs_dir(env, fetch=fetch)
        loaded = _LOADED.get(root)
        if loaded is None:
            loaded = _LOADED[root] = cls(root, _load_yaml(root / "base.yml"))
        return loaded

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(self.base)

    def model_names(self) -> list[str]:
        return sorted(p.stem for p in (self.root / "models").glob("*.yml"))

    def model(self, name: str) -> Mapping[str, Any]:
        """The model file's settings (empty for ``default``); unknown names raise."""
        if name == "default":
            return {}
        if name not in self._models:
            path = self.root / "models" / f"{name}.yml"
            if not path.is_file():
                raise MaxTextConfigsError(
                    f"MaxText {MAXTEXT.version} has no model '{name}'",
                    fix="use one of: " + ", ".join(self.model_names()[:12]) + ", ...",
                )
            self._models[name] = _load_yaml(path)
        return self._models[name]

    def effective(self, args: Mapping[str, str]) -> dict[str, Any]:
        """base.yml, then the model file, then the command's arguments (YAML-typed), as MaxText
        layers them; model keys win over arguments unless ``override_model_config`` is true."""
        out: dict[str, Any] = dict(self.base)
        model = self.model(args.get("model_name", str(self.base.get("model_name", "default"))))
        out.update(model)
        override = str(args.get("override_model_config", "false")).lower() == "true"
        for key, text in args.items():
            if key in model and not override:
                continue
            out[key] = parse_value(text)
        return out


_LOADED: dict[Path, MaxTextConfigs] = {}


def parse_value(text: str) -> Any:
    """A command-line value typed the way YAML would type it (``4`` → 4, ``true`` → True)."""
    try:
        return yaml.safe_load(text) if text != "" else ""
    except yaml.YAMLError:
        return text
