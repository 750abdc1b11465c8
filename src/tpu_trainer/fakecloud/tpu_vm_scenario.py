"""The ``tpu_vm:`` part of a scenario: TPU VMs and queued resources, and what their workers
print for each kind of command (docs/fake-cloud.md, "TPU VMs")."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpu_trainer.fakecloud.yaml_node import YamlNode

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


@dataclass(frozen=True, slots=True)
class ExistingVm:
    """A TPU VM that is there when the scenario starts."""

    name: str
    zone: str
    accelerator_type: str
    runtime_version: str
    state: str = "READY"


@dataclass(frozen=True, slots=True)
class WorkerScript:
    """What the workers print for one kind of command, and how they exit."""

    log: str = ""
    """Worker 0's output."""
    other_workers_log: str | None = None
    """Every other worker's output (default: a short line)."""
    exit_code: int = 0
    """Every worker's exit status (but the failing worker's)."""
    failing_worker: int | None = None
    failing_exit_code: int = 1
    failing_log: str | None = None
    """The failing worker's output (default: its usual output)."""


@dataclass(frozen=True, slots=True)
class TrainScript:
    script: WorkerScript = field(default_factory=lambda: WorkerScript(log=DEFAULT_TRAIN_LOG))
    hang: bool = False
    """The program never ends by itself: the command returns once the program is stopped by
    its process id (the stop command), or when gcloud is killed."""
    echo_env: tuple[str, ...] = ()
    """Variables whose values worker 0 prints (``NAME=value``) when they reach it: a program
    that logs its environment (the tool must redact them)."""


@dataclass(frozen=True, slots=True)
class TpuVmScenario:
    zones: tuple[str, ...] = ()
    """Zones that offer TPU VMs (default: the region's -a, -b and -c)."""
    creating_polls: int = 1
    """Describes that answer CREATING before a new VM is READY."""
    queued_polls: int = 1
    """Describes of a new queued resource that answer WAITING_FOR_RESOURCES before ACTIVE."""
    capacity: str = "ok"
    """``exhausted``: every create fails with code 8, "There is no more capacity in the zone"."""
    existing: tuple[ExistingVm, ...] = ()
    install: WorkerScript = field(default_factory=WorkerScript)
    devices: Mapping[int, int] = field(default_factory=dict)
    """Worker -> local JAX devices it reports (default: all of its chips)."""
    train: TrainScript = field(default_factory=TrainScript)


def _text(node: YamlNode, key: str, base: Path | None, default: str | None) -> str | None:
    """``key`` as text, or the file named by ``<key>_file`` (relative to the scenario)."""
    if node.data.get(f"{key}_file") is not None:
        if key in node.data:
            raise node.error(f"{key}_file", f"give either {key} or {key}_file, not both")
        path = Path(node.text(f"{key}_file")).expanduser()
        path = path if path.is_absolute() or base is None else base / path
        try:
            return path.read_text(encoding="utf-8")
        except OSError as e:
            raise node.error(f"{key}_file", f"cannot read {path}: {e.strerror}") from None
    value = node.data.get(key, default)
    if value is not None and not isinstance(value, str):
        raise node.error(key, "expected text")
    return value


_TEXTS = ("log", "other_workers_log", "failing_log")
_SCRIPT_KEYS = (
    *_TEXTS,
    *(f"{k}_file" for k in _TEXTS),
    "exit_code",
    "failing_worker",
    "failing_exit_code",
)


def _script(node: YamlNode | None, base: Path | None, default_log: str) -> WorkerScript:
    if node is None:
        return WorkerScript(log=default_log)
    failing = node.data.get("failing_worker")
    return WorkerScript(
        log=_text(node, "log", base, default_log) or "",
        other_workers_log=_text(node, "other_workers_log", base, None),
        exit_code=node.number("exit_code", 0),
        failing_worker=None if failing is None else node.number("failing_worker"),
        failing_exit_code=node.number("failing_exit_code", 1, minimum=1),
        failing_log=_text(node, "failing_log", base, None),
    )


def _train(node: YamlNode | None, base: Path | None) -> TrainScript:
    if node is None:
        return TrainScript()
    node.only(*_SCRIPT_KEYS, "hang", "echo_env")
    script = _script(node, base, DEFAULT_TRAIN_LOG)
    return TrainScript(script=script, hang=node.flag("hang"), echo_env=node.names("echo_env"))


def _install(node: YamlNode | None, base: Path | None) -> WorkerScript:
    if node is not None:
        node.only(*_SCRIPT_KEYS)
    return _script(node, base, "Successfully installed\n")


def parse_tpu_vm(node: YamlNode | None, base: Path | None) -> TpuVmScenario:
    if node is None:
        return TpuVmScenario()
    node.only(
        "zones",
        "creating_polls",
        "queued_polls",
        "capacity",
        "existing",
        "install",
        "devices",
        "train",
    )
    existing = []
    for item in node.items("existing"):
        item.only("name", "zone", "accelerator_type", "runtime_version", "state")
        existing.append(
            ExistingVm(
                name=item.text("name"),
                zone=item.text("zone"),
                accelerator_type=item.text("accelerator_type"),
                runtime_version=item.text("runtime_version"),
                state=item.text("state", "READY", choices=VM_STATES),
            )
        )
    raw: Any = node.data.get("devices") or {}
    if not isinstance(raw, dict):
        raise node.error("devices", "expected a mapping of worker number -> JAX devices")
    counts: dict[int, int] = {}
    for key, value in raw.items():
        bad = [x for x in (key, value) if isinstance(x, bool) or not isinstance(x, int) or x < 0]
        if bad:
            raise node.error("devices", f"expected worker number: devices, got {key!r}: {value!r}")
        counts[key] = value
    return TpuVmScenario(
        zones=node.names("zones"),
        creating_polls=node.number("creating_polls", 1),
        queued_polls=node.number("queued_polls", 1),
        capacity=node.text("capacity", "ok", choices=CAPACITIES),
        existing=tuple(existing),
        install=_install(node.child("install"), base),
        devices=counts,
        train=_train(node.child("train"), base),
    )
