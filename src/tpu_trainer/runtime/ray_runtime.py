"""The Ray runtime: Ray Train 2.60 in one Python 3.12 with MaxText, as on the cluster.

On GKE the RayCluster's image holds Ray and MaxText side by side (a Ray base image with MaxText
installed). Here the same pairing is a small venv that sees the MaxText runtime's packages
through a ``.pth`` file, so only Ray and the few packages MaxText lacks are installed (seconds,
not the MaxText runtime's minutes and gigabytes). Packages installed into the Ray venv come
first on ``sys.path``; the MaxText runtime itself is never changed (pip does not uninstall
packages that live outside the environment it installs into).

Like every runtime it is built aside (``.partial``) under a file lock, moved into place when
complete, marked, and reused after that.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.runtime.manager import (
    MAXTEXT,
    RAY,
    Progress,
    check_ok,
    find_python,
    install,
    is_installed,
    publish,
    runtime_dir,
    runtime_python,
)

LAYER_FILE = "tpu-trainer-maxtext-runtime.pth"
"""The ``.pth`` file that adds the MaxText runtime's site-packages (and its own ``.pth``
files, through ``site.addsitedir``) after the Ray venv's own."""
INSTALL_TIMEOUT_S = 3600


def site_packages(venv: Path) -> Path:
    """``<venv>/lib/python3.X/site-packages`` (the first one found; the usual path if none)."""
    found = sorted(venv.glob("lib/python3*/site-packages"))
    return found[0] if found else venv / "lib" / f"python{RAY.python}" / "site-packages"


def layer_line(base_site: Path) -> str:
    """The one line of :data:`LAYER_FILE` (pure)."""
    return f"import site; site.addsitedir({str(base_site)!r})\n"


def ray_cli(env: dict[str, str] | None = None) -> Path:
    """The ``ray`` command of the Ray runtime."""
    return runtime_dir(RAY, env) / "bin" / "ray"


def _layer_intact(target: Path, base_site: Path) -> bool:
    layer = site_packages(target) / LAYER_FILE
    try:
        return base_site.is_dir() and layer.read_text(encoding="utf-8") == layer_line(base_site)
    except OSError:
        return False


def install_ray(
    runner: CommandRunner, progress: Progress, env: dict[str, str] | None = None
) -> Path:
    """Make the Ray runtime (and the MaxText runtime under it) when missing; returns its python.
    Safe to call concurrently: the second caller waits for the first and reuses its work."""
    from tpu_trainer.infra.files import file_lock

    install(MAXTEXT, runner, progress, env)
    base_site = site_packages(runtime_dir(MAXTEXT, env))
    target = runtime_dir(RAY, env)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(str(target) + ".lock", timeout=INSTALL_TIMEOUT_S):
        if is_installed(RAY, env) and _layer_intact(target, base_site):
            return runtime_python(RAY, env)
        python = find_python(RAY.python, env)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        started = time.monotonic()
        progress(f"creating the {RAY.key} runtime on top of {MAXTEXT.key} in {target} (once)")
        _ok(runner.run([python, "-m", "venv", str(partial)], timeout=600))
        (site_packages(partial) / LAYER_FILE).write_text(layer_line(base_site), encoding="utf-8")

        def on_line(_: str, line: str) -> None:
            if line.startswith(("Collecting", "Installing", "Successfully")):
                progress(f"[{time.monotonic() - started:5.0f} s] {line[:100]}")

        pip = [str(partial / "bin" / "python"), "-m", "pip", "install"]
        flags = ["--disable-pip-version-check", "--progress-bar", "off"]
        _ok(runner.run([*pip, *flags, RAY.requirement], timeout=INSTALL_TIMEOUT_S, on_line=on_line))
        check = f"import {RAY.check_import}, {MAXTEXT.check_import}"
        _ok(runner.run([str(partial / "bin" / "python"), "-c", check], timeout=600))
        info: dict[str, object] = {
            "name": RAY.name,
            "version": RAY.version,
            "requirement": RAY.requirement,
            "python": python,
            "layered_on": str(base_site),
            "seconds": round(time.monotonic() - started),
        }
        publish(partial, target, info)
        progress(f"{RAY.key} ready after {time.monotonic() - started:.0f} s")
        return runtime_python(RAY, env)


_ok = check_ok
