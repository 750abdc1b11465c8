"""The Ray job's entry script: MaxText's trainer under Ray Train's ``JaxTrainer``.

Pure. The script is what Ray runs as the job's driver (on the head node): ``JaxTrainer`` starts
one worker per TPU host (or CPU workers with ``use_tpu=False``) and each runs MaxText's
``main`` with the recipe's arguments. Those arguments are Python literals inside the script; the
job's entry point names only the interpreter and the script's path (quoted), so nothing from the
recipe reaches the shell Ray starts the entry point with.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tpu_trainer.catalog.accelerators import Family
from tpu_trainer.errors import InputError
from tpu_trainer.plan.plan import Plan
from tpu_trainer.plan.slices import Slice
from tpu_trainer.plan.submit_values import is_secret_name

ENTRY_SCRIPT = "train_entry.py"
JOB_ENV: Mapping[str, str] = {"RAY_DEDUP_LOGS": "0", "PYTHONUNBUFFERED": "1"}
"""The job's environment: every worker's lines kept (no ``[repeated Nx across cluster]``)."""
RAY_ACCELERATOR_TYPES: Mapping[Family, str] = {
    Family.V4: "TPU-V4",
    Family.V5E: "TPU-V5LITEPOD",
    Family.V5P: "TPU-V5P",
    Family.V6E: "TPU-V6E",
    Family.V7: "TPU-V7X",
}
"""Ray's ``accelerator_type`` of each TPU family (``ray.util.accelerators``)."""

TPU_WORKER_ENV: Mapping[str, str] = {"JAX_PLATFORMS": "tpu", "ENABLE_PJRT_COMPATIBILITY": "true"}


@dataclass(frozen=True, slots=True, kw_only=True)
class JaxScaling:
    """``ScalingConfig`` of the entry script's ``JaxTrainer``."""

    use_tpu: bool
    num_workers: int
    topology: str | None = None
    accelerator_type: str | None = None
    resources_per_worker: Mapping[str, float] = field(default_factory=dict)
    placement_strategy: str | None = None

    @classmethod
    def for_slice(cls, slc: Slice, num_slices: int) -> JaxScaling:
        """One worker per TPU host of every slice, each holding all of its host's chips."""
        accelerator = RAY_ACCELERATOR_TYPES.get(slc.family)
        if accelerator is None:
            raise InputError(
                f"{slc.device_type} is not a TPU slice Ray Train can schedule",
                fix=f"use a TPU device type ({', '.join(f.value for f in RAY_ACCELERATOR_TYPES)})",
            )
        return cls(
            use_tpu=True,
            num_workers=slc.hosts * num_slices,
            topology=slc.topology_name,
            accelerator_type=accelerator,
            resources_per_worker={"TPU": slc.chips_per_host},
            placement_strategy="SPREAD",
        )

    @classmethod
    def on_cpu(cls, num_workers: int = 1) -> JaxScaling:
        """CPU workers (``use_tpu=False``): a Ray head on this machine."""
        return cls(use_tpu=False, num_workers=num_workers)


@dataclass(frozen=True, slots=True, kw_only=True)
class EntrySpec:
    """What the entry script runs: MaxText's trainer with the recipe's arguments."""

    run_id: str
    title: str
    """One line for the script's docstring (model, slice)."""
    module: str
    """MaxText's trainer module (``maxtext.trainers.pre_train.train``)."""
    base_config: str
    """The base config inside the framework's package (``configs/base.yml``)."""
    args: tuple[str, ...]
    scaling: JaxScaling
    worker_env: Mapping[str, str]
    run_name: str
    storage_path: str | None = None
    """Ray Train's storage (``RunConfig.storage_path``); None keeps Ray's default."""


# ---- the job's arguments ------------------------------------------------------------------------
def relative_base_config(recipe_base: str | None) -> str:
    """The recipe's base config relative to the framework package (``configs/base.yml``)."""
    return "configs/" + (recipe_base or "configs/base.yml").split("configs/", 1)[-1]


def tpu_args(plan: Plan) -> tuple[str, ...]:
    """The recipe's MaxText arguments with the submit-time variables filled in."""
    args = tuple(plan.expand(a) for a in plan.program_arg_texts)
    unfilled = [a for a in args if "${" in a]
    secrets = [a for a in unfilled if is_secret_name(a.split("${", 1)[1].split("}", 1)[0])]
    if secrets:
        raise InputError(
            f"`{secrets[0][:80]}` refers to a secret; the Ray job's arguments are not read by a "
            "shell, so nothing would fill it (and the tool never writes its value)",
            fix="train through xpk (--backend gke), where the pod's shell reads it from the "
            "workload's environment, or drop the argument",
        )
    if unfilled:
        raise InputError(
            f"arguments still refer to variables the configuration does not fill: {unfilled[:3]}",
            fix="give them with --var NAME=VALUE",
        )
    return args


def xla_env(plan: Plan) -> dict[str, str]:
    """The recipe's XLA flags, as ``LIBTPU_INIT_ARGS`` (what the recipes export on TPU hosts)."""
    flags = " ".join(f for f in plan.xla_flags if f.strip())
    return {"LIBTPU_INIT_ARGS": flags} if flags else {}


def tpu_entry(plan: Plan, run_id: str) -> EntrySpec:
    """The entry script of a run on the plan's TPU slices."""
    return EntrySpec(
        run_id=run_id,
        title=f"{plan.model} on {plan.num_slices} x {plan.slice.device_type}",
        module=plan.recipe.entry.module,
        base_config=relative_base_config(plan.recipe.entry.base_config),
        args=tpu_args(plan),
        scaling=JaxScaling.for_slice(plan.slice, plan.num_slices),
        worker_env={**TPU_WORKER_ENV, **xla_env(plan)},
        run_name=plan.workload_name,
    )


def submission_id(run_id: str) -> str:
    return f"tpu-trainer-{run_id}"


def entrypoint(python: str, script: str) -> str:
    """The job's entry point: ``python <script>``, quoted for the shell Ray runs it with."""
    return shlex.join([python, script])


# ---- the entry script ---------------------------------------------------------------------------
def _literal(value: object) -> str:
    """A Python literal of a string, a number or a small dict, on one line (JSON's spelling of
    strings and numbers is Python's)."""
    return json.dumps(value, ensure_ascii=False)


def _block(value: Sequence[str] | Mapping[str, str]) -> str:
    """A list or dict of strings as a Python literal, one item a line."""
    if isinstance(value, Mapping):
        items = [f"    {_literal(k)}: {_literal(v)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + "\n}" if items else "{}"
    lines = [f"    {_literal(v)}," for v in value]
    return "[\n" + "\n".join(lines) + "\n]" if lines else "[]"


def _scaling_lines(s: JaxScaling) -> list[str]:
    lines = [f"use_tpu={s.use_tpu!r},", f"num_workers={s.num_workers},"]
    if s.topology is not None:
        lines.append(f"topology={_literal(s.topology)},")
    if s.accelerator_type is not None:
        lines.append(f"accelerator_type={_literal(s.accelerator_type)},")
    if s.resources_per_worker:
        lines.append(f"resources_per_worker={_literal(dict(s.resources_per_worker))},")
    if s.placement_strategy is not None:
        lines.append(f"placement_strategy={_literal(s.placement_strategy)},")
    return lines


def render_entry(spec: EntrySpec) -> str:
    """The Python file Ray runs as the job's driver (on the head node)."""
    scaling = "\n".join("        " + line for line in _scaling_lines(spec.scaling))
    storage = f"\n        storage_path={_literal(spec.storage_path)}," if spec.storage_path else ""
    return f'''"""{spec.title}: MaxText under Ray Train's JaxTrainer (tpu-trainer run {spec.run_id}).

Ray runs this file as the job's driver on the head node. JaxTrainer starts one worker per TPU
host; every worker runs MaxText's trainer with the recipe's arguments below.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from ray.train.v2.api.config import RunConfig, ScalingConfig
from ray.train.v2.jax import JaxTrainer

MODULE = {_literal(spec.module)}
BASE_CONFIG = {_literal(spec.base_config)}
"""The base config inside the framework's package."""
ARGS = {_block(spec.args)}
WORKER_ENV = {_block(spec.worker_env)}


def base_config(module: str, relative: str) -> str:
    """``relative`` inside the package that holds ``module`` (``maxtext``, ``src.MaxText``...)."""
    parts = module.split(".")
    for depth in range(1, len(parts)):
        spec = importlib.util.find_spec(".".join(parts[:depth]))
        for folder in (spec.submodule_search_locations or []) if spec else []:
            candidate = Path(folder) / relative
            if candidate.is_file():
                return str(candidate)
    raise FileNotFoundError(f"no {{relative}} in the packages of {{module}}")


def train_loop_per_worker(config: dict[str, Any]) -> None:
    """On each worker: MaxText's ``main`` with the base config and the arguments."""
    base = base_config(config["module"], config["base_config"])
    main = importlib.import_module(config["module"]).main
    main([config["module"], base, *config["args"]])


def scaling_config() -> ScalingConfig:
    return ScalingConfig(
{scaling}
    )


def run_config() -> RunConfig:
    return RunConfig(
        name={_literal(spec.run_name)},{storage}
        worker_runtime_env={{"env_vars": WORKER_ENV}},
    )


def main() -> None:
    trainer = JaxTrainer(
        train_loop_per_worker=train_loop_per_worker,
        train_loop_config={{"module": MODULE, "base_config": BASE_CONFIG, "args": ARGS}},
        scaling_config=scaling_config(),
        run_config=run_config(),
    )
    trainer.fit()


if __name__ == "__main__":
    main()
'''
