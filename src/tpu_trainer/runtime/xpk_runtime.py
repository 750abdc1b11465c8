"""xpk 1.16 in its own venv in the cache, found there or installed on first use.

xpk pins its own dependencies, so it lives apart from the tool (``<cache>/xpk-1.16.0``). Like
every runtime it is built aside (``.partial``) under a file lock, moved into place when
complete, marked, and reused after that. A venv made by hand (or by an older ``scripts/test.sh``)
that already imports xpk is adopted as it is: marked, never rebuilt.

Callers get a folder holding only an ``xpk`` link (:func:`xpk_bin_dir`): put first on PATH, it
makes ``xpk`` mean this xpk without the venv's ``python`` shadowing the one gcloud looks for.
``$TPU_TRAINER_XPK`` names another ``xpk`` program to run instead (an xpk 1.16 installed elsewhere).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path

from tpu_trainer.infra.runner import CommandResult, CommandRunner
from tpu_trainer.infra.tool_env import XPK_VERSION, xpk_venv
from tpu_trainer.runtime.manager import MARKER, Progress, RuntimeSetupError, publish

XPK_ENV = "TPU_TRAINER_XPK"
"""An ``xpk`` program to run instead of the tool's own (its folder goes first on PATH)."""
REQUIREMENT = f"xpk=={XPK_VERSION}"
CHECK_IMPORT = "xpk.parser.core"
LINK_DIR = "tpu-trainer-bin"
"""The folder inside the venv that holds only the ``xpk`` link."""
INSTALL_TIMEOUT_S = 1800
_UNREACHABLE = (
    "No matching distribution found",
    "Could not find a version",
    "NewConnectionError",
    "Network is unreachable",
    "Temporary failure in name resolution",
    "ProxyError",
    "Read timed out",
)


def xpk_bin_dir(env: Mapping[str, str] | None = None) -> Path:
    """The folder holding only the tool's ``xpk`` (it may not exist yet)."""
    return xpk_venv(_env(env)) / LINK_DIR


def _env(env: Mapping[str, str] | None) -> dict[str, str]:
    return dict(os.environ if env is None else env)


def _imports_xpk(runner: CommandRunner, venv: Path) -> bool:
    python = venv / "bin" / "python"
    if not (python.exists() and (venv / "bin" / "xpk").exists()):
        return False
    result = runner.run(
        [str(python), "-c", f"import {CHECK_IMPORT}"],
        timeout=120,
        env={"TELEMETRY_ENABLED": "false"},
    )
    return result.ok


def _link(venv: Path) -> Path:
    """``<venv>/tpu-trainer-bin/xpk`` -> ``../bin/xpk`` (made when missing)."""
    folder = venv / LINK_DIR
    folder.mkdir(exist_ok=True)
    link = folder / "xpk"
    if not link.is_symlink():
        link.symlink_to(Path("..") / "bin" / "xpk")
    return folder


def _adopt(venv: Path) -> None:
    """Mark a working xpk venv made by other means as installed (nothing in it changes)."""
    import json

    from tpu_trainer.infra.files import atomic_write

    info = {"name": "xpk", "version": XPK_VERSION, "requirement": REQUIREMENT, "adopted": True}
    atomic_write(venv / MARKER, json.dumps(info, indent=2), sync=False)


def ensure_xpk(
    runner: CommandRunner, progress: Progress, env: Mapping[str, str] | None = None
) -> Path:
    """The folder to put first on PATH for ``xpk`` to be xpk 1.16: ``$TPU_TRAINER_XPK``'s folder,
    else the cache's (see :func:`install_xpk`)."""
    full = _env(env)
    if full.get(XPK_ENV):
        return Path(full[XPK_ENV]).expanduser().resolve().parent
    return install_xpk(runner, progress, full)


def install_xpk(
    runner: CommandRunner, progress: Progress, env: Mapping[str, str] | None = None
) -> Path:
    """The folder holding the cache venv's ``xpk``, installing xpk there first when missing.
    Safe to call concurrently: the second caller waits for the first and reuses its work."""
    from tpu_trainer.infra.files import file_lock

    target = xpk_venv(_env(env))
    if (target / MARKER).is_file() and (target / "bin" / "xpk").exists():
        return _link(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(str(target) + ".lock", timeout=INSTALL_TIMEOUT_S):
        if (target / MARKER).is_file() or _imports_xpk(runner, target):
            if not (target / MARKER).is_file():
                _adopt(target)
            return _link(target)
        started = time.monotonic()
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _build(runner, progress, partial, started)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
        info: dict[str, object] = {
            "name": "xpk",
            "version": XPK_VERSION,
            "requirement": REQUIREMENT,
            "seconds": round(time.monotonic() - started),
        }
        publish(partial, target, info)
        progress(f"xpk {XPK_VERSION} ready in {target} after {time.monotonic() - started:.0f} s")
        return _link(target)


def _build(runner: CommandRunner, progress: Progress, partial: Path, started: float) -> None:
    import sys

    progress(f"installing xpk {XPK_VERSION} into {partial.with_suffix('')} (once; minutes)")
    python = shutil.which("python3") or sys.executable
    _step(runner.run([python, "-m", "venv", str(partial)], timeout=600), partial)

    def on_line(_: str, line: str) -> None:
        if line.startswith(("Collecting", "Downloading", "Installing", "Successfully")):
            progress(f"[{time.monotonic() - started:4.0f} s] {line[:100]}")

    pip = [str(partial / "bin" / "python"), "-m", "pip", "install"]
    flags = ["--disable-pip-version-check", "--progress-bar", "off"]
    _step(
        runner.run([*pip, *flags, REQUIREMENT], timeout=INSTALL_TIMEOUT_S, on_line=on_line),
        partial,
    )
    check = [str(partial / "bin" / "python"), "-c", f"import {CHECK_IMPORT}"]
    _step(runner.run(check, timeout=120, env={"TELEMETRY_ENABLED": "false"}), partial)


def _step(result: CommandResult, partial: Path) -> None:
    if result.ok:
        return
    output = f"{result.stdout}\n{result.stderr}"
    venv = partial.with_name(partial.name.removesuffix(".partial"))
    by_hand = f"`python3 -m venv {venv} && {venv}/bin/pip install {REQUIREMENT}`"
    if any(marker in output for marker in _UNREACHABLE):
        raise RuntimeSetupError(
            f"could not download {REQUIREMENT}: pip cannot reach its package index",
            fix="check this machine's network access to PyPI (or set PIP_INDEX_URL to an index "
            f"that has xpk) and run again; or install it by hand: {by_hand}, or point "
            f"{XPK_ENV} at an xpk {XPK_VERSION} program",
        )
    tail = " | ".join(output.strip().splitlines()[-3:])
    raise RuntimeSetupError(
        f"installing {REQUIREMENT} failed at `{' '.join(result.argv[:4])} ...`: {tail}",
        fix=f"nothing was left half-made; run again, or install it by hand: {by_hand}",
    )
