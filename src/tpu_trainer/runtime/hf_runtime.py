"""The Hugging Face runtime: Transformers with a CPU build of PyTorch, for smoke-testing the
generated training script on this machine (``train_hf.py --cpu``).

Python 3.11 and ``torch==2.13.0``: pip takes the CPU build of that release when a wheel of it
lies in the configured find-links (about 190 MB, no CUDA packages); elsewhere the same pin
installs PyPI's default build, larger but just as usable on a CPU. The other packages are
pinned to the versions the TPU program installs.

Like every runtime it is built aside (``.partial``) under a file lock, moved into place when
complete, marked, and reused after that: ``python -m tpu_trainer.runtime.hf_runtime`` makes it.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.infra.tool_env import cache_dir
from tpu_trainer.plan.hf_program import ACCELERATE_VERSION, TRANSFORMERS_VERSION
from tpu_trainer.runtime.manager import MARKER, Progress, check_ok, find_python, publish

INSTALL_TIMEOUT_S = 3600


@dataclass(frozen=True, slots=True, kw_only=True)
class HfRuntime:
    """What the runtime holds."""

    transformers: str = TRANSFORMERS_VERSION
    accelerate: str = ACCELERATE_VERSION
    torch: str = "2.13.0"
    python: str = "3.11"

    @property
    def key(self) -> str:
        """The folder name under the cache (``hf-5.23.0-torch-2.13.0``)."""
        return f"hf-{self.transformers}-torch-{self.torch}"

    @property
    def requirements(self) -> tuple[str, ...]:
        return (
            f"torch=={self.torch}",
            f"transformers=={self.transformers}",
            f"accelerate=={self.accelerate}",
        )


HF = HfRuntime()
_CHECK = "import torch, transformers, accelerate; torch.ones(2) @ torch.ones(2)"


def hf_runtime_dir(spec: HfRuntime = HF, env: dict[str, str] | None = None) -> Path:
    return cache_dir(env) / spec.key


def hf_python(spec: HfRuntime = HF, env: dict[str, str] | None = None) -> Path:
    return hf_runtime_dir(spec, env) / "bin" / "python"


def is_hf_installed(spec: HfRuntime = HF, env: dict[str, str] | None = None) -> bool:
    return (hf_runtime_dir(spec, env) / MARKER).is_file()


def install_hf(
    runner: CommandRunner,
    progress: Progress,
    env: dict[str, str] | None = None,
    spec: HfRuntime = HF,
) -> Path:
    """Make the runtime when it is missing; returns its python. Safe to call concurrently: the
    second caller waits for the first and reuses its work."""
    from filelock import FileLock

    target = hf_runtime_dir(spec, env)
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock", timeout=INSTALL_TIMEOUT_S):
        if is_hf_installed(spec, env):
            return hf_python(spec, env)
        python = find_python(spec.python, env)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        started = time.monotonic()
        progress(f"creating the {spec.key} runtime with {python} in {target} (once)")
        _ok(runner.run([python, "-m", "venv", str(partial)], timeout=600))

        def on_line(_: str, line: str) -> None:
            if line.startswith(("Collecting", "Installing", "Successfully")):
                progress(f"[{time.monotonic() - started:5.0f} s] {line[:100]}")

        pip = [str(partial / "bin" / "python"), "-m", "pip", "install"]
        flags = ["--disable-pip-version-check", "--progress-bar", "off"]
        _ok(
            runner.run(
                [*pip, *flags, *spec.requirements], timeout=INSTALL_TIMEOUT_S, on_line=on_line
            )
        )
        _ok(runner.run([str(partial / "bin" / "python"), "-c", _CHECK], timeout=600))
        info: dict[str, object] = {
            "name": "hf",
            "version": spec.transformers,
            "requirement": " ".join(spec.requirements),
            "python": python,
            "seconds": round(time.monotonic() - started),
        }
        publish(partial, target, info)
        progress(f"{spec.key} ready after {time.monotonic() - started:.0f} s")
        return hf_python(spec, env)


_ok = check_ok


def main() -> int:
    """``python -m tpu_trainer.runtime.hf_runtime``: make the runtime (once) and print its
    python."""
    from tpu_trainer.errors import TpuTrainerError
    from tpu_trainer.infra.runner import SubprocessRunner

    try:
        python = install_hf(SubprocessRunner(), lambda line: print(line, flush=True))  # noqa: T201
    except TpuTrainerError as e:
        print(f"error: {e.message}\nfix: {e.fix}", file=sys.stderr)  # noqa: T201
        return 1
    print(python)  # noqa: T201
    return 0


if __name__ == "__main__":
    sys.exit(main())
