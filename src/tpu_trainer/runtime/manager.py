"""Runtimes: virtual environments that hold a training framework, outside any checkout.

The MaxText runtime is a Python 3.12 venv with ``maxtext[tpu]==0.2.5`` (it also gives the
offline AOT compiler). It is created once per version under the cache folder, guarded by a lock
so two installs never collide, built in a ``.partial`` folder and moved into place only when
complete, and reused after that.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.infra.runner import CommandFailed, CommandRunner
from tpu_trainer.infra.tool_env import cache_dir

MARKER = "tpu-trainer-runtime.json"


@dataclass(frozen=True, slots=True)
class RuntimeSpec:
    name: str
    version: str
    requirement: str
    python: str
    """Major.minor the framework needs."""
    check_import: str
    extras: tuple[str, ...] = ()
    """Further pinned packages installed with ``requirement``."""
    check_code: str = ""
    """Python run in the new venv to prove it works (default: ``import <check_import>``)."""

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"

    @property
    def requirements(self) -> tuple[str, ...]:
        return (self.requirement, *self.extras)


MAXTEXT = RuntimeSpec("maxtext", "0.2.5", "maxtext[tpu]==0.2.5", "3.12", "maxtext")
TUNIX = RuntimeSpec("tunix", "0.1.7", "google-tunix==0.1.7", "3.12", "tunix.cli.config")
"""Tunix on this machine's CPU: enough to load a GRPO configuration with Tunix's own parser
(its CLI cannot train on a CPU; on a TPU VM the ``prod`` extra brings ``jax[tpu]``)."""
RAY = RuntimeSpec("ray", "2.60.0", "ray[default,train]==2.60.0", "3.12", "ray.train.v2.jax")
"""Ray Train on top of the MaxText runtime, like the seed's image (a Ray base image with MaxText
installed): made by :func:`tpu_trainer.runtime.ray_runtime.install_ray`, not by :func:`install`,
so it is not listed in ``RUNTIMES``."""
RUNTIMES = {MAXTEXT.name: MAXTEXT, TUNIX.name: TUNIX}


class RuntimeSetupError(TpuTrainerError):
    """A runtime that cannot be found or made."""


def runtime_dir(spec: RuntimeSpec, env: dict[str, str] | None = None) -> Path:
    return cache_dir(env) / spec.key


def runtime_python(spec: RuntimeSpec, env: dict[str, str] | None = None) -> Path:
    return runtime_dir(spec, env) / "bin" / "python"


def is_installed(spec: RuntimeSpec, env: dict[str, str] | None = None) -> bool:
    return (runtime_dir(spec, env) / MARKER).is_file()


def _works(python: str, wanted: str) -> bool:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and out.stdout.strip() == wanted


def find_python(version: str, env: dict[str, str] | None = None) -> str:
    """A working ``python<version>``: $TPU_TRAINER_PYTHON<nodot>, PATH, pyenv, common places."""
    env = dict(os.environ) if env is None else env
    override = env.get(f"TPU_TRAINER_PYTHON{version.replace('.', '')}")
    home = Path(env.get("HOME") or Path.home())
    candidates = [
        override,
        shutil.which(f"python{version}"),
        *sorted(
            (
                str(p)
                for p in (home / ".pyenv" / "versions").glob(f"{version}*/bin/python{version}")
            ),
            reverse=True,
        ),
        f"/usr/bin/python{version}",
        f"/usr/local/bin/python{version}",
    ]
    for candidate in candidates:
        if candidate and Path(candidate).exists() and _works(candidate, version):
            return candidate
    raise RuntimeSetupError(
        f"no working Python {version} found (looked at $TPU_TRAINER_PYTHON{version.replace('.', '')}, "
        f"python{version} on PATH, ~/.pyenv/versions/{version}*)",
        fix=f"install it (`pyenv install {version}` or `apt-get install python{version} "
        f"python{version}-venv`), or point TPU_TRAINER_PYTHON{version.replace('.', '')} at one",
    )


Progress = Callable[[str], None]


def install(
    spec: RuntimeSpec, runner: CommandRunner, progress: Progress, env: dict[str, str] | None = None
) -> Path:
    """Create the runtime if it is not there yet; returns its python. Safe to call concurrently."""
    from tpu_trainer.infra.files import file_lock

    target = runtime_dir(spec, env)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(str(target) + ".lock", timeout=3600):
        if is_installed(spec, env):
            return runtime_python(spec, env)
        python = find_python(spec.python, env)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        started = time.monotonic()
        progress(f"creating the {spec.key} runtime with {python} in {target} (once)")
        _ok(runner.run([python, "-m", "venv", str(partial)], timeout=600))
        pip = [
            str(partial / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
        ]
        _ok(runner.run([*pip, "--upgrade", "pip"], timeout=600))

        def on_line(_: str, line: str) -> None:
            if line.startswith(("Collecting", "Downloading", "Installing", "Successfully")):
                progress(f"[{time.monotonic() - started:5.0f} s] {line[:100]}")

        _ok(runner.run([*pip, *spec.requirements], timeout=4 * 3600, on_line=on_line))
        _ok(
            runner.run(
                [
                    str(partial / "bin" / "python"),
                    "-c",
                    spec.check_code or f"import {spec.check_import}",
                ],
                timeout=600,
            )
        )
        publish(
            partial,
            target,
            {
                "name": spec.name,
                "version": spec.version,
                "requirement": " ".join(spec.requirements),
                "python": python,
                "seconds": round(time.monotonic() - started),
            },
        )
        progress(f"{spec.key} ready after {time.monotonic() - started:.0f} s")
        return runtime_python(spec, env)


def publish(partial: Path, target: Path, info: dict[str, object]) -> None:
    """Move a finished ``.partial`` venv into place and mark it installed (its marker last)."""
    if target.exists():
        shutil.rmtree(target)
    partial.rename(target)
    _rewrite_scripts(partial, target)
    (target / MARKER).write_text(json.dumps(info, indent=2), encoding="utf-8")


def check_ok(result: object) -> None:
    """A pip or venv step that must succeed (the partial runtime is made again next time)."""
    _ok(result)


def _ok(result: object) -> None:
    from tpu_trainer.infra.runner import CommandResult

    assert isinstance(result, CommandResult)  # noqa: S101
    if not result.ok:
        raise CommandFailed(
            result,
            fix="see the pip output above; the partial runtime is "
            "removed and made again on the next try",
        )


def _rewrite_scripts(old: Path, new: Path) -> None:
    """A venv's console scripts name their interpreter by path: point them at the new place."""
    for script in (new / "bin").iterdir():
        if not script.is_file() or script.is_symlink():
            continue
        try:
            head = script.read_bytes()[:256]
        except OSError:
            continue
        if head.startswith(b"#!") and str(old).encode() in head:
            text = script.read_bytes().replace(str(old).encode(), str(new).encode(), 1)
            script.write_bytes(text)


@dataclass(frozen=True, slots=True)
class Installed:
    key: str
    path: Path
    info: dict[str, object]


def installed(env: dict[str, str] | None = None) -> list[Installed]:
    root = cache_dir(env)
    out = []
    for marker in sorted(root.glob(f"*/{MARKER}")):
        try:
            info = json.loads(marker.read_text())
        except (OSError, json.JSONDecodeError):
            info = {}
        out.append(Installed(marker.parent.name, marker.parent, info))
    return out


def remove(key: str, env: dict[str, str] | None = None) -> Path:
    target = cache_dir(env) / key
    if not (target / MARKER).is_file():
        raise RuntimeSetupError(
            f"no runtime {key} in {cache_dir(env)}", fix="see `tpu-trainer runtime list`"
        )
    shutil.rmtree(target)
    return target
