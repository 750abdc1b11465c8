"""The AOT compile's command: MaxText's ``train_compile`` for the target TPU topology, run on
this CPU with the recipe's arguments (local ones replaced), and the key of its cached answer.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.errors import TpuTrainerError
from tpu_trainer.frameworks.maxtext.compile_targets import compile_table
from tpu_trainer.frameworks.maxtext.request import MaxTextRequest
from tpu_trainer.plan.slices import Slice

ENTRY_MODULE = "maxtext.trainers.pre_train.train_compile"
CACHE_FORMAT = 1

# Runs ENTRY_MODULE as ``python -m`` would, with MaxText's write to /dev/termination-log (on a
# configuration error; meant for Kubernetes) sent to a file of this compile's own folder.
_LAUNCHER = """\
import builtins, runpy, sys
_target, _module = sys.argv[1], sys.argv[2]
_open = builtins.open
def _guarded_open(file, *args, **kwargs):
    return _open(_target if file == "/dev/termination-log" else file, *args, **kwargs)
builtins.open = _guarded_open
sys.argv = [_module, *sys.argv[3:]]
runpy.run_module(_module, run_name="__main__", alter_sys=True)
"""

_SET_HERE = compile_table().set_by_the_check
"""Keys the check sets itself; the recipe's values (output buckets, profilers) are dropped."""
_NOT_COMPILED = compile_table().not_compiled
"""Keys that do not change the compiled step (left out of the cache key, kept in the argv)."""


class AotUnavailableError(TpuTrainerError):
    """The MaxText runtime, which holds the compiler, is not installed."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AotSetup:
    """Where the compiler lives and where answers are kept."""

    python: Path
    maxtext_dir: Path
    """The installed ``maxtext`` package (its ``configs/`` hold base.yml)."""
    version: str
    cache: Path
    """Folder of cached results (``<cache>/aot``)."""

    @classmethod
    def installed(cls, env: dict[str, str] | None = None) -> AotSetup:
        from tpu_trainer.infra.tool_env import cache_dir
        from tpu_trainer.runtime.manager import MAXTEXT, is_installed, runtime_python

        python = runtime_python(MAXTEXT, env)
        found = sorted(python.parent.parent.glob("lib/python3*/site-packages/maxtext"))
        if not is_installed(MAXTEXT, env) or not found:
            raise AotUnavailableError(
                f"the MaxText {MAXTEXT.version} runtime (which holds the AOT compiler) is "
                "not installed",
                fix="run `tpu-trainer runtime install maxtext` (about 8 minutes, 2.8 GB)",
            )
        return cls(
            python=python,
            maxtext_dir=found[0],
            version=MAXTEXT.version,
            cache=cache_dir(env) / "aot",
        )


# ---- the command (pure) -----------------------------------------------------------------


def compile_topology_args(slice_: Slice, num_slices: int = 1) -> list[str]:
    """``compile_topology=...`` and friends for ``slice_``: MaxText's name (``tpu7x-8``,
    ``tpu7x-256`` for 4x4x8, ``v6e-16``, ``v5p-128``) where it has one for this topology,
    else the topology through ``internal_compile`` (``tpu7x:4x4x16``)."""
    names = compile_table().targets.get(slice_.family)
    if names is None:
        raise AotUnavailableError(
            f"{slice_.accelerator.name} has no AOT compile target",
            fix="check a TPU slice (tpu7x-..., v6e-..., v5p-...)",
        )
    number = slice_.xpk_number
    default = Slice.parse(slice_.device_type_number).topology == slice_.topology
    named = number <= names.named_up_to or number in names.named_also
    slices = f"compile_topology_num_slices={num_slices}"
    if default and named:
        return [f"compile_topology={names.prefix}-{number}", slices]
    return [
        f"compile_topology={names.platform}:{slice_.topology_name}",
        "internal_compile=true",
        f"internal_compile_num_devices={slice_.jax_devices * num_slices}",
        slices,
    ]


def base_config_path(maxtext_dir: Path, recipe_base: str) -> Path:
    """The recipe's base config (``maxtext/configs/base.yml``) inside the installed package."""
    return maxtext_dir / "configs" / recipe_base.split("configs/", 1)[-1]


def aot_args(request: MaxTextRequest, work: Path) -> list[str]:
    """The recipe's MaxText arguments with the local ones replaced (pure)."""
    kept = [f"{k}={v}" for k, v in request.args.items() if k not in _SET_HERE]
    return [
        f"run_name=aot-{request.slice.device_type}",
        f"base_output_directory={work / 'output'}",
        f"jax_cache_dir={work / 'jax_cache'}",
        "log_config=false",
        *kept,
        *compile_topology_args(request.slice, request.num_slices),
    ]


def aot_argv(setup: AotSetup, request: MaxTextRequest, work: Path) -> list[str]:
    """``python -c <launcher> <termination file> train_compile <base.yml> key=value ...``."""
    return [
        str(setup.python),
        "-c",
        _LAUNCHER,
        str(work / "termination-log"),
        ENTRY_MODULE,
        str(base_config_path(setup.maxtext_dir, request.base_config)),
        *aot_args(request, work),
    ]


def aot_env(request: MaxTextRequest, work: Path) -> dict[str, str]:
    """Compile-only settings: no TPU is opened, libtpu's lock and temp files stay private."""
    env = {
        "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
        "JAX_PLATFORMS": "cpu",
        "TMPDIR": str(work / "tmp"),
        "PYTHONUNBUFFERED": "1",
    }
    if request.xla_flags:
        env["LIBTPU_INIT_ARGS"] = " ".join(request.xla_flags)
    return env


def cache_key(request: MaxTextRequest, version: str) -> str:
    """sha256 of what decides the compiled step: arguments, MaxText version, slice, slices."""
    args = sorted((k, v) for k, v in request.args.items() if k not in _SET_HERE | _NOT_COMPILED)
    material = {
        "format": CACHE_FORMAT,
        "args": args,
        "base_config": request.base_config.split("configs/", 1)[-1],
        "maxtext": version,
        "topology": request.slice.device_type,
        "num_slices": request.num_slices,
        "xla_flags": list(request.xla_flags),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()
