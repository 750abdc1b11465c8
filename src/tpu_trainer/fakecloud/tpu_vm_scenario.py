"""The ``tpu_vm:`` part of a scenario: what the emulated Cloud TPU API offers (zones, capacity,
how long things take), the VMs already there, and what the workers print for each kind of
command (docs/simulated-cloud.md, "Cloud TPU")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from typing import Annotated, Any

from pydantic import BeforeValidator, ValidationInfo, model_validator
from pydantic.dataclasses import dataclass

from tpu_trainer.fakecloud.schema import (
    AnyText,
    Count,
    Flag,
    Names,
    Seconds,
    Text,
    at_least,
    base_dir,
    items,
    keys,
    one_of,
    problem,
    text_or_file,
)

CAPACITIES = ("ok", "exhausted")
VM_STATES = ("CREATING", "READY", "STOPPED", "PREEMPTED", "REPAIRING")

DEFAULT_TRAIN_LOG = """\
I1122 06:00:05.100000 140211 grpo_main.py:870] --- Launching GRPO pipeline with following config ---
I1122 06:02:41.004000 140211 rl_cluster.py:512] Actor, reference and rollout models are ready
I1122 06:04:44.120000 140211 peft_trainer.py:489] Train step 1 training loss: 0.000057  - training perplexity: 1.000057
I1122 06:05:22.310000 140211 peft_trainer.py:489] Train step 2 training loss: 0.000043  - training perplexity: 1.000043
I1122 06:06:00.020000 140211 peft_trainer.py:489] Train step 3 training loss: 0.000041  - training perplexity: 1.000041
I1122 06:06:38.550000 140211 peft_trainer.py:489] Train step 4 training loss: 0.000040  - training perplexity: 1.000040
"""
"""Worker 0's training output: a Tunix GRPO log shaped like seed 002's run (step 1 compiles,
then ~38 s a step)."""


_TEXTS = ("log", "other_workers_log", "failing_log")
_SCRIPT_KEYS = (
    *_TEXTS,
    *(f"{k}_file" for k in _TEXTS),
    "exit_code",
    "failing_worker",
    "failing_exit_code",
)
INSTALL_LOG = "Successfully installed\n"


def _devices(value: Any) -> dict[int, int]:
    raw = value or {}
    if not isinstance(raw, dict):
        raise problem("expected a mapping of worker number -> JAX devices")
    for key, count in raw.items():
        bad = [x for x in (key, count) if isinstance(x, bool) or not isinstance(x, int) or x < 0]
        if bad:
            raise problem(f"expected worker number: devices, got {key!r}: {count!r}")
    return dict(raw)


def _maybe_count(value: Any) -> int | None:
    return None if value is None else at_least(0)(value)


@dataclass(frozen=True, slots=True)
class ExistingVm:
    """A TPU VM that is there when the scenario starts."""

    name: Text
    zone: Text
    accelerator_type: Text
    runtime_version: Text
    state: Annotated[str, BeforeValidator(one_of(VM_STATES))] = "READY"

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        return keys(
            data,
            ("name", "zone", "accelerator_type", "runtime_version", "state"),
            required=("name", "zone", "accelerator_type", "runtime_version"),
        )


@dataclass(frozen=True, slots=True)
class WorkerScript:
    """What the workers print for one kind of command, and how they exit."""

    log: AnyText = ""
    """Worker 0's output."""
    other_workers_log: AnyText = None
    """Every other worker's output (default: a short line)."""
    exit_code: Count = 0
    """Every worker's exit status (but the failing worker's)."""
    failing_worker: Annotated[int | None, BeforeValidator(_maybe_count)] = None
    failing_exit_code: Annotated[int, BeforeValidator(at_least(1))] = 1
    failing_log: AnyText = None
    """The failing worker's output (default: its usual output)."""

    @model_validator(mode="before")
    @classmethod
    def _files(cls, data: Any, info: ValidationInfo) -> Any:
        data = keys(data, _SCRIPT_KEYS)
        if isinstance(data, dict):
            for key in _TEXTS:
                data = text_or_file(data, key, base_dir(info))
            data["log"] = data.get("log") or ""
        return data


def _script(data: Any, default_log: str) -> Any:
    """A script's keys, with the command's usual output when none is given."""
    if isinstance(data, dict) and data.get("log") is None and data.get("log_file") is None:
        return {**data, "log": default_log}
    return data


@dataclass(frozen=True, slots=True)
class TrainScript:
    script: WorkerScript = field(default_factory=lambda: WorkerScript(log=DEFAULT_TRAIN_LOG))
    hang: Flag = False
    """The program never ends by itself: the command returns once the program is stopped by
    its process id (the stop command), or when gcloud is killed."""
    echo_env: Names = ()
    """Variables whose values worker 0 prints (``NAME=value``) when they reach it: a program
    that logs its environment (the tool must redact them)."""
    preempt_after_step: Annotated[int | None, BeforeValidator(_maybe_count)] = None
    """The VM is PREEMPTED after this step of its first training run: worker 0's MaxText log
    has steps 0..N (a durable checkpoint every ``checkpoint_period``) and MaxText's SIGTERM
    stop, the ssh connection drops (exit 255), and the node reads PREEMPTED. A later run with
    the same ``run_name`` restores the last durable checkpoint and reaches the last step."""
    line_seconds: Seconds = 0.0
    """The program prints a line every this many seconds of the scenario's clock (0: all at
    once), which the hang watchdog of the run that follows it moves on: a program whose run's
    process died is still running when ``resume`` follows it again."""

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        data = keys(
            data,
            (*_SCRIPT_KEYS, "hang", "echo_env", "preempt_after_step", "line_seconds"),
            optional=True,
        )
        if not isinstance(data, dict):
            return data
        script = {k: v for k, v in data.items() if k in _SCRIPT_KEYS}
        rest = {k: v for k, v in data.items() if k not in _SCRIPT_KEYS}
        return {**rest, "script": _script(script, DEFAULT_TRAIN_LOG)}


@dataclass(frozen=True, slots=True)
class TpuVmScenario:
    zones: Names = ()
    """Zones that offer TPU VMs (default: the region's -a, -b and -c)."""
    creating_polls: Count = 1
    """API calls a new VM stays CREATING (its create operation runs as long) before READY."""
    queued_polls: Count = 1
    """API calls a new queued resource stays WAITING_FOR_RESOURCES before it provisions."""
    capacity: Annotated[str, BeforeValidator(one_of(CAPACITIES))] = "ok"
    """``exhausted``: every create's operation fails with code 8, "There is no more capacity in
    the zone"; queued resources wait for ever."""
    preempt_spot_after: Annotated[int | None, BeforeValidator(_maybe_count)] = None
    """API calls a spot VM stays READY before it is PREEMPTED (its queued resource then
    SUSPENDED); none: spot capacity is never taken back."""
    existing: Annotated[tuple[ExistingVm, ...], BeforeValidator(items)] = ()
    install: WorkerScript = field(default_factory=WorkerScript)
    devices: Annotated[Mapping[int, int], BeforeValidator(_devices)] = field(default_factory=dict)
    """Worker -> local JAX devices it reports (default: all of its chips)."""
    train: TrainScript = field(default_factory=TrainScript)

    @model_validator(mode="before")
    @classmethod
    def _keys(cls, data: Any) -> Any:
        data = keys(
            data,
            (
                "zones",
                "creating_polls",
                "queued_polls",
                "capacity",
                "preempt_spot_after",
                "existing",
                "install",
                "devices",
                "train",
            ),
            optional=True,
        )
        if not isinstance(data, dict):
            return data
        install = data.get("install")
        return {**data, "install": _script({} if install is None else install, INSTALL_LOG)}
