"""What a TPU VM runs: the framework's packages, the files it needs, its command line and the
environment, as data (pure). The launcher installs, copies and starts it the same way on every
worker, whatever the framework.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from tpu_trainer.errors import InputError
from tpu_trainer.plan.plan import Plan

REMOTE_ROOT = "tpu-trainer"
"""Everything the tool puts on a worker lives under this folder of the home directory."""
_FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")


class LogFormat(StrEnum):
    """Which parser reads the training log."""

    MAXTEXT = "maxtext"
    TUNIX = "tunix"
    HF_TRANSFORMERS = "hf-transformers"


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoteFile:
    """A generated file copied into the run folder of every worker (never holds a secret)."""

    name: str
    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class VmProgram:
    """One training program for a TPU VM."""

    framework: str
    """For reports: ``Tunix``, ``MaxText``."""
    version: str
    key: str
    """Names the virtual environment on the workers (``tunix-0.1.7``): reused across runs."""
    requirements: tuple[str, ...]
    """pip requirements installed into that environment on every worker."""
    python: str = "3.12"
    files: tuple[RemoteFile, ...] = ()
    args: tuple[str, ...]
    """What follows the environment's ``python`` (run in the run folder)."""
    env: tuple[tuple[str, str], ...] = ()
    """Plain environment variables of the training process."""
    secret_env: tuple[str, ...] = ()
    """Variables passed from this process's environment to the workers' processes (ssh
    ``SendEnv``), never written anywhere."""
    required_secrets: tuple[str, ...] = ()
    """Those of ``secret_env`` that must be set."""
    log_format: LogFormat

    def __post_init__(self) -> None:
        for f in self.files:
            if not _FILE_NAME.match(f.name):
                raise InputError(f"remote file name {f.name!r} is not a plain file name")
        for name in (*(k for k, _ in self.env), *self.secret_env):
            if not _ENV_NAME.match(name):
                raise InputError(f"environment variable name {name!r} is not valid")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", self.key):
            raise InputError(f"program key {self.key!r} must be lower-case letters, digits, . -")


def remote_run_dir(run_id: str) -> str:
    """A run's folder on every worker, relative to the home directory."""
    return f"{REMOTE_ROOT}/runs/{run_id}"


def remote_venv(key: str) -> str:
    """A program's virtual environment on every worker, relative to the home directory."""
    return f"{REMOTE_ROOT}/venv-{key}"


def venv_from_run_dir(key: str) -> str:
    """The same environment seen from a run folder."""
    return f"../../venv-{key}"


MAXTEXT_ENTRY = "maxtext.trainers.pre_train.train"
MAXTEXT_VERSION = "0.2.5"


def maxtext_program(plan: Plan, python: str = "3.12") -> VmProgram:
    """MaxText 0.2.5 on a TPU VM with the recipe's arguments and XLA flags (pure).

    The base config is the installed package's own ``configs/<name>.yml``; MaxText starts JAX's
    distributed system itself on a multi-host VM.
    """
    relative = (plan.recipe.entry.base_config or "configs/base.yml").split("configs/", 1)[-1]
    key = f"maxtext-{MAXTEXT_VERSION}"
    base = f"{venv_from_run_dir(key)}/lib/python{python}/site-packages/maxtext/configs"
    args = tuple(plan.expand(a) for a in plan.program_arg_texts)
    env: tuple[tuple[str, str], ...] = (("PYTHONUNBUFFERED", "1"),)
    if plan.xla_flags:
        env = (("LIBTPU_INIT_ARGS", " ".join(plan.xla_flags)), *env)
    return VmProgram(
        framework="MaxText",
        version=MAXTEXT_VERSION,
        key=key,
        requirements=(f"maxtext[tpu]=={MAXTEXT_VERSION}",),
        python=python,
        args=("-m", MAXTEXT_ENTRY, f"{base}/{relative}", *args),
        env=env,
        secret_env=("HF_TOKEN", "WANDB_API_KEY"),
        log_format=LogFormat.MAXTEXT,
    )
