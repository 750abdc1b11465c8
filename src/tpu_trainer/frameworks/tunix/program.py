"""Tunix 0.1.7 GRPO: the program a TPU VM runs, and its training log read into step records.

The program is a complete configuration file (see :mod:`tpu_trainer.frameworks.tunix.config`) and a
small launcher that starts JAX's distributed system before anything else touches JAX (a
multi-host slice needs it; Tunix's ``grpo_main`` does not do it), then hands over to
``tunix.cli.grpo_main``. ``HF_TOKEN`` (the tokenizer and weights come from Hugging Face) and
``WANDB_API_KEY`` reach it through the environment only.

Tunix logs one line per training step from its trainer (absl prefix first)::

    I1122 06:12:03.512000 139872 peft_trainer.py:489] Train step 3 training loss: 0.000041  - training perplexity: 1.000041

Steps are 1-based there; a :class:`StepRecord` counts from 0 like MaxText's (``Train step 1``
is step 0). Tunix prints no step time: a step's seconds are the time between its line and the
one before (for the first step, since the first timestamped line: start-up included).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tpu_trainer.frameworks.tunix.config import GrpoSettings, MemoryProfile, render_grpo_config
from tpu_trainer.frameworks.tunix.config import with_profile as _with_profile
from tpu_trainer.frameworks.vm_program import LogFormat, RemoteFile, VmProgram
from tpu_trainer.infra.runner import CommandRunner
from tpu_trainer.metrics.records import (
    FactKind,
    ParsedLog,
    StartupFact,
    StepRecord,
    absl_time,
    elapsed,
    summarize_startup,
)

TUNIX_VERSION = "0.1.7"
CONFIG_FILE = "grpo.yaml"
LAUNCHER_FILE = "run_grpo.py"
SECRET_ENV = ("HF_TOKEN", "WANDB_API_KEY")

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf"
_STEP = re.compile(rf"Train step (\d+) training loss: ({_NUM})\s+-\s+training perplexity: ({_NUM})")
_NEEDLE = "Train step "

_LAUNCHER = '''"""Started by tpu-trainer on every worker: JAX's distributed system, then Tunix's GRPO."""

import sys

import jax

DISTRIBUTED = {distributed}
if DISTRIBUTED:
    jax.distributed.initialize()  # before anything else uses JAX: one process per host

from absl import app  # noqa: E402
from tunix.cli import grpo_main  # noqa: E402

sys.argv = ["grpo_main", *sys.argv[1:]]
app.run(grpo_main.main)
'''


def render_launcher(*, distributed: bool) -> str:
    """The launcher script (``run_grpo.py CONFIG``)."""
    return _LAUNCHER.replace("{distributed}", "True" if distributed else "False")


def tunix_program(
    settings: GrpoSettings,
    *,
    hosts: int,
    profile: MemoryProfile = MemoryProfile.NONE,
    wandb: bool = False,
) -> VmProgram:
    """Tunix GRPO for a slice of ``hosts`` workers (pure): the configuration with ``profile``
    applied, the launcher, and the environment names it reads."""
    final = _with_profile(settings, profile)
    requirements = [f"google-tunix[prod,cli]=={TUNIX_VERSION}"]
    if wandb:
        requirements.append("wandb")
    hf_hosted = not (final.tokenizer_path or final.model_id).startswith(("/", "gs://"))
    return VmProgram(
        framework="Tunix",
        version=TUNIX_VERSION,
        key=f"tunix-{TUNIX_VERSION}",
        requirements=tuple(requirements),
        files=(
            RemoteFile(name=CONFIG_FILE, text=render_grpo_config(final)),
            RemoteFile(name=LAUNCHER_FILE, text=render_launcher(distributed=hosts > 1)),
        ),
        args=(LAUNCHER_FILE, CONFIG_FILE),
        env=(("PYTHONUNBUFFERED", "1"),),
        secret_env=SECRET_ENV if wandb else SECRET_ENV[:1],
        required_secrets=("HF_TOKEN",) if hf_hosted else (),
        log_format=LogFormat.TUNIX,
    )


# ---- the log ---------------------------------------------------------------------------------
def parse_step(line: str, previous: float | None = None) -> StepRecord | None:
    """A ``Train step N training loss: X - training perplexity: Y`` line (``previous``: the
    timestamp of the line a step's time is counted from)."""
    at = line.find(_NEEDLE)
    if at < 0:
        return None
    m = _STEP.search(line, at)
    if m is None:
        return None
    stamp = absl_time(line[:at])
    seconds = elapsed(previous, stamp) if previous is not None and stamp is not None else 0.0
    return StepRecord(
        step=int(m[1]) - 1,
        seconds=seconds,
        tflops_per_device=None,
        tokens_per_device=None,
        total_weights=None,
        loss=float(m[2]),
        extra={"perplexity": float(m[3])},
        timestamp=stamp,
    )


def read_log(lines: Iterable[str]) -> ParsedLog:
    """Every step of a Tunix log, in the same shape as a MaxText log's."""
    steps: list[StepRecord] = []
    facts: list[StartupFact] = []
    previous: float | None = None
    count = 0
    for line in lines:
        count += 1
        if previous is None:
            previous = absl_time(line)
            if previous is not None:
                facts.append(StartupFact(kind=FactKind.LOG_START, value=previous, text=line[:200]))
        step = parse_step(line, previous)
        if step is not None:
            steps.append(step)
            previous = step.timestamp if step.timestamp is not None else previous
    return ParsedLog(
        steps=tuple(steps), hidden_steps=(), startup=summarize_startup(facts), lines=count
    )


# ---- Tunix's own parser ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True, kw_only=True)
class TunixCase:
    """One way of starting ``grpo_main``: the file, overrides after it, variables unset."""

    config: Path
    overrides: tuple[str, ...] = ()
    unset: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TunixCheck:
    """What Tunix's configuration code made of one case."""

    ok: bool
    error: str | None
    config: dict[str, object]
    """Tunix's view after loading: ``batch_size``, ``max_steps``, ``num_generations``, meshes,
    reward functions."""


def check_with_tunix(
    runner: CommandRunner,
    python: Path,
    cases: Sequence[TunixCase],
    *,
    env: Mapping[str, str] | None = None,
) -> list[TunixCheck]:
    """Load each case with Tunix's own ``GrpoPipeline`` in the Tunix runtime (``python``, on
    CPU) and build what ``grpo_main`` builds before it needs devices: the RL training config
    with its optimizer, the GRPO config, the rollout config, each mesh and the reward
    functions. ``HF_TOKEN`` must be in ``env`` (or this process's environment)."""
    from tpu_trainer.runtime.probe import run_probe

    payload = {
        "cases": [
            {"config": str(c.config), "overrides": list(c.overrides), "unset": list(c.unset)}
            for c in cases
        ]
    }
    answer = run_probe(
        runner,
        python,
        "tunix_config_probe",
        payload,
        timeout=900,
        env={"JAX_PLATFORMS": "cpu", **(env or {})},
    )
    return [
        TunixCheck(
            ok=bool(r.get("ok")),
            error=r["error"] if isinstance(r.get("error"), str) else None,
            config=dict(r.get("config") or {}),
        )
        for r in answer.get("results") or []
    ]
